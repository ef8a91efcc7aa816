#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("argmax over dim 1 of a 3-D tensor")]
pub fn k(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, d0: usize, d1: usize, d2: usize);

fn main() {}
