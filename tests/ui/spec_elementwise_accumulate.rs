#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Once read as y = relu(x), the += dropped.
#[optiml::kernel("y += relu(x)")]
pub fn f(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);

fn main() {}
