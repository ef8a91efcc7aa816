#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// A seed names the kernel function after a colon.
#[optiml::kernel("softmax over the last axis, f32", seed = "kernels/softmax.cu")]
pub fn sm(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>, r: usize, c: usize);

fn main() {}
