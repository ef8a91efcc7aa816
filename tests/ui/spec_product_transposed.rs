#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Once read as A·B, the transpose lost.
#[optiml::kernel("C = (A·B)ᵀ")]
pub fn mm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, m: usize, n: usize, k: usize);

fn main() {}
