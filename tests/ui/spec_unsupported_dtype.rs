#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("matmul, double")]
pub fn mm(a: &CudaSlice<f64>, b: &CudaSlice<f64>, c: &mut CudaSlice<f64>, m: usize, n: usize, k: usize);

fn main() {}
