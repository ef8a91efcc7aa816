#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("cross entropy loss")]
pub fn k(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);

fn main() {}
