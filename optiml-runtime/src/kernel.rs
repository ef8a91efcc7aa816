//! A generated kernel's variants and their loading, once per CUDA context.

use crate::{Arch, Error, probe};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, sys};
use cudarc::nvrtc::Ptx;
use std::sync::{Arc, Mutex};

/// How a variant is launched; written by `optiml-build` from the template's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Launch {
    /// A tiled matmul: one block of `threads` threads per `bm × bn` tile of `C`, batch on the grid's z axis.
    Matmul {
        /// Rows of `C` per block.
        bm: u32,
        /// Columns of `C` per block.
        bn: u32,
        /// Threads per block.
        threads: u32,
        /// Dynamic shared memory per block, in bytes.
        smem_bytes: u32,
    },
    /// A grid-stride elementwise map.
    Elementwise {
        /// Threads per block.
        threads: u32,
        /// Elements each thread handles per loop step (the vector width).
        per_thread: u32,
        /// Resident blocks per SM the grid is sized for.
        blocks_per_sm: u32,
    },
}

/// One compiled form of a kernel.
#[derive(Debug)]
pub struct Variant {
    /// The architecture it was compiled for.
    pub arch: Arch,
    /// The CUBIN for `arch` (loads in ~0.1 ms).
    pub cubin: &'static [u8],
    /// The PTX, JIT-compiled by the driver when no CUBIN fits (also on newer GPUs).
    pub ptx: &'static str,
    /// How to launch it.
    pub launch: Launch,
}

/// Everything `optiml-build` generated for one kernel: the file the macro `include!`s evaluates to this.
#[derive(Debug)]
pub struct Artifacts {
    /// The canonical spec.
    pub spec: &'static str,
    /// The `extern "C"` entry point.
    pub entry: &'static str,
    /// One variant per target architecture.
    pub variants: &'static [Variant],
}

/// A kernel as the generated wrapper holds it, in a `static`: its artifacts and the functions loaded so far.
pub struct KernelModule {
    name: &'static str,
    artifacts: Artifacts,
    /// One entry per CUDA context the kernel was launched in. Each holds an `Arc` of its context through the
    /// module, so a context's address cannot be reused by another while it is listed here.
    loaded: Mutex<Vec<Loaded>>,
}

/// A variant loaded into one context.
#[derive(Clone)]
pub struct Loaded {
    ctx: Arc<CudaContext>,
    /// The kernel's function in that context.
    pub function: CudaFunction,
    /// The variant that was loaded.
    pub variant: &'static Variant,
    /// The device's multiprocessor count, for grid sizing.
    pub sm_count: u32,
}

impl KernelModule {
    /// A kernel named `name` (the user's function name, for messages).
    pub const fn new(name: &'static str, artifacts: Artifacts) -> Self {
        Self {
            name,
            artifacts,
            loaded: Mutex::new(Vec::new()),
        }
    }

    /// The user's function name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The canonical spec.
    pub fn spec(&self) -> &'static str {
        self.artifacts.spec
    }

    /// The compiled variants.
    pub fn variants(&self) -> &'static [Variant] {
        self.artifacts.variants
    }

    /// The function for `stream`'s context, loading the best variant on first use in that context.
    ///
    /// The lock is held while loading, so concurrent first launches in one context load the module once.
    ///
    /// # Errors
    /// [`Error::NoVariant`] when no variant fits the device, [`Error::Driver`] when the driver rejects every one
    /// that does.
    pub fn load(&'static self, stream: &CudaStream) -> Result<Loaded, Error> {
        let ctx = stream.context();
        let mut loaded = self
            .loaded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(l) = loaded.iter().find(|l| l.ctx == *ctx) {
            return Ok(l.clone());
        }
        let l = self.load_into(ctx)?;
        loaded.push(l.clone());
        Ok(l)
    }

    fn load_into(&'static self, ctx: &Arc<CudaContext>) -> Result<Loaded, Error> {
        let device = probe::arch_of(ctx)?;
        let variants = self.artifacts.variants;
        // Candidates, best first: CUBINs built for this exact device, then for an older minor of its major;
        // then PTX from the newest architecture the device can JIT.
        let mut cubins: Vec<&'static Variant> = variants
            .iter()
            .filter(|v| !v.cubin.is_empty() && v.arch.cubin_runs_on(device))
            .collect();
        cubins.sort_by_key(|v| std::cmp::Reverse((v.arch.minor, v.arch.specific)));
        let mut ptxs: Vec<&'static Variant> = variants
            .iter()
            .filter(|v| !v.ptx.is_empty() && v.arch.ptx_runs_on(device))
            .collect();
        ptxs.sort_by_key(|v| std::cmp::Reverse(v.arch));
        if cubins.is_empty() && ptxs.is_empty() {
            let available: Vec<String> = variants.iter().map(|v| v.arch.to_string()).collect();
            return Err(Error::NoVariant {
                kernel: self.name,
                device: device.to_string(),
                available: if available.is_empty() {
                    "nothing".into()
                } else {
                    available.join(", ")
                },
            });
        }
        let attempts = cubins
            .into_iter()
            .map(|v| (v, Ptx::from_binary(v.cubin.to_vec())))
            .chain(ptxs.into_iter().map(|v| (v, Ptx::from_src(v.ptx))));
        let mut last = None;
        for (variant, image) in attempts {
            match ctx
                .load_module(image)
                .and_then(|m| m.load_function(self.artifacts.entry))
            {
                Ok(function) => {
                    if let Launch::Matmul { smem_bytes, .. } = variant.launch
                        && smem_bytes > 48 * 1024
                    {
                        function
                            .set_attribute(
                                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                smem_bytes as i32,
                            )
                            .map_err(Error::driver(self.name, "raise the dynamic shared-memory limit"))?;
                    }
                    let sm_count = ctx
                        .attribute(
                            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                        )
                        .map_err(Error::driver(self.name, "read the multiprocessor count"))?;
                    return Ok(Loaded {
                        ctx: ctx.clone(),
                        function,
                        variant,
                        sm_count: sm_count.max(1) as u32,
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(Error::Driver {
            kernel: self.name,
            op: "load the kernel module (every CUBIN and PTX variant that fits was rejected)",
            source: last.unwrap_or(cudarc::driver::DriverError(
                sys::cudaError_enum::CUDA_ERROR_NO_BINARY_FOR_GPU,
            )),
        })
    }
}

impl std::fmt::Debug for KernelModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelModule")
            .field("name", &self.name)
            .field("spec", &self.artifacts.spec)
            .finish()
    }
}
