#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;
use optiml::half::bf16;

#[optiml::kernel("matmul, bf16, exact")]
pub fn mm(a: &CudaSlice<bf16>, b: &CudaSlice<bf16>, c: &mut CudaSlice<bf16>, m: usize, n: usize, k: usize);

fn main() {}
