#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("transpose of a 1-D tensor")]
pub fn k(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);

fn main() {}
