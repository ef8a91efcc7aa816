//! One kernel per family and option, declared as a user would. CI builds this crate from the committed cache
//! with NVRTC unavailable (`tests/offline_build.rs` at the workspace root); `tests/gpu.rs` checks every kernel
//! against a CPU reference on the GPU.

use optiml::cudarc::driver::CudaSlice;
use optiml::half::{bf16, f16};

/// The README's kernel.
#[optiml::kernel("batched matmul, f32")]
pub fn bmm(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// B stored transposed (`n × k`).
#[optiml::kernel("C = A·Bᵀ, float32")]
pub fn matmul_nt(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// A stored transposed (`k × m`).
#[optiml::kernel("matmul, A transposed")]
pub fn matmul_tn(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// Every epilogue option at once, on a batch, both operands transposed.
#[optiml::kernel(
    "batched gemm, transposed A and transposed B, C = gelu(alpha·Aᵀ·Bᵀ + beta·C + bias)"
)]
pub fn bmm_tt_full(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    bias: &CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    beta: f32,
);

/// Bias and relu epilogue; parameters in an unusual order and integer types.
#[optiml::kernel("matmul with bias and relu, f32")]
pub fn matmul_bias_relu(
    k: u32,
    m: u32,
    n: i64,
    bias: &CudaSlice<f32>,
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
);

/// Shapes fixed in the spec: no dimension parameters.
#[optiml::kernel("matmul, m=65, n=47, k=300")]
pub fn matmul_fixed(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>);

/// TF32 tensor cores allowed: `wgmma` on sm_90, `mma.sync` elsewhere.
#[optiml::kernel("batched matmul, f32, tf32")]
pub fn bmm_tf32(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// TF32 with both operands transposed (the other TMA layout) and every epilogue option.
#[optiml::kernel("batched gemm, tf32, C = gelu(alpha·Aᵀ·Bᵀ + beta·C + bias)")]
pub fn bmm_tf32_tt_full(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    bias: &CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    beta: f32,
);

/// TF32 with B stored transposed (a `cp.async` layout).
#[optiml::kernel("C = A·Bᵀ, tf32")]
pub fn matmul_tf32_nt(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// bf16 operands and output, fp32 accumulation: `wgmma` with TMA on sm_90 (the SIMT kernel for calls TMA cannot
/// address), the SIMT kernel elsewhere.
#[optiml::kernel("batched matmul, bf16")]
pub fn bmm_bf16(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// fp16 with both operands transposed and every epilogue option (bias, alpha and beta stay f32).
#[optiml::kernel("batched gemm, fp16, C = gelu(alpha·Aᵀ·Bᵀ + beta·C + bias)")]
pub fn bmm_f16_tt_full(
    a: &CudaSlice<f16>,
    b: &CudaSlice<f16>,
    c: &mut CudaSlice<f16>,
    bias: &CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    beta: f32,
);

/// bf16 with A stored transposed (`k × m`).
#[optiml::kernel("matmul, A transposed, bf16")]
pub fn matmul_bf16_tn(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
);

/// fp16 with B stored transposed (`n × k`).
#[optiml::kernel("C = A·Bᵀ, f16")]
pub fn matmul_f16_nt(
    a: &CudaSlice<f16>,
    b: &CudaSlice<f16>,
    c: &mut CudaSlice<f16>,
    m: usize,
    n: usize,
    k: usize,
);

/// A silu (swish) epilogue after a bias, on a batch: the SIMT kernel, and GEMV for matrix-vector shapes.
#[optiml::kernel("batched gemm, f32, C = silu(A·B + bias)")]
pub fn bmm_bias_silu(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    bias: &CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// The silu epilogue on the TF32 tensor-core kernels.
#[optiml::kernel("batched gemm, tf32, C = silu(A·B + bias)")]
pub fn bmm_tf32_bias_silu(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    bias: &CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// The silu epilogue on the 16-bit kernels, B stored transposed (an MLP's `x·Wᵀ + b`).
#[optiml::kernel("batched gemm, bf16, C = silu(A·Bᵀ + bias)")]
pub fn bmm_bf16_nt_bias_silu(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    bias: &CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// `y = relu(x)`.
#[optiml::kernel("y = relu(x)")]
pub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

/// Exact GELU, with an explicit element count.
#[optiml::kernel("elementwise gelu, f32")]
pub fn gelu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>, n: usize);

/// SiLU.
#[optiml::kernel("silu")]
pub fn silu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

/// Sigmoid.
#[optiml::kernel("sigmoid, fp32")]
pub fn sigmoid(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

/// Tanh.
#[optiml::kernel("tanh")]
pub fn tanh(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

/// `z = x + y`.
#[optiml::kernel("z = x + y")]
pub fn add(x: &CudaSlice<f32>, y: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

/// `x · y`, elementwise.
#[optiml::kernel("elementwise product of two tensors")]
pub fn mul(x: &CudaSlice<f32>, y: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

/// `x + s`.
#[optiml::kernel("add a scalar")]
pub fn add_scalar(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>, s: f32);

/// `x · s`.
#[optiml::kernel("y = x * s")]
pub fn scale(x: &CudaSlice<f32>, s: f32, out: &mut CudaSlice<f32>);

/// Softmax over each row, with this crate's own CUDA kernel (`kernels/softmax_rows.cu`) as a seed: `cargo optiml
/// tune` verifies it against the spec's float64 reference and measures it beside the generated kernels; the
/// build launches whichever won (the generated default until it is tuned).
#[optiml::kernel(
    "softmax over the last axis, f32",
    seed = "kernels/softmax_rows.cu:softmax_rows"
)]
pub fn softmax_seeded(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);

mod nested {
    /// Declared in an inline module: the build script finds these too.
    pub mod deeper {
        use optiml::cudarc::driver::CudaSlice;

        /// Relu again (same spec as [`crate::relu`], so it shares its generated file).
        #[optiml::kernel("relu")]
        pub fn relu_again(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
    }
}

pub use nested::deeper::relu_again;

/// A declaration the compiler never expands (compiled out), with a bad spec: the build script's scan still finds
/// it. Where the compiler does expand one, the macro's spanned error is the only report of it, so the build
/// script says nothing about skipped declarations (it once repeated the error, twice over with cargo's replay).
#[cfg(any())]
mod compiled_out {
    use optiml::cudarc::driver::CudaSlice;

    #[optiml::kernel("row-wise frobnicate")]
    pub fn never(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
}
