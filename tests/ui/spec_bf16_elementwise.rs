#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;
use optiml::half::bf16;

#[optiml::kernel("relu, bf16")]
pub fn relu(x: &CudaSlice<bf16>, out: &mut CudaSlice<bf16>);

fn main() {}
