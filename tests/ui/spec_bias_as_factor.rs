#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Once read as A·B + bias.
#[optiml::kernel("C = A·B·bias")]
pub fn mm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, m: usize, n: usize, k: usize);

fn main() {}
