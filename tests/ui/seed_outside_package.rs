#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Seed paths stay inside the package.
#[optiml::kernel("relu", seed = "../shared/relu.cu:relu")]
pub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

fn main() {}
