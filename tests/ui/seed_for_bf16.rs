#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// 16-bit programs have no seed ABI yet.
#[optiml::kernel("relu, bf16", seed = "kernels/relu.cu:relu")]
pub fn relu(x: &CudaSlice<optiml::half::bf16>, out: &mut CudaSlice<optiml::half::bf16>);

fn main() {}
