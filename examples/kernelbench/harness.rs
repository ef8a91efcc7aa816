//! What every KernelBench problem shares: inputs both this process and PyTorch compute bit for bit, timing with
//! L2 flushed, sampled outputs for PyTorch's check, and the JSON the PyTorch side reads.

use optiml::cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use optiml_examples::time::time_flushed;
use optiml_examples::{BoxError, Stats};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// U(0, 1), the odd multiples of 2⁻²⁴ (never 0, so that the losses' logarithms of inputs stay finite), from a
/// xorshift counter hash: `bench/harness/kernelbench.py` computes the same values with PyTorch's integer ops, so
/// both sides check and time on identical inputs without moving gigabytes. A mask is the hash's top 24 bits at
/// or above one half; class indices (cross-entropy's targets) are its top 24 bits modulo the class count.
const FILL: &str = r#"
extern "C" __global__ void kb_fill(float* p, long long n, unsigned seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i ^ seed;
        for (int r = 0; r < 2; ++r) { h ^= h << 13; h ^= h >> 17; h ^= h << 5; }
        p[i] = (float)(((h >> 9) << 1) | 1u) * (1.0f / 16777216.0f);
    }
}
extern "C" __global__ void kb_mask(unsigned char* p, long long n, unsigned seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i ^ seed;
        for (int r = 0; r < 2; ++r) { h ^= h << 13; h ^= h >> 17; h ^= h << 5; }
        p[i] = (h >> 8) >= (1u << 23) ? 1 : 0;
    }
}
extern "C" __global__ void kb_targets(long long* p, long long n, unsigned seed, long long classes) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i ^ seed;
        for (int r = 0; r < 2; ++r) { h ^= h << 13; h ^= h >> 17; h ^= h << 5; }
        p[i] = (long long)((h >> 8) % (unsigned)classes);
    }
}"#;

/// The device side of the harness.
pub struct Harness {
    /// The stream everything runs on.
    pub stream: Arc<CudaStream>,
    fill: CudaFunction,
    mask: CudaFunction,
    targets: CudaFunction,
    flush: CudaSlice<f32>,
}

/// An output buffer.
pub enum OutBuf {
    /// Values.
    F32(CudaSlice<f32>),
    /// Indices.
    I64(CudaSlice<i64>),
}

impl OutBuf {
    fn len(&self) -> usize {
        match self {
            OutBuf::F32(b) => b.len(),
            OutBuf::I64(b) => b.len(),
        }
    }

    /// `len` elements from `start`, as f64.
    fn read(
        &self,
        stream: &Arc<CudaStream>,
        start: usize,
        len: usize,
    ) -> Result<Vec<f64>, BoxError> {
        Ok(match self {
            OutBuf::F32(b) => stream
                .clone_dtoh(&b.slice(start..start + len))?
                .into_iter()
                .map(f64::from)
                .collect(),
            OutBuf::I64(b) => stream
                .clone_dtoh(&b.slice(start..start + len))?
                .into_iter()
                .map(|v| v as f64)
                .collect(),
        })
    }
}

impl Harness {
    /// The harness on `stream`: compiles the fill kernel with NVRTC for the device.
    pub fn new(stream: Arc<CudaStream>) -> Result<Self, BoxError> {
        let ctx = stream.context();
        let (major, minor) = ctx.compute_capability()?;
        let arch = format!("sm_{major}{minor}");
        let opts = optiml::cudarc::nvrtc::CompileOptions {
            arch: Some(Box::leak(arch.into_boxed_str())),
            ..Default::default()
        };
        let ptx = optiml::cudarc::nvrtc::compile_ptx_with_opts(FILL, opts)?;
        let module = ctx.load_module(ptx)?;
        let fill = module.load_function("kb_fill")?;
        let mask = module.load_function("kb_mask")?;
        let targets = module.load_function("kb_targets")?;
        let flush = stream.alloc_zeros::<f32>(128 << 20)?;
        Ok(Harness {
            stream,
            fill,
            mask,
            targets,
            flush,
        })
    }

