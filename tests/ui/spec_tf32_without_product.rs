#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// `tf32` rounds the operands of a product; softmax has none to round.
#[optiml::kernel("m[r] = max(c) x[r, c]; y[r, c] = exp(x[r, c] - m[r]) / sum(c) exp(x[r, c] - m[r]), tf32")]
pub fn softmax(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);

fn main() {}
