#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("relu")]
pub fn relu((x, y): (usize, usize), out: &mut CudaSlice<f32>);

fn main() {}
