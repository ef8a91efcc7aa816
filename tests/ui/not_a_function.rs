#[optiml::kernel("relu")]
pub struct Relu;

fn main() {}
