#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("y[i] = relu(x[i])")]
pub fn k(x: &CudaSlice<f32>, y: &CudaSlice<f32>);

fn main() {}
