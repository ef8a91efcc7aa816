#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("m[r] = max(c) x[r, c]; y[r] = x[r, t[r]]")]
pub fn k(x: &CudaSlice<f32>, t: &CudaSlice<i64>, m: &mut CudaSlice<f32>, y: &mut CudaSlice<f32>);

fn main() {}
