#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// The attribute takes a spec and `seed`, nothing else.
#[optiml::kernel("relu", sed = "kernels/relu.cu:relu")]
pub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

fn main() {}
