//! KernelBench Level 1 (the matrix products 1–4, 6–11 and 13–18, problems 5, 12, 19–40, 47–53, 88, the scans
//! 89–93, the losses 94–96 and 98–100, and attention 97), each operator declared
//! as a user would write it: once in plain words (`words`) and once in index notation (`index`), both through
//! `#[optiml::kernel]`. Times the plain-words kernel at the v0.1 shapes with L2 flushed, checks that both
//! spellings give the same output, and writes `ours.json` plus sampled outputs for `bench/harness/kernelbench.py`,
//! which times PyTorch eager and `torch.compile` on the same inputs in the same device call, checks the samples
//! and writes the table.
//!
//! ```text
//! cargo run --release -p optiml-examples --example kernelbench -- --out DIR [--only 19,23] [--runs 20]
//! ```

mod harness;

use harness::{Harness, OutBuf};
use optiml::cudarc::driver::{CudaSlice, CudaStream};
use optiml_examples::{BoxError, arg_value, describe, gpu_or_explain};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// The operators in plain words; each lowers to the same program as its index form below.
mod words {
    use optiml::cudarc::driver::CudaSlice;

    #[optiml::kernel("matmul, f32")]
    pub fn p1(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul")]
    pub fn p2(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("batched matmul, f32")]
    pub fn p3(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        batch: usize,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul, f32")]
    pub fn p4(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("gemm")]
    pub fn p6(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul, float32")]
    pub fn p7(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul, f32")]
    pub fn p8(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul")]
    pub fn p9(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("batched matmul, B shared")]
    pub fn p10(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        batch: usize,
        m: usize,
        n: usize,
        k: usize,
    );
    // A 4-D tensor times a matrix: its two leading dimensions are the batch.
    #[optiml::kernel("batched matmul, tensor times a matrix")]
    pub fn p11(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        batch: usize,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul for upper triangular matrices")]
    pub fn p14(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul for lower triangular matrices")]
    pub fn p15(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul, f32")]
    pub fn p13(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul, A transposed")]
    pub fn p16(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul, B transposed")]
    pub fn p17(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );
    #[optiml::kernel("matmul, A transposed, B transposed")]
    pub fn p18(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    );

    #[optiml::kernel("matrix scalar multiplication")]
    pub fn p5(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, s: f32);
    #[optiml::kernel("diag(A) @ B")]
    pub fn p12(a: &CudaSlice<f32>, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("relu")]
    pub fn p19(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
    #[optiml::kernel("leaky relu, negative slope 0.01")]
    pub fn p20(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("sigmoid")]
    pub fn p21(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
    #[optiml::kernel("tanh")]
    pub fn p22(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
    #[optiml::kernel("softmax over the last axis")]
    pub fn p23(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("log-softmax, dim=1")]
    pub fn p24(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("swish")]
    pub fn p25(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
    #[optiml::kernel("gelu")]
    pub fn p26(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
    #[optiml::kernel("selu")]
    pub fn p27(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("hardsigmoid")]
    pub fn p28(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("softplus")]
    pub fn p29(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("softsign")]
    pub fn p30(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("elu, alpha 1.0")]
    pub fn p31(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("hardtanh, min -1, max 1")]
    pub fn p32(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("batch norm, training mode, eps 1e-5")]
    pub fn p33(
        x: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        d0: usize,
        d1: usize,
        d2: usize,
        d3: usize,
    );
    #[optiml::kernel("instance norm")]
    pub fn p34(
        x: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        d0: usize,
        d1: usize,
        d2: usize,
        d3: usize,
    );
    #[optiml::kernel("group norm, groups 8")]
    pub fn p35(
        x: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        d0: usize,
        k: usize,
        d2: usize,
        d3: usize,
    );
    #[optiml::kernel("rms norm over dim 1 of a 4-D tensor, eps 1e-5")]
    pub fn p36(
        x: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        d0: usize,
        d1: usize,
        d2: usize,
        d3: usize,
    );
    #[optiml::kernel("frobenius norm")]
    pub fn p37(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("l1 norm over dim 1")]
    pub fn p38(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("l2 norm along rows")]
    pub fn p39(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("layer norm over the last 3 axes of a 4-D tensor with affine weight and bias")]
    pub fn p40(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        d0: usize,
        d1: usize,
        d2: usize,
        d3: usize,
    );
    #[optiml::kernel("sum over dim 1 of a 3-D tensor, keep dims")]
    pub fn p47(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, d0: usize, d1: usize, d2: usize);
    #[optiml::kernel("mean over dim 1 of a 3-D tensor")]
    pub fn p48(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, d0: usize, d1: usize, d2: usize);
    #[optiml::kernel("max reduction over dim 1 of a 3-D tensor")]
    pub fn p49(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, d0: usize, d1: usize, d2: usize);
    #[optiml::kernel("argmax over dim 1 of a 3-D tensor")]
    pub fn p51(x: &CudaSlice<f32>, y: &mut CudaSlice<i64>, d0: usize, d1: usize, d2: usize);
    #[optiml::kernel("argmin over dim 1 of a 3-D tensor")]
    pub fn p52(x: &CudaSlice<f32>, y: &mut CudaSlice<i64>, d0: usize, d1: usize, d2: usize);
    #[optiml::kernel("min over dim 1 of a 3-D tensor")]
    pub fn p53(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, d0: usize, d1: usize, d2: usize);
    #[optiml::kernel("minGPT new gelu")]
    pub fn p88(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("mse loss")]
    pub fn p94(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("smooth l1 loss")]
    pub fn p96(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("hinge loss")]
    pub fn p100(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("cross entropy loss")]
    pub fn p95(x: &CudaSlice<f32>, t: &CudaSlice<i64>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("kl divergence, batchmean")]
    pub fn p98(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("triplet margin loss, margin 1.0")]
    pub fn p99(
        a: &CudaSlice<f32>,
        p: &CudaSlice<f32>,
        n: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        r: usize,
        c: usize,
    );
    #[optiml::kernel("scaled dot-product attention")]
    pub fn p97(
        q: &CudaSlice<f32>,
        k: &CudaSlice<f32>,
        v: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        b: usize,
        h: usize,
        i: usize,
        j: usize,
        d: usize,
        dv: usize,
        scale: f32,
    );
    #[optiml::kernel("cumsum along dim 1")]
    pub fn p89(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("cumprod along dim 1")]
    pub fn p90(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("reverse cumsum along dim 1")]
    pub fn p91(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("exclusive cumsum along dim 1")]
    pub fn p92(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
    #[optiml::kernel("masked cumsum along dim 1")]
    pub fn p93(x: &CudaSlice<f32>, m: &CudaSlice<bool>, y: &mut CudaSlice<f32>, r: usize, c: usize);
}

/// The same operators in index notation, with other names than the plain words use: renaming changes nothing.
mod index {
    use optiml::cudarc::driver::CudaSlice;

    #[optiml::kernel("c[i, j] = sum(l) x[i, l] * w[l, j]")]
    pub fn p1(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[i, j] = sum(l) x[i, l] * w[l, j]")]
    pub fn p2(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[s, i, j] = sum(l) x[s, i, l] * w[s, l, j]")]
    pub fn p3(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        s: usize,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("y[i, j] = sum(l) x[i, l] * v[l, j]")]
    pub fn p4(
        x: &CudaSlice<f32>,
        v: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[i, j] = sum(l) x[i, l] * w[l, j]")]
    pub fn p6(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[i, j] = sum(l) x[i, l] * w[l, j]")]
    pub fn p7(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[i, j] = sum(l) x[i, l] * w[l, j]")]
    pub fn p8(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[i, j] = sum(l) x[i, l] * w[l, j]")]
    pub fn p9(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[s, i, j] = sum(l) x[s, i, l] * w[l, j]")]
    pub fn p10(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        s: usize,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("y[b, i, j, k] = sum(l) x[b, i, j, l] * w[l, k]")]
    pub fn p11(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        b: usize,
        i: usize,
        j: usize,
        k: usize,
        l: usize,
    );
    #[optiml::kernel("c[i, j] = sum(k) a[i, k] * b[k, j] where i <= k <= j")]
    pub fn p14(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        k: usize,
    );
    #[optiml::kernel("c[i, j] = sum(k) a[i, k] * b[k, j] where j <= k <= i")]
    pub fn p15(
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        k: usize,
    );
    #[optiml::kernel("c[i, j] = sum(l) x[i, l] * w[l, j]")]
    pub fn p13(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[i, j] = sum(l) x[l, i] * w[l, j]")]
    pub fn p16(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[i, j] = sum(l) x[i, l] * w[j, l]")]
    pub fn p17(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );
    #[optiml::kernel("c[i, j] = sum(l) x[l, i] * w[j, l]")]
    pub fn p18(
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
        l: usize,
    );

    #[optiml::kernel("y[i] = x[i] * s")]
    pub fn p5(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, s: f32);
    #[optiml::kernel("out[i, j] = d[i] * m[i, j]")]
    pub fn p12(d: &CudaSlice<f32>, m: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = relu(x[i])")]
    pub fn p19(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = where(x[i] > 0, x[i], 0.01 * x[i])")]
    pub fn p20(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = sigmoid(x[i])")]
    pub fn p21(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = tanh(x[i])")]
    pub fn p22(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel(
        "mx[i] = max(j) x[i, j]; ex[i, j] = exp(x[i, j] - mx[i]); y[i, j] = ex[i, j] / sum(j) ex[i, j]"
    )]
    pub fn p23(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel(
        "mx[i] = max(j) x[i, j]; lse[i] = mx[i] + log(sum(j) exp(x[i, j] - mx[i])); y[i, j] = x[i, j] - lse[i]"
    )]
    pub fn p24(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel("y[i] = x[i] * sigmoid(x[i])")]
    pub fn p25(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2)))")]
    pub fn p26(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel(
        "y[i] = 1.0507009873554805 * where(x[i] > 0, x[i], 1.6732632423543772 * expm1(x[i]))"
    )]
    pub fn p27(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = clamp(x[i] + 3, 0, 6) / 6")]
    pub fn p28(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = where(x[i] > 20, x[i], log1p(exp(x[i])))")]
    pub fn p29(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = x[i] / (1 + abs(x[i]))")]
    pub fn p30(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = where(x[i] > 0, x[i], expm1(x[i]))")]
    pub fn p31(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i] = clamp(x[i], -1, 1)")]
    pub fn p32(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel(
        "mu[c] = mean(n, h, w) x[n, c, h, w]; var[c] = mean(n, h, w) (x[n, c, h, w] - mu[c])^2; \
         y[n, c, h, w] = (x[n, c, h, w] - mu[c]) / sqrt(var[c] + 1e-5)"
    )]
    pub fn p33(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, n: usize, c: usize, h: usize, w: usize);
    #[optiml::kernel(
        "mu[n, c] = mean(h, w) x[n, c, h, w]; var[n, c] = mean(h, w) (x[n, c, h, w] - mu[n, c])^2; \
         y[n, c, h, w] = (x[n, c, h, w] - mu[n, c]) / sqrt(var[n, c] + 1e-5)"
    )]
    pub fn p34(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, n: usize, c: usize, h: usize, w: usize);
    #[optiml::kernel(
        "mu[n, g] = mean(k, h, w) x[n, g, k, h, w]; var[n, g] = mean(k, h, w) (x[n, g, k, h, w] - mu[n, g])^2; \
         y[n, g, k, h, w] = (x[n, g, k, h, w] - mu[n, g]) / sqrt(var[n, g] + 1e-5), g=8"
    )]
    pub fn p35(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, n: usize, k: usize, h: usize, w: usize);
    #[optiml::kernel("y[b, c, h, w] = x[b, c, h, w] / sqrt(mean(c) x[b, c, h, w]^2 + 1e-5)")]
    pub fn p36(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, b: usize, c: usize, h: usize, w: usize);
    #[optiml::kernel("norm = sqrt(sum(i) x[i]^2); y[i] = x[i] / norm")]
    pub fn p37(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y[i, j] = x[i, j] / mean(j) abs(x[i, j])")]
    pub fn p38(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel("y[i, j] = x[i, j] / sqrt(sum(j) x[i, j]^2)")]
    pub fn p39(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel(
        "mu[n] = mean(c, h, w) x[n, c, h, w]; var[n] = mean(c, h, w) (x[n, c, h, w] - mu[n])^2; \
         y[n, c, h, w] = (x[n, c, h, w] - mu[n]) / sqrt(var[n] + 1e-5) * gamma[c, h, w] + beta[c, h, w]"
    )]
    pub fn p40(
        x: &CudaSlice<f32>,
        gamma: &CudaSlice<f32>,
        beta: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        n: usize,
        c: usize,
        h: usize,
        w: usize,
    );
    #[optiml::kernel("y[b, k] = sum(j) x[b, j, k]")]
    pub fn p47(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, b: usize, j: usize, k: usize);
    #[optiml::kernel("y[b, k] = mean(j) x[b, j, k]")]
    pub fn p48(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, b: usize, j: usize, k: usize);
    #[optiml::kernel("y[b, k] = max(j) x[b, j, k]")]
    pub fn p49(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, b: usize, j: usize, k: usize);
    #[optiml::kernel("y[b, k] = argmax(j) x[b, j, k]")]
    pub fn p51(x: &CudaSlice<f32>, y: &mut CudaSlice<i64>, b: usize, j: usize, k: usize);
    #[optiml::kernel("y[b, k] = argmin(j) x[b, j, k]")]
    pub fn p52(x: &CudaSlice<f32>, y: &mut CudaSlice<i64>, b: usize, j: usize, k: usize);
    #[optiml::kernel("y[b, k] = min(j) x[b, j, k]")]
    pub fn p53(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, b: usize, j: usize, k: usize);
    #[optiml::kernel("y[i] = 0.5 * x[i] * (1 + tanh(sqrt(2 / pi) * (x[i] + 0.044715 * x[i]^3)))")]
    pub fn p88(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y = mean(i) (x[i] - t[i])^2")]
    pub fn p94(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel(
        "y = mean(i) where(abs(x[i] - t[i]) < 1, 0.5 * (x[i] - t[i])^2, abs(x[i] - t[i]) - 0.5)"
    )]
    pub fn p96(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel("y = mean(i, j) max(0, 1 - x[i, j] * t[j])")]
    pub fn p100(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
    #[optiml::kernel(
        "mx[i] = max(j) x[i, j]; y = mean(i) (mx[i] + log(sum(j) exp(x[i, j] - mx[i])) - x[i, t[i]]), i64 t"
    )]
    pub fn p95(x: &CudaSlice<f32>, t: &CudaSlice<i64>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel(
        "kl[i] = sum(j) ((-log(x[i, j])) * t[i, j] + where(t[i, j] > 0, t[i, j] * log(t[i, j]), 0)); \
         y = mean(i) kl[i]"
    )]
    pub fn p98(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel(
        "dp[i] = sqrt(sum(j) (a[i, j] - p[i, j] + 1e-6)^2); dn[i] = sqrt(sum(j) (a[i, j] - n[i, j] + 1e-6)^2); \
         y = mean(i) max(dp[i] - dn[i] + 1, 0)"
    )]
    pub fn p99(
        a: &CudaSlice<f32>,
        p: &CudaSlice<f32>,
        n: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
    );
    #[optiml::kernel(
        "sc[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * scale; mx[b, h, i] = max(j) sc[b, h, i, j]; \
         ex[b, h, i, j] = exp(sc[b, h, i, j] - mx[b, h, i]); \
         y[b, h, i, e] = sum(j) ex[b, h, i, j] * v[b, h, j, e] / sum(j) ex[b, h, i, j]"
    )]
    pub fn p97(
        q: &CudaSlice<f32>,
        k: &CudaSlice<f32>,
        v: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        b: usize,
        h: usize,
        i: usize,
        j: usize,
        d: usize,
        e: usize,
        scale: f32,
    );
    #[optiml::kernel("y[i, j] = cumsum(j) x[i, j]")]
    pub fn p89(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel("y[i, j] = cumprod(j) x[i, j]")]
    pub fn p90(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel("y[i, j] = cumsum(j, reverse) x[i, j]")]
    pub fn p91(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel("y[i, j] = cumsum(j, exclusive) x[i, j]")]
    pub fn p92(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, i: usize, j: usize);
    #[optiml::kernel("y[i, j] = cumsum(j) x[i, j] * keep[i, j], bool keep")]
    pub fn p93(
        x: &CudaSlice<f32>,
        keep: &CudaSlice<bool>,
        y: &mut CudaSlice<f32>,
        i: usize,
        j: usize,
    );
}

/// A problem's inputs: its f32 tensors (indexed as `x[0]`, `x[1]` …), then a masked scan's mask or a
/// cross-entropy's class indices.
struct Inputs {
    values: Vec<CudaSlice<f32>>,
    mask: Option<CudaSlice<bool>>,
    targets: Option<CudaSlice<i64>>,
}

/// A problem's input after its f32 tensors.
enum Extra {
    None,
    /// A boolean mask of this shape (93).
    Mask(Vec<usize>),
    /// Class indices of this shape, below the class count (95).
    Targets(Vec<usize>, usize),
}

impl std::ops::Index<usize> for Inputs {
    type Output = CudaSlice<f32>;

    fn index(&self, i: usize) -> &CudaSlice<f32> {
        &self.values[i]
    }
}

impl Inputs {
    /// The mask of a masked scan (a problem with `Problem::mask`); an empty-buffer error for any other.
    fn mask(&self) -> Result<&CudaSlice<bool>, optiml::Error> {
        self.mask
            .as_ref()
            .ok_or_else(|| optiml::Error::BufferLength {
                kernel: "kernelbench",
                arg: "mask",
                got: 0,
                expected: SCAN[0] * SCAN[1],
                axes: format!("[r={}, c={}]", SCAN[0], SCAN[1]),
            })
    }

    /// The class indices of a cross-entropy (a problem with `Extra::Targets`); an empty-buffer error for any
    /// other.
    fn targets(&self) -> Result<&CudaSlice<i64>, optiml::Error> {
        self.targets
            .as_ref()
            .ok_or_else(|| optiml::Error::BufferLength {
                kernel: "kernelbench",
                arg: "t",
                got: 0,
                expected: CE[0],
                axes: format!("[r={}]", CE[0]),
            })
    }
}

/// Launches one spelling of a problem's kernel on the harness's buffers.
type Run = fn(&Arc<CudaStream>, &Inputs, &mut OutBuf) -> Result<(), optiml::Error>;

/// One KernelBench problem.
struct Problem {
    number: u32,
    name: &'static str,
    words: &'static str,
    /// The v0.1 input shapes.
    inputs: Vec<Vec<usize>>,
    /// An input after the f32 ones: a mask (93) or class indices (95).
    extra: Extra,
    /// Floating-point operations, for a matrix product (compute-bound: its rate is FLOP/s, not bytes).
    flops: Option<f64>,
    /// The output's shape; `true` for indices (i64).
    output: (Vec<usize>, bool),
    params: Vec<f32>,
    run: [Run; 2],
}

fn f32_out(out: &mut OutBuf) -> &mut CudaSlice<f32> {
    match out {
        OutBuf::F32(b) => b,
        OutBuf::I64(_) => {
            unreachable!("every problem's output type is declared beside its kernels")
        }
    }
}

fn i64_out(out: &mut OutBuf) -> &mut CudaSlice<i64> {
    match out {
        OutBuf::I64(b) => b,
        OutBuf::F32(_) => {
            unreachable!("every problem's output type is declared beside its kernels")
        }
    }
}

/// A pointwise problem on one tensor of `shape`, called with the flat buffers.
macro_rules! map {
    ($n:expr, $name:expr, $w:literal, $shape:expr, $f:ident) => {
        Problem {
            number: $n,
            name: $name,
            words: $w,
            inputs: vec![$shape.to_vec()],
            extra: Extra::None,
            flops: None,
            output: ($shape.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::$f(s, &x[0], f32_out(y)),
                |s, x, y| index::$f(s, &x[0], f32_out(y)),
            ],
        }
    };
}

/// A loss of predictions of [`LOSS`]'s shape and targets of shape `$t`, to one value (KernelBench's 94, 96 and
/// 100).
macro_rules! loss {
    ($n:expr, $name:expr, $w:literal, $t:expr, $f:ident) => {
        Problem {
            number: $n,
            name: $name,
            words: $w,
            inputs: vec![LOSS.to_vec(), $t.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (vec![], false),
            params: vec![],
            run: [
                |s, x, y| words::$f(s, &x[0], &x[1], f32_out(y)),
                |s, x, y| index::$f(s, &x[0], &x[1], f32_out(y)),
            ],
        }
    };
}

/// A matrix product `[m, k] · [k, n]` (the inputs as KernelBench stores them, transposed or not), both spellings with the
/// extents in the wrappers' order (m, n, k).
macro_rules! mm {
    ($n:expr, $name:expr, $w:literal, $a:expr, $b:expr, [$m:expr, $nn:expr, $k:expr], $f:ident) => {
        Problem {
            number: $n,
            name: $name,
            words: $w,
            inputs: vec![$a.to_vec(), $b.to_vec()],
            extra: Extra::None,
            flops: Some(2.0 * $m as f64 * $nn as f64 * $k as f64),
            output: (vec![$m, $nn], false),
            params: vec![],
            run: [
                |s, x, y| words::$f(s, &x[0], &x[1], f32_out(y), $m, $nn, $k),
                |s, x, y| index::$f(s, &x[0], &x[1], f32_out(y), $m, $nn, $k),
            ],
        }
    };
    ($n:expr, $name:expr, $w:literal, $a:expr, $b:expr, [$batch:expr, $m:expr, $nn:expr, $k:expr], $f:ident) => {
        Problem {
            number: $n,
            name: $name,
            words: $w,
            inputs: vec![$a.to_vec(), $b.to_vec()],
            extra: Extra::None,
            flops: Some(2.0 * $batch as f64 * $m as f64 * $nn as f64 * $k as f64),
            output: (vec![$batch, $m, $nn], false),
            params: vec![],
            run: [
                |s, x, y| words::$f(s, &x[0], &x[1], f32_out(y), $batch, $m, $nn, $k),
                |s, x, y| index::$f(s, &x[0], &x[1], f32_out(y), $batch, $m, $nn, $k),
            ],
        }
    };
}

/// A triangular product of two 4096² matrices (14, 15). Its FLOP count is the useful work, the products inside
/// the triangles (n(n+1)(n+2)/6 multiply-adds), not the full product's 2n³.
macro_rules! triangular {
    ($n:expr, $name:expr, $w:literal, $f:ident) => {
        Problem {
            number: $n,
            name: $name,
            words: $w,
            inputs: vec![vec![TRI, TRI], vec![TRI, TRI]],
            extra: Extra::None,
            flops: Some(TRI as f64 * (TRI + 1) as f64 * (TRI + 2) as f64 / 3.0),
            output: (vec![TRI, TRI], false),
            params: vec![],
            run: [
                |s, x, y| words::$f(s, &x[0], &x[1], f32_out(y), TRI, TRI, TRI),
                |s, x, y| index::$f(s, &x[0], &x[1], f32_out(y), TRI, TRI, TRI),
            ],
        }
    };
}

/// The side of the triangular problems' matrices.
const TRI: usize = 4096;

/// A scan along dim 1 of [`SCAN`] (89–93), with a mask of the same shape when `$mask`.
macro_rules! scan {
    ($n:expr, $name:expr, $w:literal, $f:ident) => {
        Problem {
            number: $n,
            name: $name,
            words: $w,
            inputs: vec![SCAN.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (SCAN.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::$f(s, &x[0], f32_out(y), SCAN[0], SCAN[1]),
                |s, x, y| index::$f(s, &x[0], f32_out(y), SCAN[0], SCAN[1]),
            ],
        }
    };
    ($n:expr, $name:expr, $w:literal, $f:ident, mask) => {
        Problem {
            number: $n,
            name: $name,
            words: $w,
            inputs: vec![SCAN.to_vec()],
            extra: Extra::Mask(SCAN.to_vec()),
            flops: None,
            output: (SCAN.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::$f(s, &x[0], x.mask()?, f32_out(y), SCAN[0], SCAN[1]),
                |s, x, y| index::$f(s, &x[0], x.mask()?, f32_out(y), SCAN[0], SCAN[1]),
            ],
        }
    };
}

/// A problem on one 2-D tensor `[r, c]` reduced or normalised along `c`.
macro_rules! rows {
    ($n:expr, $name:expr, $w:literal, $shape:expr, $f:ident) => {
        Problem {
            number: $n,
            name: $name,
            words: $w,
            inputs: vec![$shape.to_vec()],
            extra: Extra::None,
            flops: None,
            output: ($shape.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::$f(s, &x[0], f32_out(y), ROWS[0], ROWS[1]),
                |s, x, y| index::$f(s, &x[0], f32_out(y), ROWS[0], ROWS[1]),
            ],
        }
    };
}

/// A reduction over dim 1 of the `[128, 4096, 4095]` tensor.
macro_rules! dim1 {
    ($n:expr, $name:expr, $w:literal, $f:ident, $out:ident, $index:expr) => {
        Problem {
            number: $n,
            name: $name,
            words: $w,
            inputs: vec![R3.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (vec![R3[0], R3[2]], $index),
            params: vec![],
            run: [
                |s, x, y| words::$f(s, &x[0], $out(y), R3[0], R3[1], R3[2]),
                |s, x, y| index::$f(s, &x[0], $out(y), R3[0], R3[1], R3[2]),
            ],
        }
    };
}

/// Problem 5's scalar: KernelBench multiplies by 3.14, not by π.
#[allow(clippy::approx_constant)]
const SCALAR: f32 = 3.14;

const MAP: [usize; 2] = [4096, 393216];
const ROWS: [usize; 2] = [4096, 393216];
const ROWS38: [usize; 2] = [32768, 65535];
const NORM4: [usize; 4] = [112, 64, 512, 512];
/// Problem 33's input (batch norm), a smaller batch than the other norms'.
const BN4: [usize; 4] = [64, 64, 512, 512];
const R3: [usize; 3] = [128, 4096, 4095];
const LOSS: [usize; 2] = [32768, 32768];
const SCAN: [usize; 2] = [32768, 32768];
/// Problem 95's logits (rows, classes); its targets are one class index per row.
const CE: [usize; 2] = [32768, 4096];

/// Problem 98's predictions and targets.
const KL: [usize; 2] = [16384, 16384];
/// Problem 99's anchor, positive and negative.
const TRIPLET: [usize; 2] = [32768, 8192];
/// Problem 97's queries, keys and values: [batch, heads, positions, features].
const ATT: [usize; 4] = [32, 32, 512, 1024];
/// PyTorch's default attention scale for [`ATT`], `1/sqrt(features)` (exact in f32).
const ATT_SCALE: f32 = 0.03125;

fn problems() -> Vec<Problem> {
    vec![
        mm!(
            1,
            "Square matmul",
            "matmul, f32",
            [4096, 4096],
            [4096, 4096],
            [4096, 4096, 4096],
            p1
        ),
        mm!(
            2,
            "Standard matmul",
            "matmul",
            [2048, 8192],
            [8192, 4096],
            [2048, 4096, 8192],
            p2
        ),
        mm!(
            3,
            "Batched matmul",
            "batched matmul, f32",
            [128, 512, 1024],
            [128, 1024, 2048],
            [128, 512, 2048, 1024],
            p3
        ),
        mm!(
            4,
            "Matrix × vector",
            "matmul, f32",
            [2048, 1048576],
            [1048576, 1],
            [2048, 1, 1048576],
            p4
        ),
        mm!(
            6,
            "Matmul, large K",
            "gemm",
            [256, 524288],
            [524288, 256],
            [256, 256, 524288],
            p6
        ),
        mm!(
            7,
            "Matmul, small K",
            "matmul, float32",
            [32768, 64],
            [64, 32768],
            [32768, 32768, 64],
            p7
        ),
        mm!(
            8,
            "Matmul, irregular shapes",
            "matmul, f32",
            [8205, 2949],
            [2949, 5921],
            [8205, 5921, 2949],
            p8
        ),
        mm!(
            9,
            "Tall skinny matmul",
            "matmul",
            [32768, 32],
            [32, 32768],
            [32768, 32768, 32],
            p9
        ),
        mm!(
            10,
            "3D tensor × matrix",
            "batched matmul, B shared",
            [16, 1024, 2048],
            [2048, 768],
            [16, 1024, 768, 2048],
            p10
        ),
        // einsum("bijl,lk->bijk"): in words a batch of b·i matrices, in index notation the 4-D tensor itself.
        Problem {
            number: 11,
            name: "4D tensor × matrix",
            words: "batched matmul, tensor times a matrix",
            inputs: vec![vec![8, 256, 512, 256], vec![256, 768]],
            extra: Extra::None,
            flops: Some(2.0 * (8 * 256 * 512) as f64 * 768.0 * 256.0),
            output: (vec![8, 256, 512, 768], false),
            params: vec![],
            run: [
                |s, x, y| words::p11(s, &x[0], &x[1], f32_out(y), 8 * 256, 512, 768, 256),
                |s, x, y| index::p11(s, &x[0], &x[1], f32_out(y), 8, 256, 512, 768, 256),
            ],
        },
        triangular!(
            14,
            "Upper triangular matmul",
            "matmul for upper triangular matrices",
            p14
        ),
        triangular!(
            15,
            "Lower triangular matmul",
            "matmul for lower triangular matrices",
            p15
        ),
        // KernelBench makes A and B symmetric; a product of symmetric matrices is a plain product.
        mm!(
            13,
            "Symmetric matmul",
            "matmul, f32",
            [4096, 4096],
            [4096, 4096],
            [4096, 4096, 4096],
            p13
        ),
        mm!(
            16,
            "Matmul, A transposed",
            "matmul, A transposed",
            [8192, 2048],
            [8192, 4096],
            [2048, 4096, 8192],
            p16
        ),
        mm!(
            17,
            "Matmul, B transposed",
            "matmul, B transposed",
            [2048, 8192],
            [4096, 8192],
            [2048, 4096, 8192],
            p17
        ),
        mm!(
            18,
            "Matmul, both transposed",
            "matmul, A transposed, B transposed",
            [8192, 2048],
            [4096, 8192],
            [2048, 4096, 8192],
            p18
        ),
        Problem {
            number: 5,
            name: "Matrix scalar multiplication",
            words: "matrix scalar multiplication",
            inputs: vec![vec![65536, 16384]],
            extra: Extra::None,
            flops: None,
            output: (vec![65536, 16384], false),
            params: vec![SCALAR],
            run: [
                |s, x, y| words::p5(s, &x[0], f32_out(y), SCALAR),
                |s, x, y| index::p5(s, &x[0], f32_out(y), SCALAR),
            ],
        },
        Problem {
            number: 12,
            name: "diag(A) @ B",
            words: "diag(A) @ B",
            inputs: vec![vec![4096], vec![4096, 4096]],
            extra: Extra::None,
            flops: None,
            output: (vec![4096, 4096], false),
            params: vec![],
            run: [
                |s, x, y| words::p12(s, &x[0], &x[1], f32_out(y)),
                |s, x, y| index::p12(s, &x[0], &x[1], f32_out(y)),
            ],
        },
        map!(19, "ReLU", "relu", MAP, p19),
        map!(20, "LeakyReLU", "leaky relu, negative slope 0.01", MAP, p20),
        map!(21, "Sigmoid", "sigmoid", MAP, p21),
        map!(22, "Tanh", "tanh", MAP, p22),
        rows!(23, "Softmax", "softmax over the last axis", ROWS, p23),
        rows!(24, "LogSoftmax", "log-softmax, dim=1", ROWS, p24),
        map!(25, "Swish", "swish", MAP, p25),
        map!(26, "GELU", "gelu", MAP, p26),
        map!(27, "SELU", "selu", MAP, p27),
        map!(28, "HardSigmoid", "hardsigmoid", MAP, p28),
        map!(29, "Softplus", "softplus", MAP, p29),
        map!(30, "Softsign", "softsign", MAP, p30),
        map!(31, "ELU", "elu, alpha 1.0", MAP, p31),
        map!(32, "HardTanh", "hardtanh, min -1, max 1", MAP, p32),
        Problem {
            number: 33,
            name: "BatchNorm (training mode)",
            words: "batch norm, training mode, eps 1e-5",
            inputs: vec![BN4.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (BN4.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::p33(s, &x[0], f32_out(y), BN4[0], BN4[1], BN4[2], BN4[3]),
                |s, x, y| index::p33(s, &x[0], f32_out(y), BN4[0], BN4[1], BN4[2], BN4[3]),
            ],
        },
        Problem {
            number: 34,
            name: "InstanceNorm",
            words: "instance norm",
            inputs: vec![NORM4.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (NORM4.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::p34(s, &x[0], f32_out(y), NORM4[0], NORM4[1], NORM4[2], NORM4[3]),
                |s, x, y| index::p34(s, &x[0], f32_out(y), NORM4[0], NORM4[1], NORM4[2], NORM4[3]),
            ],
        },
        Problem {
            number: 35,
            name: "GroupNorm (8 groups)",
            words: "group norm, groups 8",
            inputs: vec![NORM4.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (NORM4.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| {
                    words::p35(
                        s,
                        &x[0],
                        f32_out(y),
                        NORM4[0],
                        NORM4[1] / 8,
                        NORM4[2],
                        NORM4[3],
                    )
                },
                |s, x, y| {
                    index::p35(
                        s,
                        &x[0],
                        f32_out(y),
                        NORM4[0],
                        NORM4[1] / 8,
                        NORM4[2],
                        NORM4[3],
                    )
                },
            ],
        },
        Problem {
            number: 36,
            name: "RMSNorm (over channels)",
            words: "rms norm over dim 1 of a 4-D tensor, eps 1e-5",
            inputs: vec![NORM4.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (NORM4.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::p36(s, &x[0], f32_out(y), NORM4[0], NORM4[1], NORM4[2], NORM4[3]),
                |s, x, y| index::p36(s, &x[0], f32_out(y), NORM4[0], NORM4[1], NORM4[2], NORM4[3]),
            ],
        },
        Problem {
            number: 37,
            name: "FrobeniusNorm",
            words: "frobenius norm",
            inputs: vec![NORM4.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (NORM4.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::p37(s, &x[0], f32_out(y)),
                |s, x, y| index::p37(s, &x[0], f32_out(y)),
            ],
        },
        Problem {
            number: 38,
            name: "L1Norm",
            words: "l1 norm over dim 1",
            inputs: vec![ROWS38.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (ROWS38.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::p38(s, &x[0], f32_out(y), ROWS38[0], ROWS38[1]),
                |s, x, y| index::p38(s, &x[0], f32_out(y), ROWS38[0], ROWS38[1]),
            ],
        },
        Problem {
            number: 39,
            name: "L2Norm",
            words: "l2 norm along rows",
            inputs: vec![ROWS38.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (ROWS38.to_vec(), false),
            params: vec![],
            run: [
                |s, x, y| words::p39(s, &x[0], f32_out(y), ROWS38[0], ROWS38[1]),
                |s, x, y| index::p39(s, &x[0], f32_out(y), ROWS38[0], ROWS38[1]),
            ],
        },
        Problem {
            number: 40,
            name: "LayerNorm (affine)",
            words: "layer norm over the last 3 axes of a 4-D tensor with affine weight and bias",
            inputs: vec![
                vec![16, 64, 256, 256],
                vec![64, 256, 256],
                vec![64, 256, 256],
            ],
            extra: Extra::None,
            flops: None,
            output: (vec![16, 64, 256, 256], false),
            params: vec![],
            run: [
                |s, x, y| words::p40(s, &x[0], &x[1], &x[2], f32_out(y), 16, 64, 256, 256),
                |s, x, y| index::p40(s, &x[0], &x[1], &x[2], f32_out(y), 16, 64, 256, 256),
            ],
        },
        dim1!(
            47,
            "Sum over dim 1",
            "sum over dim 1 of a 3-D tensor, keep dims",
            p47,
            f32_out,
            false
        ),
        dim1!(
            48,
            "Mean over dim 1",
            "mean over dim 1 of a 3-D tensor",
            p48,
            f32_out,
            false
        ),
        dim1!(
            49,
            "Max over dim 1",
            "max reduction over dim 1 of a 3-D tensor",
            p49,
            f32_out,
            false
        ),
        dim1!(
            51,
            "Argmax over dim 1",
            "argmax over dim 1 of a 3-D tensor",
            p51,
            i64_out,
            true
        ),
        dim1!(
            52,
            "Argmin over dim 1",
            "argmin over dim 1 of a 3-D tensor",
            p52,
            i64_out,
            true
        ),
        dim1!(
            53,
            "Min over dim 1",
            "min over dim 1 of a 3-D tensor",
            p53,
            f32_out,
            false
        ),
        map!(88, "MinGPTNewGelu", "minGPT new gelu", [8192, 8192], p88),
        scan!(89, "cumsum", "cumsum along dim 1", p89),
        scan!(90, "cumprod", "cumprod along dim 1", p90),
        scan!(91, "cumsum reverse", "reverse cumsum along dim 1", p91),
        scan!(92, "cumsum exclusive", "exclusive cumsum along dim 1", p92),
        scan!(93, "masked cumsum", "masked cumsum along dim 1", p93, mask),
        loss!(94, "MSELoss", "mse loss", LOSS, p94),
        loss!(96, "HuberLoss", "smooth l1 loss", LOSS, p96),
        // The targets broadcast along the predictions' last axis, as in PyTorch.
        loss!(100, "HingeLoss", "hinge loss", [LOSS[1]], p100),
        Problem {
            number: 95,
            name: "CrossEntropyLoss",
            words: "cross entropy loss",
            inputs: vec![CE.to_vec()],
            extra: Extra::Targets(vec![CE[0]], CE[1]),
            flops: None,
            output: (vec![], false),
            params: vec![],
            run: [
                |s, x, y| words::p95(s, &x[0], x.targets()?, f32_out(y), CE[0], CE[1]),
                |s, x, y| index::p95(s, &x[0], x.targets()?, f32_out(y), CE[0], CE[1]),
            ],
        },
        Problem {
            number: 98,
            name: "KLDivLoss",
            words: "kl divergence, batchmean",
            inputs: vec![KL.to_vec(), KL.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (vec![], false),
            params: vec![],
            run: [
                |s, x, y| words::p98(s, &x[0], &x[1], f32_out(y), KL[0], KL[1]),
                |s, x, y| index::p98(s, &x[0], &x[1], f32_out(y), KL[0], KL[1]),
            ],
        },
        Problem {
            number: 97,
            name: "ScaledDotProductAttention",
            words: "scaled dot-product attention",
            inputs: vec![ATT.to_vec(), ATT.to_vec(), ATT.to_vec()],
            extra: Extra::None,
            // Both products: 2 · heads · queries · keys · (d + dv).
            flops: Some(
                2.0 * (ATT[0] * ATT[1]) as f64 * (ATT[2] * ATT[2]) as f64 * (2 * ATT[3]) as f64,
            ),
            output: (ATT.to_vec(), false),
            params: vec![ATT_SCALE],
            run: [
                |s, x, y| {
                    let [b, h, l, d] = ATT;
                    words::p97(
                        s,
                        &x[0],
                        &x[1],
                        &x[2],
                        f32_out(y),
                        b,
                        h,
                        l,
                        l,
                        d,
                        d,
                        ATT_SCALE,
                    )
                },
                |s, x, y| {
                    let [b, h, l, d] = ATT;
                    index::p97(
                        s,
                        &x[0],
                        &x[1],
                        &x[2],
                        f32_out(y),
                        b,
                        h,
                        l,
                        l,
                        d,
                        d,
                        ATT_SCALE,
                    )
                },
            ],
        },
        Problem {
            number: 99,
            name: "TripletMarginLoss",
            words: "triplet margin loss, margin 1.0",
            inputs: vec![TRIPLET.to_vec(), TRIPLET.to_vec(), TRIPLET.to_vec()],
            extra: Extra::None,
            flops: None,
            output: (vec![], false),
            params: vec![],
            run: [
                |s, x, y| words::p99(s, &x[0], &x[1], &x[2], f32_out(y), TRIPLET[0], TRIPLET[1]),
                |s, x, y| index::p99(s, &x[0], &x[1], &x[2], f32_out(y), TRIPLET[0], TRIPLET[1]),
            ],
        },
    ]
}

fn main() -> Result<(), BoxError> {
    let Some(ctx) = gpu_or_explain("The KernelBench problems") else {
        return Ok(());
    };
    let out_dir = PathBuf::from(arg_value("--out").unwrap_or_else(|| "target/kernelbench".into()));
    let runs: usize = arg_value("--runs")
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let only: Vec<u32> = arg_value("--only")
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_default();
    std::fs::create_dir_all(&out_dir)?;
    let stream = ctx.default_stream();
    println!("optiml KernelBench Level 1 on {}", describe(&ctx));
    let mut h = Harness::new(stream.clone())?;
    let mut rows = Vec::new();
    for p in problems() {
        if !only.is_empty() && !only.contains(&p.number) {
            continue;
        }
        let row = match run(&mut h, &p, runs, &out_dir) {
            Ok(row) => row,
            Err(e) => json!({
                "problem": p.number, "name": p.name, "spec": p.words, "spec_index": index_text(p.number),
                "optiml_ms": null, "min_bytes": null, "words_equals_index": null,
                "error": format!("optiml side: {e}"),
            }),
        };
        println!("{row}");
        rows.push(row);
        // Written after every problem: a run cut short still leaves the problems it finished.
        let doc = json!({"device": describe(&ctx), "runs": runs, "problems": rows});
        std::fs::write(
            out_dir.join("ours.json"),
            serde_json::to_string_pretty(&doc)?,
        )?;
    }
    let doc = json!({"device": describe(&ctx), "runs": runs, "problems": rows});
    std::fs::write(
        out_dir.join("ours.json"),
        serde_json::to_string_pretty(&doc)?,
    )?;
    Ok(())
}

/// One problem: inputs, both spellings once (same output?), the plain-words kernel timed, samples written.
fn run(
    h: &mut Harness,
    p: &Problem,
    runs: usize,
    out_dir: &std::path::Path,
) -> Result<serde_json::Value, BoxError> {
    let words_spec = optiml_spec::parse(p.words)?;
    let index_text = index_text(p.number);
    let index_spec = optiml_spec::parse(index_text)?;
    let same_program = words_spec.canonical() == index_spec.canonical();
    let seed = |i: usize| 0x1234_5678 ^ (p.number << 8) ^ i as u32;
    let values: Vec<CudaSlice<f32>> = p
        .inputs
        .iter()
        .enumerate()
        .map(|(i, shape)| h.input(shape.iter().product(), seed(i)))
        .collect::<Result<_, _>>()?;
    let extra_seed = seed(p.inputs.len());
    let (mask, targets) = match &p.extra {
        Extra::None => (None, None),
        Extra::Mask(shape) => (Some(h.mask(shape.iter().product(), extra_seed)?), None),
        Extra::Targets(shape, classes) => (
            None,
            Some(h.targets(shape.iter().product(), *classes, extra_seed)?),
        ),
    };
    let inputs = Inputs {
        values,
        mask,
        targets,
    };
    let len: usize = p.output.0.iter().product();
    let alloc = |h: &Harness| -> Result<OutBuf, BoxError> {
        Ok(if p.output.1 {
            OutBuf::I64(h.stream.alloc_zeros::<i64>(len)?)
        } else {
            OutBuf::F32(h.stream.alloc_zeros::<f32>(len)?)
        })
    };
    let mut out = alloc(h)?;
    (p.run[1])(&h.stream, &inputs, &mut out)?;
    let index_samples = out_dir.join(format!("p{}_index.bin", p.number));
    h.write_samples(&out, 1 << 20, &index_samples)?;
    (p.run[0])(&h.stream, &inputs, &mut out)?;
    let samples = format!("p{}_out0.bin", p.number);
    let count = h.write_samples(&out, 1 << 20, &out_dir.join(&samples))?;
    let spellings_agree = std::fs::read(&index_samples)? == std::fs::read(out_dir.join(&samples))?;
    std::fs::remove_file(&index_samples)?;
    let stream = h.stream.clone();
    let (t, host_us) = h.time(runs, || Ok((p.run[0])(&stream, &inputs, &mut out)?))?;
    let bytes: usize = p
        .inputs
        .iter()
        .map(|s| s.iter().product::<usize>() * 4)
        .sum::<usize>()
        + match &p.extra {
            Extra::None => 0,
            Extra::Mask(s) => s.iter().product::<usize>(),
            Extra::Targets(s, _) => s.iter().product::<usize>() * 8,
        }
        + len * if p.output.1 { 8 } else { 4 };
    let mut described: Vec<serde_json::Value> = p
        .inputs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut t = json!({"shape": s, "seed": seed(i), "dtype": "f32"});
            // KernelBench 14 and 15 make their inputs triangular; optiml's kernels read only that triangle.
            if let Some(tri) = input_triangle(p.number) {
                t["triangle"] = json!(tri);
            }
            t
        })
        .collect();
    match &p.extra {
        Extra::None => {}
        Extra::Mask(s) => described.push(json!({"shape": s, "seed": extra_seed, "dtype": "bool"})),
        Extra::Targets(s, classes) => described
            .push(json!({"shape": s, "seed": extra_seed, "dtype": "i64", "classes": classes})),
    }
    Ok(json!({
        "problem": p.number,
        "name": p.name,
        "spec": p.words,
        "spec_index": index_text,
        "canonical": words_spec.canonical(),
        "words_equals_index": same_program,
        "spellings_agree": spellings_agree,
        "inputs": described,
        "params": p.params,
        "outputs": [{"shape": p.output.0, "dtype": if p.output.1 { "i64" } else { "f32" }, "samples": samples, "count": count}],
        "optiml_ms": t.median_ms,
        "optiml_min_ms": t.min_ms,
        "optiml_max_ms": t.max_ms,
        "optiml_host_us": host_us,
        "min_bytes": bytes,
        "flops": p.flops,
    }))
}

/// The triangle KernelBench keeps of a problem's inputs (`torch.triu` / `torch.tril` in its `get_inputs`).
fn input_triangle(number: u32) -> Option<&'static str> {
    match number {
        14 => Some("upper"),
        15 => Some("lower"),
        _ => None,
    }
}

/// The index-notation text of a problem, as its kernel in `index` declares it (the build script reads the
/// attributes themselves, so they cannot be generated from this table).
fn index_text(number: u32) -> &'static str {
    match number {
        1 | 2 | 6 | 7 | 8 | 9 | 13 => "c[i, j] = sum(l) x[i, l] * w[l, j]",
        3 => "c[s, i, j] = sum(l) x[s, i, l] * w[s, l, j]",
        4 => "y[i, j] = sum(l) x[i, l] * v[l, j]",
        10 => "c[s, i, j] = sum(l) x[s, i, l] * w[l, j]",
        11 => "y[b, i, j, k] = sum(l) x[b, i, j, l] * w[l, k]",
        14 => "c[i, j] = sum(k) a[i, k] * b[k, j] where i <= k <= j",
        15 => "c[i, j] = sum(k) a[i, k] * b[k, j] where j <= k <= i",
        16 => "c[i, j] = sum(l) x[l, i] * w[l, j]",
        17 => "c[i, j] = sum(l) x[i, l] * w[j, l]",
        18 => "c[i, j] = sum(l) x[l, i] * w[j, l]",
        5 => "y[i] = x[i] * s",
        12 => "out[i, j] = d[i] * m[i, j]",
        19 => "y[i] = relu(x[i])",
        20 => "y[i] = where(x[i] > 0, x[i], 0.01 * x[i])",
        21 => "y[i] = sigmoid(x[i])",
        22 => "y[i] = tanh(x[i])",
        23 => {
            "mx[i] = max(j) x[i, j]; ex[i, j] = exp(x[i, j] - mx[i]); y[i, j] = ex[i, j] / sum(j) ex[i, j]"
        }
        24 => {
            "mx[i] = max(j) x[i, j]; lse[i] = mx[i] + log(sum(j) exp(x[i, j] - mx[i])); y[i, j] = x[i, j] - lse[i]"
        }
        25 => "y[i] = x[i] * sigmoid(x[i])",
        26 => "y[i] = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2)))",
        27 => "y[i] = 1.0507009873554805 * where(x[i] > 0, x[i], 1.6732632423543772 * expm1(x[i]))",
        28 => "y[i] = clamp(x[i] + 3, 0, 6) / 6",
        29 => "y[i] = where(x[i] > 20, x[i], log1p(exp(x[i])))",
        95 => {
            "mx[i] = max(j) x[i, j]; y = mean(i) (mx[i] + log(sum(j) exp(x[i, j] - mx[i])) - x[i, t[i]]), i64 t"
        }
        98 => {
            "kl[i] = sum(j) ((-log(x[i, j])) * t[i, j] + where(t[i, j] > 0, t[i, j] * log(t[i, j]), 0)); \
             y = mean(i) kl[i]"
        }
        97 => {
            "sc[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * scale; mx[b, h, i] = max(j) sc[b, h, i, j]; \
            ex[b, h, i, j] = exp(sc[b, h, i, j] - mx[b, h, i]); \
            y[b, h, i, e] = sum(j) ex[b, h, i, j] * v[b, h, j, e] / sum(j) ex[b, h, i, j]"
        }
        99 => {
            "dp[i] = sqrt(sum(j) (a[i, j] - p[i, j] + 1e-6)^2); dn[i] = sqrt(sum(j) (a[i, j] - n[i, j] + 1e-6)^2); \
             y = mean(i) max(dp[i] - dn[i] + 1, 0)"
        }
        30 => "y[i] = x[i] / (1 + abs(x[i]))",
        31 => "y[i] = where(x[i] > 0, x[i], expm1(x[i]))",
        32 => "y[i] = clamp(x[i], -1, 1)",
        33 => {
            "mu[c] = mean(n, h, w) x[n, c, h, w]; var[c] = mean(n, h, w) (x[n, c, h, w] - mu[c])^2; \
             y[n, c, h, w] = (x[n, c, h, w] - mu[c]) / sqrt(var[c] + 1e-5)"
        }
        34 => {
            "mu[n, c] = mean(h, w) x[n, c, h, w]; var[n, c] = mean(h, w) (x[n, c, h, w] - mu[n, c])^2; \
               y[n, c, h, w] = (x[n, c, h, w] - mu[n, c]) / sqrt(var[n, c] + 1e-5)"
        }
        35 => {
            "mu[n, g] = mean(k, h, w) x[n, g, k, h, w]; var[n, g] = mean(k, h, w) (x[n, g, k, h, w] - mu[n, g])^2; \
               y[n, g, k, h, w] = (x[n, g, k, h, w] - mu[n, g]) / sqrt(var[n, g] + 1e-5), g=8"
        }
        36 => "y[b, c, h, w] = x[b, c, h, w] / sqrt(mean(c) x[b, c, h, w]^2 + 1e-5)",
        37 => "norm = sqrt(sum(i) x[i]^2); y[i] = x[i] / norm",
        38 => "y[i, j] = x[i, j] / mean(j) abs(x[i, j])",
        39 => "y[i, j] = x[i, j] / sqrt(sum(j) x[i, j]^2)",
        40 => {
            "mu[n] = mean(c, h, w) x[n, c, h, w]; var[n] = mean(c, h, w) (x[n, c, h, w] - mu[n])^2; \
               y[n, c, h, w] = (x[n, c, h, w] - mu[n]) / sqrt(var[n] + 1e-5) * gamma[c, h, w] + beta[c, h, w]"
        }
        47 => "y[b, k] = sum(j) x[b, j, k]",
        48 => "y[b, k] = mean(j) x[b, j, k]",
        49 => "y[b, k] = max(j) x[b, j, k]",
        51 => "y[b, k] = argmax(j) x[b, j, k]",
        52 => "y[b, k] = argmin(j) x[b, j, k]",
        53 => "y[b, k] = min(j) x[b, j, k]",
        88 => "y[i] = 0.5 * x[i] * (1 + tanh(sqrt(2 / pi) * (x[i] + 0.044715 * x[i]^3)))",
        94 => "y = mean(i) (x[i] - t[i])^2",
        96 => {
            "y = mean(i) where(abs(x[i] - t[i]) < 1, 0.5 * (x[i] - t[i])^2, abs(x[i] - t[i]) - 0.5)"
        }
        100 => "y = mean(i, j) max(0, 1 - x[i, j] * t[j])",
        89 => "y[i, j] = cumsum(j) x[i, j]",
        90 => "y[i, j] = cumprod(j) x[i, j]",
        91 => "y[i, j] = cumsum(j, reverse) x[i, j]",
        92 => "y[i, j] = cumsum(j, exclusive) x[i, j]",
        93 => "y[i, j] = cumsum(j) x[i, j] * keep[i, j], bool keep",
        _ => "",
    }
}
