#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// The file is read relative to the package root.
#[optiml::kernel("relu", seed = "kernels/missing.cu:relu")]
pub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

fn main() {}
