#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

#[optiml::kernel("y[r] = x[r, t[r]], i64 t")]
pub fn k(x: &CudaSlice<f32>, t: &CudaSlice<i64>, y: &mut CudaSlice<f32>);

fn main() {}
