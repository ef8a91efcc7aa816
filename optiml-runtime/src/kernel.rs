//! A generated kernel's variants and their loading, once per CUDA context.

use crate::launch::{COMPANION_SLOTS, Companions, Launch};
use crate::{Arch, Error, Function, dispatch, probe};
use cudarc::driver::{CudaContext, CudaModule, CudaStream, DriverError, sys};
use cudarc::nvrtc::Ptx;
use std::sync::{Arc, Mutex};

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
    /// The shape key of the problem it was tuned for (its family's bucket: `[batch, m, n, k]` for a matmul);
    /// `None`: any shape (the default schedule). Among an architecture's variants a call launches the one tuned
    /// at its key, else the fastest of the default and the nearest ones ([`crate::dispatch`]).
    pub shape: Option<[u64; 4]>,
}

/// Everything `optiml-build` generated for one kernel: the file the macro `include!`s evaluates to this.
#[derive(Debug)]
pub struct Artifacts {
    /// The canonical spec.
    pub spec: &'static str,
    /// The `extern "C"` entry point.
    pub entry: &'static str,
    /// The variants: per target architecture, one per tuned shape bucket (or one for every shape).
    pub variants: &'static [Variant],
    /// The kernel reads the old values of its output (a matmul with beta), so a launch that only times it must
    /// write somewhere else.
    pub reads_output: bool,
}

/// A kernel as the generated wrapper holds it, in a `static`: its artifacts and the functions loaded so far.
pub struct KernelModule {
    name: &'static str,
    artifacts: Artifacts,
    /// One entry per CUDA context the kernel was launched in. Each holds an `Arc` of its context through the
    /// module, so a context's address cannot be reused by another while it is listed here.
    loaded: Mutex<Vec<Loaded>>,
}

/// An architecture's variants loaded into one context.
#[derive(Clone)]
pub struct Loaded {
    ctx: Arc<CudaContext>,
    /// Each variant of the architecture that was chosen, with its functions in that context.
    pub functions: Vec<LoadedVariant>,
    /// The device's multiprocessor count, for grid sizing.
    pub sm_count: u32,
    /// The variant each call shape measured on its first call launches (`dispatch::choose`).
    choices: Arc<dispatch::Choices>,
}

/// One variant's functions in one context.
#[derive(Clone, Debug)]
pub struct LoadedVariant {
    /// The entry point.
    pub function: Function,
    /// The module's companion entry points, in the slots of [`Launch::companions`] (an optional one the module
    /// lacks is `None`).
    pub companions: [Option<Function>; COMPANION_SLOTS],
    /// What was loaded.
    pub variant: &'static Variant,
}

/// Loads `companions` from module `m`, each with its shared-memory limit raised where it launches with more than
/// 48 KiB: a required one that is missing is an error (with its entry name), an optional one that is missing is
/// `None`. The generated wrapper and the evaluation worker load the same way.
///
/// # Errors
/// The entry name of a required companion the module lacks, and the driver's error.
pub fn load_companions(
    m: &Arc<CudaModule>,
    companions: Companions,
) -> Result<[Option<Function>; COMPANION_SLOTS], (&'static str, DriverError)> {
    let mut out: [Option<Function>; COMPANION_SLOTS] = Default::default();
    for (slot, c) in out.iter_mut().zip(companions.0) {
        let Some(c) = c else { continue };
        *slot = match m.load_function(c.entry) {
            Ok(f) => {
                if c.smem_bytes > 48 * 1024 {
                    f.set_attribute(
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        c.smem_bytes as i32,
                    )
                    .map_err(|e| (c.entry, e))?;
                }
                Some(Function::new(f))
            }
            Err(e) if c.required => return Err((c.entry, e)),
            Err(_) => None,
        };
    }
    Ok(out)
}

/// What a launcher needs of a loaded function: the function, how to launch it, and the device's SM count.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// The kernel function.
    pub function: &'a Function,
    /// The companion entry points from the same module, in the slots of [`Launch::companions`].
    pub companions: [Option<&'a Function>; COMPANION_SLOTS],
    /// Its launch parameters.
    pub launch: Launch,
    /// The device's multiprocessor count, for grid sizing.
    pub sm_count: u32,
}

