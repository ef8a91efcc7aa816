#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Once read as relu(A·B), an epilogue.
#[optiml::kernel("C = relu(A)·B")]
pub fn mm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, m: usize, n: usize, k: usize);

fn main() {}
