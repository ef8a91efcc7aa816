#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("y[i] = exps(x[i])")]
pub fn k(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);

fn main() {}
