#[optiml::kernel("relu")]
pub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("sigmoid")]
pub fn sigmoid(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("tanh")]
pub fn tanh(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("gelu")]
pub fn gelu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("y = x * s")]
pub fn scale(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, s: f32);
#[optiml::kernel("elementwise add of two tensors, f32")]
pub fn add(x: &CudaSlice<f32>, y: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
#[optiml::kernel("softmax over the last axis")]
pub fn softmax(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
#[optiml::kernel("l2 norm along rows")]
pub fn l2norm(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
#[optiml::kernel("sum over dim 1 of a 3-D tensor, keep dims")]
pub fn sum1(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, d0: usize, d1: usize, d2: usize);
#[optiml::kernel("max reduction over dim 1 of a 3-D tensor")]
pub fn max1(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, d0: usize, d1: usize, d2: usize);
#[optiml::kernel("cumsum along dim 1")]
pub fn cumsum(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
#[optiml::kernel("mse loss")]
pub fn mse(x: &CudaSlice<f32>, t: &CudaSlice<f32>, y: &mut CudaSlice<f32>);
