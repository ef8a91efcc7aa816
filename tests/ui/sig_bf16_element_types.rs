#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;
use optiml::half::{bf16, f16};

// The operands take the spec's 16-bit type; the bias and the scales stay f32.
#[optiml::kernel("matmul, bf16, alpha, bias")]
pub fn mm(
    a: &CudaSlice<f32>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<f16>,
    bias: &CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
    alpha: bf16,
);

fn main() {}
