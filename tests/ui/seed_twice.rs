#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// One seed per kernel.
#[optiml::kernel("relu", seed = "kernels/a.cu:relu", seed = "kernels/b.cu:relu")]
pub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

fn main() {}