    /// A tensor of `len` hashed values from `seed`.
    pub fn input(&self, len: usize, seed: u32) -> Result<CudaSlice<f32>, BoxError> {
        // SAFETY: `kb_fill(float*, long long, unsigned)` writes f32 values at indices below its length argument.
        unsafe { self.hashed(&self.fill, len, seed, None) }
    }

    /// A mask of `len` elements from `seed`: true where the hashed value is at least one half.
    pub fn mask(&self, len: usize, seed: u32) -> Result<CudaSlice<bool>, BoxError> {
        // SAFETY: `kb_mask(unsigned char*, long long, unsigned)` writes 0 or 1 (valid `bool`s) at indices below
        // its length argument.
        unsafe { self.hashed(&self.mask, len, seed, None) }
    }

    /// `len` class indices below `classes` (at least 1) from `seed`.
    pub fn targets(
        &self,
        len: usize,
        classes: usize,
        seed: u32,
    ) -> Result<CudaSlice<i64>, BoxError> {
        let classes = classes.clamp(1, u32::MAX as usize) as i64;
        // SAFETY: `kb_targets(long long*, long long, unsigned, long long)` writes integers (valid `i64`s) at
        // indices below its length argument.
        unsafe { self.hashed(&self.targets, len, seed, Some(classes)) }
    }

    /// A fresh buffer of `len` elements written by `kernel(buffer, len, seed[, extra])`.
    ///
    /// # Safety
    /// `kernel` must write only valid `T` values, at indices below its length argument.
    unsafe fn hashed<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        kernel: &CudaFunction,
        len: usize,
        seed: u32,
        extra: Option<i64>,
    ) -> Result<CudaSlice<T>, BoxError> {
        let mut buf = self.stream.alloc_zeros::<T>(len.max(1))?;
        let n = len as i64;
        let mut b = self.stream.launch_builder(kernel);
        b.arg(&mut buf).arg(&n).arg(&seed);
        if let Some(extra) = &extra {
            b.arg(extra);
        }
        // SAFETY: the caller's contract; the buffer holds at least `n` elements.
        unsafe {
            b.launch(LaunchConfig {
                grid_dim: (1024, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }?;
        Ok(buf)
    }

    /// Times `f`: 3 warm-up runs, then `runs` runs each after overwriting 512 MiB (no input left in L2), as
    /// `bench/harness/kernelbench.py` times PyTorch: the flush is queued, not waited for, so the host work of a
    /// call overlaps it on both sides. Also returns the median host time of one call of `f`, in microseconds
    /// (what a caller waiting on nothing but the launch pays).
    pub fn time(
        &mut self,
        runs: usize,
        f: impl FnMut() -> Result<(), BoxError>,
    ) -> Result<(Stats, f64), BoxError> {
        time_flushed(&self.stream, &mut self.flush, 3, runs, f)
    }

    /// Writes about `count` elements of `out` (64 evenly spaced runs, the first and the last element among
    /// them) to `path` as f64 positions followed by f64 values, the format `kernelbench.py` reads.
    pub fn write_samples(
        &self,
        out: &OutBuf,
        count: usize,
        path: &Path,
    ) -> Result<usize, BoxError> {
        let len = out.len();
        let chunks = 64.min(len.max(1));
        let per = (count / chunks).max(1);
        let mut positions = Vec::new();
        let mut values = Vec::new();
        for c in 0..chunks {
            let start = (len.saturating_sub(per)) * c / (chunks - 1).max(1);
            let n = per.min(len - start);
            if positions.last().is_some_and(|&p: &f64| p as usize >= start) {
                continue;
            }
            positions.extend((start..start + n).map(|p| p as f64));
            values.extend(out.read(&self.stream, start, n)?);
        }
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        for v in positions.iter().chain(&values) {
            f.write_all(&v.to_le_bytes())?;
        }
        f.flush()?;
        Ok(positions.len())
    }
}
