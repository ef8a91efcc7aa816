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
        /// Split-K factor: above 1, the module also holds
        /// [`REDUCE_ENTRY`](crate::matmul::REDUCE_ENTRY) and the product takes two launches through a
        /// workspace (the launcher may use fewer splits for a shape where these would not pay).
        split_k: u32,
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
    // Variants are appended: cache manifests store this enum by variant index (bincode).
    /// A warp-specialised tensor-core matmul (`wgmma`, sm_90a only): a persistent grid of at most one block per
    /// multiprocessor walks the `tile_m × tile_n` tiles of every batch item; one producer warpgroup fills a ring
    /// of shared-memory stages, the others multiply.
    Wgmma {
        /// Rows of `C` per tile.
        tile_m: u32,
        /// Columns of `C` per tile.
        tile_n: u32,
        /// Threads per block (128 per warpgroup).
        threads: u32,
        /// Dynamic shared memory per block, in bytes.
        smem_bytes: u32,
        /// Rows per TMA box of the K-major operand Q (the `wgmma` N), when the producer loads through TMA
        /// tensor maps the launcher encodes; 0 when it loads with `cp.async` only.
        tma_rows: u32,
        /// With TMA: Q is A (`NN` and `NT`, computed as `Cᵀ = Bᵀ·Aᵀ`), else B (`TT`).
        tma_a_kmajor: bool,
        /// With TMA: the other operand P is K-major too (`NT`: B stored `n × k`) and is loaded as boxes of every
        /// other row; otherwise it is stored `k × rows` and loaded as 32 × 32 boxes.
        tma_p_kmajor: bool,
    },
    /// A matmul of 16-bit operands (bf16 or fp16, fp32 accumulation, C of the operands' type).
    Matmul16 {
        /// The element type of A, B and C.
        elem: Half,
        /// Which kernel the module's entry is.
        kernel: Kernel16,
    },
}

/// The kernel a 16-bit matmul module's entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Kernel16 {
    /// The sm_90a `wgmma` kernel; the module also holds the SIMT kernel for the calls it does not take.
    Wgmma(Wgmma16),
    /// The any-shape SIMT kernel (GPUs older than sm_80).
    Simt,
    /// The any-shape `mma.sync` kernel (sm_80 and newer without `wgmma`): one block of `threads` per `bm × bn`
    /// tile of `C`, batch on the grid's z axis.
    Mma {
        /// Rows of `C` per block.
        bm: u32,
        /// Columns of `C` per block.
        bn: u32,
        /// Threads per block.
        threads: u32,
        /// Dynamic shared memory per block, in bytes.
        smem_bytes: u32,
    },
}

/// The 16-bit element types of tensor-core matmuls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Half {
    /// bfloat16 (`half::bf16`).
    Bf16,
    /// IEEE half precision (`half::f16`).
    F16,
}

/// The launch geometry of the 16-bit `wgmma` kernel: a persistent grid of at most one block per multiprocessor,
/// A and B read only through TMA tensor maps the launcher encodes per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Wgmma16 {
    /// Rows of `C` per tile (64 per consumer warpgroup).
    pub tile_m: u32,
    /// Columns of `C` per tile (the `wgmma` N).
    pub tile_n: u32,
    /// Threads per block (128 per warpgroup).
    pub threads: u32,
    /// Dynamic shared memory per block, in bytes.
    pub smem_bytes: u32,
    /// A is stored `k × m` (its map's boxes are 64 × 64).
    pub trans_a: bool,
    /// B is stored `n × k` (its map's boxes are `tile_n` rows of 64).
    pub trans_b: bool,
}

/// The entry points a module holds beside its kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Companions {
    /// The split-K reduction, required when the variant splits K.
    pub reduce: Option<&'static str>,
    /// The matrix-vector kernel of a matmul module (optional: modules built before it existed lack it).
    pub gemv: Option<&'static str>,
    /// The any-shape kernel of a 16-bit tensor-core module, required: it computes the calls TMA cannot address
    /// (and the matrix-vector ones, in modules without a matrix-vector kernel).
    pub fallback: Option<&'static str>,
}

