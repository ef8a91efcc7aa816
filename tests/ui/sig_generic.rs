#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("relu")]
pub fn relu<T>(x: &CudaSlice<T>, out: &mut CudaSlice<f32>);

fn main() {}
