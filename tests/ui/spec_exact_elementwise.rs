#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("relu, exact")]
pub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

fn main() {}
