#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;

// Parameters are matched by name: each unknown one is told the name it most likely means, once.
#[optiml::kernel("matmul, f32")]
pub fn mm(
    lhs: &CudaSlice<f32>,
    rhs: &CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

fn main() {}
