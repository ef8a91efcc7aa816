#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("softmax over dim 7 of a 3-D tensor")]
pub fn k(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);

fn main() {}
