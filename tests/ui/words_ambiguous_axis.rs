#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("sum")]
pub fn k(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);

fn main() {}
