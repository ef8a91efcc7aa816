//! A launch's arguments, checked against the loaded function's own parameter list before the launch.
//!
//! `cuLaunchKernel` reads one argument pointer per parameter the compiled function declares, and from each as
//! many bytes as that parameter takes. An argument list with fewer entries, or of other sizes, makes the driver
//! read past it: a cache entry whose launch record does not match its CUBIN, or a candidate whose source declares
//! other parameters than its launch passes, would be undefined behaviour. The driver tells each parameter's size
//! (`cuFuncGetParamInfo`); [`Function`] reads them once, when the function is loaded, and [`Args::launch`]
//! refuses a list that differs with [`Error::Parameters`] instead of launching.

use crate::Error;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, LaunchArgs, LaunchConfig, PushKernelArg, sys,
};
use std::sync::{Arc, OnceLock};

/// A loaded kernel function and the size in bytes of each of its parameters, as the driver reads them from
/// the image.
#[derive(Clone, Debug)]
pub struct Function {
    function: CudaFunction,
    params: Arc<[usize]>,
    /// [`Function::resident_clusters`], the driver's first answer: a variant's launch shape is fixed.
    resident: Arc<OnceLock<Option<u32>>>,
}

impl Function {
    /// `function`, with its parameter sizes read from the driver (none where the driver cannot tell).
    pub fn new(function: CudaFunction) -> Self {
        let mut params = Vec::new();
        loop {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: a live function handle (held by `function`, which owns its module) and two out-pointers
            // to locals.
            let status = unsafe {
                sys::cuFuncGetParamInfo(
                    function.cu_function(),
                    params.len(),
                    &mut offset,
                    &mut size,
                )
            };
            // `CUDA_ERROR_INVALID_VALUE` past the last parameter (CUDA 13.0 has no count call that cudarc
            // exposes). Any other failure also ends the list: a list cut short fails the launch's check, the
            // safe way.
            if status != sys::cudaError_enum::CUDA_SUCCESS {
                break;
            }
            params.push(size);
        }
        Function {
            function,
            params: params.into(),
            resident: Arc::default(),
        }
    }

    /// The function.
    pub fn cuda(&self) -> &CudaFunction {
        &self.function
    }

    /// Each parameter's size in bytes, in order.
    pub fn params(&self) -> &[usize] {
        &self.params
    }

    /// How many clusters of `cluster` blocks of this function, each of `threads` threads with `smem_bytes` of
    /// dynamic shared memory, the device on `stream` holds at once (`cuOccupancyMaxActiveClusters`: which
    /// multiprocessors a cluster may share depends on the chip's layout, so no count of them tells), or `None`
    /// where the driver does not say. The driver's answer is kept: a variant always launches with the same
    /// block and cluster shape. A context that could not be made current is no answer, and is asked again on
    /// the next launch.
    pub fn resident_clusters(&self, stream: &CudaStream, shape: (u32, u32, u32)) -> Option<u32> {
        if let Some(&answer) = self.resident.get() {
            return answer;
        }
        let answer = self.ask_resident_clusters(stream, shape)?;
        *self.resident.get_or_init(|| answer)
    }

    /// The driver's answer (`Some(None)` where it does not say), or `None` where the stream's context could
    /// not be made current.
    fn ask_resident_clusters(
        &self,
        stream: &CudaStream,
        (cluster, threads, smem_bytes): (u32, u32, u32),
    ) -> Option<Option<u32>> {
        stream.context().bind_to_thread().ok()?;
        let config = sys::CUlaunchConfig {
            gridDimX: cluster,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: threads,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: smem_bytes,
            hStream: stream.cu_stream(),
            // The cluster's shape is the one the function was compiled with (`__cluster_dims__`).
            attrs: std::ptr::null_mut(),
            numAttrs: 0,
        };
        let mut clusters: std::ffi::c_int = 0;
        // SAFETY: a live function handle (held by `function`), a configuration that lives across the call and
        // names no attributes, and an out-pointer to a local; the stream's context is current.
        let status = unsafe {
            sys::cuOccupancyMaxActiveClusters(&mut clusters, self.function.cu_function(), &config)
        };
        Some(
            (status == sys::cudaError_enum::CUDA_SUCCESS && clusters > 0)
                .then_some(clusters as u32),
        )
    }
}

impl std::ops::Deref for Function {
    type Target = CudaFunction;

    fn deref(&self) -> &CudaFunction {
        &self.function
    }
}

/// A value passed to a kernel, and the bytes its parameter takes.
pub trait Param {
    /// The size of the kernel parameter it fills.
    const BYTES: usize;
}

macro_rules! by_value {
    ($($t:ty),*) => {
        $(impl Param for &$t {
            const BYTES: usize = std::mem::size_of::<$t>();
        })*
    };
}

by_value!(i32, u32, i64, u64, f32, f64);

impl<T> Param for &CudaSlice<T> {
    const BYTES: usize = std::mem::size_of::<sys::CUdeviceptr>();
}

impl<T> Param for &mut CudaSlice<T> {
    const BYTES: usize = std::mem::size_of::<sys::CUdeviceptr>();
}

/// The arguments of one launch of a [`Function`], as they are pushed, with their sizes.
pub struct Args<'a> {
    builder: LaunchArgs<'a>,
    function: &'a Function,
    sizes: Vec<usize>,
    kernel: &'static str,
}

impl<'a> Args<'a> {
    /// An empty argument list for launching `function` (of kernel `kernel`, for messages) on `stream`.
    pub fn new(stream: &'a CudaStream, function: &'a Function, kernel: &'static str) -> Self {
        Args {
            builder: stream.launch_builder(&function.function),
            function,
            sizes: Vec::new(),
            kernel,
        }
    }

    /// Appends `value`.
    pub fn arg<T: Param>(&mut self, value: T) -> &mut Self
    where
        LaunchArgs<'a>: PushKernelArg<T>,
    {
        self.sizes.push(T::BYTES);
        self.builder.arg(value);
        self
    }

    /// Launches with `cfg`, when the arguments are, in number and size, the parameters the function declares
    /// (or it declares none, and so reads none); `what` names the launch in an error.
    ///
    /// # Errors
    /// [`Error::Parameters`] when they are not (nothing is launched), [`Error::Driver`] when the launch fails.
    ///
    /// # Safety
    /// As [`LaunchArgs::launch`]: the kernel must only touch memory its arguments allow, in the stream's
    /// context. That the driver reads exactly the arguments given is what this call checks.
    pub unsafe fn launch(mut self, cfg: LaunchConfig, what: &'static str) -> Result<(), Error> {
        // A function that declares no parameter (or whose driver could not list them) reads no argument: the
        // list cannot be read past.
        let declared = &self.function.params[..];
        if !declared.is_empty() && self.sizes[..] != *declared {
            return Err(Error::Parameters {
                kernel: self.kernel,
                declared: self.function.params.to_vec(),
                passed: self.sizes,
            });
        }
        // SAFETY: the caller's promise, and the argument list now matches the function's parameters.
        unsafe { self.builder.launch(cfg) }
            .map(|_| ())
            .map_err(Error::driver(self.kernel, what))
    }
}
