#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("softmax over the last axis")]
pub fn softmax(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);

fn main() {}
