#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Neither vocabulary reads it: the error names `frobnicate`, not `row`, which the tensor operators know.
#[optiml::kernel("row-wise frobnicate")]
pub fn f(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);

fn main() {}
