#!/usr/bin/env python3
"""KernelBench Level 1's coverage: every one of the 100 problems with its status, from a results JSON that
`kernelbench.py` wrote (the current one is `bench/results/2026-12-05-h100-kernelbench-l1.json`).

    python3 bench/harness/coverage.py bench/results/2026-12-05-h100-kernelbench-l1.json > coverage.md

A problem the table measured is "yes" with its ratio to `torch.compile`, or "not correct" with the reason in the
row; any other is "not yet", with what it needs (NOT_YET). Only pooling and convolution are out of scope.
"""
import json
import sys

# KernelBench Level 1 (v0.1), by problem number.
NAMES = {
    1: "Square matrix multiplication",
    2: "Standard matrix multiplication",
    3: "Batched matrix multiplication",
    4: "Matrix vector multiplication",
    5: "Matrix scalar multiplication",
    6: "Matmul with large K dimension",
    7: "Matmul with small K dimension",
    8: "Matmul with irregular shapes",
    9: "Tall skinny matrix multiplication",
    10: "3D tensor matrix multiplication",
    11: "4D tensor matrix multiplication",
    12: "Matmul with diagonal matrices",
    13: "Matmul for symmetric matrices",
    14: "Matmul for upper triangular matrices",
    15: "Matmul for lower triangular matrices",
    16: "Matmul with transposed A",
    17: "Matmul with transposed B",
    18: "Matmul with transposed both",
    19: "ReLU",
    20: "LeakyReLU",
    21: "Sigmoid",
    22: "Tanh",
    23: "Softmax",
    24: "LogSoftmax",
    25: "Swish",
    26: "GELU",
    27: "SELU",
    28: "HardSigmoid",
    29: "Softplus",
    30: "Softsign",
    31: "ELU",
    32: "HardTanh",
    33: "BatchNorm",
    34: "InstanceNorm",
    35: "GroupNorm",
    36: "RMSNorm",
    37: "FrobeniusNorm",
    38: "L1Norm",
    39: "L2Norm",
    40: "LayerNorm",
    41: "Max Pooling 1D",
    42: "Max Pooling 2D",
    43: "Max Pooling 3D",
    44: "Average Pooling 1D",
    45: "Average Pooling 2D",
    46: "Average Pooling 3D",
    47: "Sum reduction over a dimension",
    48: "Mean reduction over a dimension",
    49: "Max reduction over a dimension",
    50: "conv standard 2D  square input  square kernel",
    51: "Argmax over a dimension",
    52: "Argmin over a dimension",
    53: "Min reduction over a dimension",
    54: "conv standard 3D  square input  square kernel",
    55: "conv standard 2D  asymmetric input  square kernel",
    56: "conv standard 2D  asymmetric input  asymmetric kernel",
    57: "conv transposed 2D  square input  square kernel",
    58: "conv transposed 3D  asymmetric input  asymmetric kernel",
    59: "conv standard 3D  asymmetric input  square kernel",
    60: "conv standard 3D  square input  asymmetric kernel",
    61: "conv transposed 3D  square input  square kernel",
    62: "conv standard 2D  square input  asymmetric kernel",
    63: "conv standard 2D  square input  square kernel",
    64: "conv transposed 1D",
    65: "conv transposed 2D  square input  asymmetric kernel",
    66: "conv standard 3D  asymmetric input  asymmetric kernel",
    67: "conv standard 1D",
    68: "conv transposed 3D  square input  asymmetric kernel",
    69: "conv transposed 2D  asymmetric input  asymmetric kernel",
    70: "conv transposed 3D  asymmetric input  square kernel",
    71: "conv transposed 2D  asymmetric input  square kernel",
    72: "conv transposed 3D asymmetric input asymmetric kernel   strided padded grouped",
    73: "conv transposed 3D asymmetric input square kernel  strided padded  grouped",
    74: "conv transposed 1D dilated",
    75: "conv transposed 2D asymmetric input asymmetric kernel strided  grouped    padded    dilated",
    76: "conv standard 1D dilated strided",
    77: "conv transposed 3D square input square kernel   padded    dilated    strided",
    78: "conv transposed 2D asymmetric input asymmetric kernel   padded",
    79: "conv transposed 1D asymmetric input square kernel   padded    strided    dilated",
    80: "conv standard 2D square input asymmetric kernel   dilated    padded",
    81: "conv transposed 2D asymmetric input square kernel   dilated    padded    strided",
    82: "conv depthwise 2D square input square kernel",
    83: "conv depthwise 2D square input asymmetric kernel",
    84: "conv depthwise 2D asymmetric input square kernel",
    85: "conv depthwise 2D asymmetric input asymmetric kernel",
    86: "conv depthwise separable 2D",
    87: "conv pointwise 2D",
    88: "MinGPTNewGelu",
    89: "cumsum",
    90: "cumprod",
    91: "cumsum reverse",
    92: "cumsum exclusive",
    93: "masked cumsum",
    94: "MSELoss",
    95: "CrossEntropyLoss",
    96: "HuberLoss",
    97: "ScaledDotProductAttention",
    98: "KLDivLoss",
    99: "TripletMarginLoss",
    100: "HingeLoss",
}

# What each problem the generator does not cover yet needs.
NOT_YET = {}
POOLING = set(range(41, 47))
CONVOLUTION = {50} | set(range(54, 88))


def status(n, row):
    if row is None:
        if n in POOLING:
            return "not yet: pooling (out of scope so far)"
        if n in CONVOLUTION:
            return "not yet: convolution (out of scope so far)"
        return "not yet: " + NOT_YET.get(n, "not declared in the benchmark")
    if "vs_compile" not in row:
        return "error: " + row.get("error", "no measurement")
    ratio = f"{row['vs_compile']:.2f}× `torch.compile`"
    if row["correct"]:
        return f"yes, {ratio}"
    why = ""
    if "ours_rel_error_vs_f64" in row:
        why = (f": {row['ours_rel_error_vs_f64']:.1e} from float64 against PyTorch's "
               f"{row['torch_rel_error_vs_f64']:.1e}")
    return f"generated, {ratio}, **not correct**{why}"


def main():
    with open(sys.argv[1]) as f:
        result = json.load(f)
    measured = {r["problem"]: r for r in result["rows"]}
    yes = sum(1 for n in NAMES if n in measured and measured[n].get("correct"))
    print(f"KernelBench Level 1 on {result['gpu']}, {result['date']} (`{sys.argv[1]}`): {yes} of 100 "
          f"supported and correct.\n")
    print("| # | problem | status |\n|---|---|---|")
    for n in sorted(NAMES):
        print(f"| {n} | {NAMES[n]} | {status(n, measured.get(n))} |")


if __name__ == "__main__":
    main()
