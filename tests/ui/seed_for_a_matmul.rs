#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Seeds follow the tensor-program ABI; a matmul spec has its own kernels.
#[optiml::kernel("matmul, f32", seed = "kernels/gemm.cu:gemm")]
pub fn mm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, m: usize, n: usize, k: usize);

fn main() {}
