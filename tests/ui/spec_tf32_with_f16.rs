#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;
use optiml::half::f16;

#[optiml::kernel("matmul, fp16, tf32")]
pub fn mm(a: &CudaSlice<f16>, b: &CudaSlice<f16>, c: &mut CudaSlice<f16>, m: usize, n: usize, k: usize);

fn main() {}
