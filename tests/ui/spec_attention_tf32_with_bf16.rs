#![allow(unused_imports)]

use optiml::cudarc::driver::CudaSlice;
use optiml::half::bf16;

#[optiml::kernel("scaled dot-product attention, bf16, tf32")]
pub fn sdpa(
    q: &CudaSlice<bf16>,
    k: &CudaSlice<bf16>,
    v: &CudaSlice<bf16>,
    y: &mut CudaSlice<bf16>,
    b: usize,
    h: usize,
    i: usize,
    j: usize,
    d: usize,
    dv: usize,
    scale: f32,
);

fn main() {}
