#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Once read as relu, the equation skipped.
#[optiml::kernel("relu, foo = bar")]
pub fn f(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>);

fn main() {}