impl Launch {
    /// The architecture a variant for `arch` is compiled for: `wgmma` and `setmaxnreg` exist only in the
    /// architecture-specific target (`sm_90a`), whose code runs on that exact chip only.
    pub fn image_arch(&self, arch: Arch) -> Arch {
        match self {
            Launch::Wgmma { .. }
            | Launch::Matmul16 {
                kernel: Kernel16::Wgmma(_),
                ..
            } => Arch::specific(arch.major, arch.minor),
            Launch::Matmul { .. } | Launch::Elementwise { .. } | Launch::Matmul16 { .. } => arch,
        }
    }

    /// Dynamic shared memory per block, in bytes.
    pub fn smem_bytes(&self) -> u32 {
        match *self {
            Launch::Matmul { smem_bytes, .. } | Launch::Wgmma { smem_bytes, .. } => smem_bytes,
            Launch::Matmul16 {
                kernel: Kernel16::Wgmma(w),
                ..
            } => w.smem_bytes,
            Launch::Matmul16 {
                kernel: Kernel16::Mma { smem_bytes, .. },
                ..
            } => smem_bytes,
            Launch::Elementwise { .. }
            | Launch::Matmul16 {
                kernel: Kernel16::Simt,
                ..
            } => 0,
        }
    }

    /// Threads per block of the module's entry point.
    pub fn threads(&self) -> u32 {
        match *self {
            Launch::Matmul { threads, .. }
            | Launch::Wgmma { threads, .. }
            | Launch::Elementwise { threads, .. } => threads,
            Launch::Matmul16 {
                kernel: Kernel16::Wgmma(w),
                ..
            } => w.threads,
            Launch::Matmul16 {
                kernel: Kernel16::Mma { threads, .. },
                ..
            } => threads,
            Launch::Matmul16 {
                kernel: Kernel16::Simt,
                ..
            } => crate::matmul::SIMT16_THREADS,
        }
    }

    /// The companion entry points a module of this launch holds beside its kernel.
    pub fn companions(&self) -> Companions {
        match *self {
            Launch::Matmul { split_k, .. } => Companions {
                reduce: (split_k > 1).then_some(crate::matmul::REDUCE_ENTRY),
                gemv: Some(crate::matmul::GEMV_ENTRY),
                fallback: None,
            },
            Launch::Wgmma { .. } => Companions {
                gemv: Some(crate::matmul::GEMV_ENTRY),
                ..Companions::default()
            },
            Launch::Matmul16 { kernel, .. } => Companions {
                reduce: None,
                gemv: Some(crate::matmul::GEMV_ENTRY),
                fallback: matches!(kernel, Kernel16::Wgmma(_))
                    .then_some(crate::matmul::SIMT16_ENTRY),
            },
            Launch::Elementwise { .. } => Companions::default(),
        }
    }
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
    /// The problem shape it was tuned for, `[batch, m, n, k]` for a matmul; `None`: any shape (the default
    /// schedule). Among an architecture's variants the launcher picks the nearest to each call's shape.
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
}

/// One variant's functions in one context.
#[derive(Clone, Debug)]
pub struct LoadedVariant {
    /// The entry point.
    pub function: CudaFunction,
    /// The split-K reduction, for a matmul variant that splits K.
    pub reduce: Option<CudaFunction>,
    /// The matrix-vector kernel of a matmul module (absent from modules built before it existed).
    pub gemv: Option<CudaFunction>,
    /// The any-shape kernel of a 16-bit tensor-core module.
    pub fallback: Option<CudaFunction>,
    /// What was loaded.
    pub variant: &'static Variant,
}

/// How far apart two matmul shapes are for dispatch: log-distance of the rows of all batch items, the columns
/// and the reduction length, so 2× off in any of them counts the same at every scale.
fn shape_distance(a: [u64; 4], b: [u64; 4]) -> f64 {
    let l = |x: u64| ((x as f64) + 1.0).ln();
    (l(a[0].saturating_mul(a[1])) - l(b[0].saturating_mul(b[1]))).abs()
        + (l(a[2]) - l(b[2])).abs()
        + (l(a[3]) - l(b[3])).abs()
}

