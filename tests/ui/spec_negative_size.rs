#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Once read as m=1 (the hyphen joined words).
#[optiml::kernel("matmul, m=-1")]
pub fn mm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, m: usize, n: usize, k: usize);

fn main() {}