impl Loaded {
    /// The variant to launch for a problem of `shape` (`None` when the family has no shape buckets): the one
    /// tuned for the nearest shape, else the one for any shape.
    pub fn target(&self, shape: Option<[u64; 4]>) -> Target<'_> {
        self.at(dispatch::nearest(self.shapes(), shape))
    }

    /// The variant to launch for a problem of `shape`, measured where no variant was tuned at it
    /// ([`dispatch`](crate::dispatch): the fastest of the default and the nearest tuned variants at this shape,
    /// timed on the first call by `run`, which launches the target it is given on `stream` so that the call's own
    /// launch afterwards gives the same result).
    ///
    /// # Errors
    /// [`Error::Setting`] for a bad `OPTIML_DISPATCH`, the driver's errors while timing, and `run`'s errors.
    pub fn measured_target(
        &self,
        kernel: &'static str,
        stream: &CudaStream,
        shape: [u64; 4],
        mut run: impl FnMut(Target<'_>) -> Result<(), Error>,
    ) -> Result<Target<'_>, Error> {
        // Every call but a size class's first ends here, without allocating.
        if let Some(i) = self.shapes().position(|s| s == Some(shape)) {
            return Ok(self.at(i));
        }
        if let Some(i) = self.choices.get(shape) {
            return Ok(self.at(i));
        }
        let shapes: Vec<Option<[u64; 4]>> = self.shapes().collect();
        let i = dispatch::choose(kernel, stream, &shapes, shape, &self.choices, |i| {
            run(self.at(i))
        })?;
        Ok(self.at(i))
    }

    fn shapes(&self) -> impl Iterator<Item = Option<[u64; 4]>> + Clone + '_ {
        self.functions.iter().map(|f| f.variant.shape)
    }

    fn at(&self, i: usize) -> Target<'_> {
        let f = &self.functions[i];
        Target {
            function: &f.function,
            companions: f.companions.each_ref().map(Option::as_ref),
            launch: f.variant.launch,
            sm_count: self.sm_count,
        }
    }
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

    /// Whether the kernel reads the old values of its output ([`Artifacts::reads_output`]).
    pub fn reads_output(&self) -> bool {
        self.artifacts.reads_output
    }

    /// The function for `stream`'s context, loading the best variant on first use in that context.
    ///
    /// The lock is held while loading, so concurrent first launches in one context load the module once.
    ///
    /// # Errors
    /// [`Error::NoVariant`] when no variant fits the device, [`Error::Driver`] when the driver rejects every one
    /// that does, and [`Error::TrackedCapture`] on a stream being captured while cudarc tracks events (every
    /// launch loads first, so no buffer has been touched).
    pub fn load(&'static self, stream: &CudaStream) -> Result<Loaded, Error> {
        let ctx = stream.context();
        // cudarc makes each buffer argument wait on its last write's event once a context has several streams;
        // an event recorded before a capture cannot be waited on inside it, so the driver would invalidate the
        // user's whole capture. Only then is the stream asked (the common single-stream case pays two loads).
        if ctx.is_managing_stream_synchronization()
            && stream.capture_status().map_err(Error::driver(
                self.name,
                "ask whether the stream is being captured",
            ))? != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
        {
            return Err(Error::TrackedCapture { kernel: self.name });
        }
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
        // Each attempt loads every variant of one architecture (its shape buckets) from one kind of image.
        let group = |arch: Arch| -> Vec<&'static Variant> {
            variants.iter().filter(|v| v.arch == arch).collect()
        };
        let mut attempts: Vec<(Vec<&'static Variant>, bool)> = Vec::new();
        for (list, cubin) in [(cubins, true), (ptxs, false)] {
            for v in list {
                if !attempts
                    .iter()
                    .any(|(g, c)| *c == cubin && g[0].arch == v.arch)
                {
                    attempts.push((group(v.arch), cubin));
                }
            }
        }
        let sm_count = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(Error::driver(self.name, "read the multiprocessor count"))?;
        let mut last = None;
        'groups: for (group, cubin) in attempts {
            let mut functions = Vec::new();
            for variant in group {
                let image = if cubin {
                    Ptx::from_binary(variant.cubin.to_vec())
                } else {
                    Ptx::from_src(variant.ptx)
                };
                let loaded = ctx.load_module(image).and_then(|m| {
                    let companions =
                        load_companions(&m, variant.launch.companions()).map_err(|(_, e)| e)?;
                    Ok((
                        Function::new(m.load_function(self.artifacts.entry)?),
                        companions,
                    ))
                });
                match loaded {
                    Ok((function, companions)) => {
                        let smem_bytes = variant.launch.smem_bytes();
                        if smem_bytes > 48 * 1024 {
                            function
                                .set_attribute(
                                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    smem_bytes as i32,
                                )
                                .map_err(Error::driver(self.name, "raise the dynamic shared-memory limit"))?;
                        }
                        functions.push(LoadedVariant {
                            function,
                            companions,
                            variant,
                        });
                    }
                    Err(e) => {
                        last = Some(e);
                        continue 'groups;
                    }
                }
            }
            if !functions.is_empty() {
                return Ok(Loaded {
                    ctx: ctx.clone(),
                    functions,
                    sm_count: sm_count.max(1) as u32,
                    choices: Arc::default(),
                });
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