/// What a launcher needs of a loaded function: the function, how to launch it, and the device's SM count.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// The kernel function.
    pub function: &'a CudaFunction,
    /// The split-K reduction (from the same module), when the launch splits K.
    pub reduce: Option<&'a CudaFunction>,
    /// The matrix-vector kernel (from the same module), launched for `n == 1` or `m == 1`.
    pub gemv: Option<&'a CudaFunction>,
    /// The any-shape kernel (from the same module) for the calls a 16-bit tensor-core kernel cannot take.
    pub fallback: Option<&'a CudaFunction>,
    /// Its launch parameters.
    pub launch: Launch,
    /// The device's multiprocessor count, for grid sizing.
    pub sm_count: u32,
}

impl Loaded {
    /// The variant to launch for a problem of `shape` (`None` when the family has no shape buckets): the one
    /// tuned for the nearest shape, else the one for any shape.
    pub fn target(&self, shape: Option<[u64; 4]>) -> Target<'_> {
        let i = pick(self.functions.iter().map(|f| f.variant.shape), shape);
        let f = &self.functions[i];
        Target {
            function: &f.function,
            reduce: f.reduce.as_ref(),
            gemv: f.gemv.as_ref(),
            fallback: f.fallback.as_ref(),
            launch: f.variant.launch,
            sm_count: self.sm_count,
        }
    }
}

/// The index of the variant to launch for `want` among variants tuned for `shapes`: the nearest tuned one, else
/// the first for any shape, else the first.
fn pick(shapes: impl Iterator<Item = Option<[u64; 4]>> + Clone, want: Option<[u64; 4]>) -> usize {
    let nearest = want.and_then(|want| {
        shapes
            .clone()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i, shape_distance(s, want))))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    });
    nearest
        .or_else(|| shapes.clone().position(|s| s.is_none()))
        .unwrap_or(0)
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
                    let companions = variant.launch.companions();
                    let reduce = companions.reduce.map(|e| m.load_function(e)).transpose()?;
                    let gemv = companions.gemv.and_then(|e| m.load_function(e).ok());
                    let fallback = companions
                        .fallback
                        .map(|e| m.load_function(e))
                        .transpose()?;
                    Ok((
                        m.load_function(self.artifacts.entry)?,
                        reduce,
                        gemv,
                        fallback,
                    ))
                });
                match loaded {
                    Ok((function, reduce, gemv, fallback)) => {
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
                            reduce,
                            gemv,
                            fallback,
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

#[cfg(test)]
mod tests {
    use super::{pick, shape_distance};

    #[test]
    fn launches_pick_the_nearest_tuned_variant() {
        let tuned = [Some([256, 1024, 1024, 1024]), Some([16, 1024, 1024, 1024])];
        assert_eq!(
            pick(tuned.iter().copied(), Some([200, 1024, 1024, 1024])),
            0
        );
        assert_eq!(pick(tuned.iter().copied(), Some([8, 1024, 1024, 1024])), 1);
        assert_eq!(pick(tuned.iter().copied(), None), 0);
        let mixed = [None, Some([16, 64, 64, 64])];
        assert_eq!(pick(mixed.iter().copied(), Some([1, 4096, 4096, 4096])), 1);
        assert_eq!(pick(mixed.iter().copied(), None), 0);
    }

    #[test]
    fn shape_distance_is_symmetric_and_scale_free() {
        let a = [16, 1024, 1024, 1024];
        let b = [256, 1024, 1024, 1024];
        let c = [1, 16384, 1024, 1024];
        assert_eq!(shape_distance(a, a), 0.0);
        assert!((shape_distance(a, b) - shape_distance(b, a)).abs() < 1e-12);
        // The same rows spread over batch items or one tall matrix are the same work for a batched tile.
        assert!(shape_distance(a, c) < 1e-3);
        assert!(shape_distance(a, [16, 1024, 1024, 64]) > 2.0);
    }
}
