#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("masked cumsum along dim 1")]
pub fn k(x: &CudaSlice<f32>, m: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);

fn main() {}
