#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("y[r, c] = 2 * cumsum(c) x[r, c]")]
pub fn k(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);

fn main() {}
