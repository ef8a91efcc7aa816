//! The best library call a user could make for a product, the baseline every matmul row is judged against
//! (issue 17): cuBLAS with a 32 MiB workspace set, and cuBLASLt with the same workspace, each of the (at most
//! eight) algorithms its heuristic proposes. Each is timed on the row's own operands and the fastest is the one
//! timed beside optiml, so the ratio is against what a user tuning the library call would get rather than
//! against whichever call a benchmark happened to make. cuBLAS without a workspace is slower than PyTorch's call
//! on the H200 (design.md §5), which is why neither is the reference alone.

use cudarc::cublas::CudaBlas;
use cudarc::cublaslt::sys as lt;
use optiml::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use std::ffi::c_void;
use std::sync::Arc;

use crate::BoxError;
use crate::matmul::{CublasGemm, GemmShape, cublas_gemm, cublas_handle};
use crate::time::{Stats, time};

/// Workspace bytes given to each library handle: what NVIDIA recommends for Hopper, and what PyTorch sets there.
pub const WORKSPACE: usize = 32 << 20;
/// The most algorithms asked of cuBLASLt's heuristic.
pub const LT_ALGOS: usize = 8;
/// Untimed and timed runs of each candidate call when picking the fastest.
const PICK_WARMUP: usize = 2;
const PICK_RUNS: usize = 10;

/// What the tensor cores may do with fp32 operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Math {
    /// Exact fp32 (16-bit types: fp32 accumulation of their exact products).
    Exact,
    /// fp32 operands rounded to TF32 (cuBLAS's `CUBLAS_TF32_TENSOR_OP_MATH`, cuBLASLt's
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`).
    Tf32,
}

/// One library call for one problem.
#[derive(Clone, Copy, Debug)]
pub enum Call {
    /// `cublasSgemm`/`cublasGemmStridedBatchedEx` and friends on a handle with the workspace set.
    Cublas,
    /// `cublasLtMatmul` with the `rank`-th (from 0) of the heuristic's algorithms.
    Lt {
        /// Its place in the heuristic's answer (0: the heuristic's first choice).
        rank: usize,
        /// The algorithm.
        algo: lt::cublasLtMatmulAlgo_t,
        /// The workspace it asked for.
        workspace: usize,
    },
}

impl Call {
    /// How a table names it.
    pub fn name(&self) -> String {
        match self {
            Call::Cublas => "cuBLAS (32 MiB workspace)".into(),
            Call::Lt { rank, .. } => format!("cuBLASLt (heuristic's algorithm #{})", rank + 1),
        }
    }
}

/// The library handles and their workspaces, made once per run.
pub struct Library {
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    blas_tf32: CudaBlas,
    lt: LtHandle,
    /// cuBLAS keeps the pointers it was given: the buffers live as long as the handles.
    _blas_workspaces: [CudaSlice<u8>; 2],
    lt_workspace: CudaSlice<u8>,
}

/// A cuBLASLt handle, destroyed with the library.
struct LtHandle(lt::cublasLtHandle_t);

impl Drop for LtHandle {
    fn drop(&mut self) {
        // SAFETY: made by `create_handle` and destroyed once, here; a failure to destroy is only a leak.
        let _ = unsafe { cudarc::cublaslt::result::destroy_handle(self.0) };
    }
}

fn lt_ok(what: &str, status: lt::cublasStatus_t) -> Result<(), BoxError> {
    match status {
        lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
        other => Err(format!("cuBLASLt {what}: {other:?}").into()),
    }
}

impl Library {
    /// cuBLAS handles (default math and TF32 math), a cuBLASLt handle, each with a [`WORKSPACE`] of its own.
    ///
    /// # Errors
    /// cuBLAS or cuBLASLt not installed, or what creating a handle or setting a workspace reports.
    pub fn new(stream: &Arc<CudaStream>) -> Result<Library, BoxError> {
        let blas = cublas_handle(stream)?;
        let blas_tf32 = cublas_handle(stream)?;
        // SAFETY: a live handle of this process; the mode only lets cuBLAS round fp32 inputs to TF32.
        let status = unsafe {
            cudarc::cublas::sys::cublasSetMathMode(
                *blas_tf32.handle(),
                cudarc::cublas::sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH,
            )
        };
        if status != cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(format!("cuBLAS refused TF32 math mode: {status:?}").into());
        }
        let workspaces = [
            stream.alloc_zeros::<u8>(WORKSPACE)?,
            stream.alloc_zeros::<u8>(WORKSPACE)?,
        ];
        for (handle, ws) in [&blas, &blas_tf32].into_iter().zip(&workspaces) {
            let (ptr, _record) = ws.device_ptr(stream);
            // SAFETY: the buffer is WORKSPACE bytes and outlives the handle (both are fields of the library,
            // the handles declared first, so dropped first).
            let status = unsafe {
                cudarc::cublas::sys::cublasSetWorkspace_v2(
                    *handle.handle(),
                    ptr as *mut c_void,
                    WORKSPACE,
                )
            };
            if status != cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                return Err(format!("cuBLAS refused its workspace: {status:?}").into());
            }
        }
        // SAFETY: probing only dlopens and drops library handles.
        if !unsafe { lt::is_culib_present() } {
            return Err("cuBLASLt is not installed: the sweep has no best library call".into());
        }
        let lt = LtHandle(cudarc::cublaslt::result::create_handle()?);
        Ok(Library {
            stream: stream.clone(),
            blas,
            blas_tf32,
            lt,
            _blas_workspaces: workspaces,
            lt_workspace: stream.alloc_zeros::<u8>(WORKSPACE)?,
        })
    }

    /// The fastest library call for `shape` on these operands: cuBLAS with its workspace and every algorithm
    /// cuBLASLt's heuristic proposes, each timed (10 runs, median) into `out`; with the time of
    /// every candidate, fastest first.
    ///
    /// # Errors
    /// What cuBLAS reports; cuBLASLt's failures only drop its candidates (cuBLAS always remains).
    pub fn fastest<T: CublasGemm>(
        &self,
        shape: GemmShape,
        math: Math,
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        out: &mut CudaSlice<T>,
    ) -> Result<(Prepared<'_>, Vec<(Call, Stats)>), BoxError> {
        let plan = LtPlan::new::<T>(shape, math).ok();
        let mut calls = vec![Call::Cublas];
        if let Some(plan) = &plan {
            calls.extend(plan.heuristic(self).unwrap_or_default());
        }
        let mut timed = Vec::new();
        for call in calls {
            let run = || self.run(shape, math, call, plan.as_ref(), a, b, out);
            // A candidate cuBLASLt proposes but cannot run is not a baseline.
            match time(&self.stream, PICK_WARMUP, PICK_RUNS, run) {
                Ok(stats) => timed.push((call, stats)),
                Err(e) if matches!(call, Call::Cublas) => return Err(e),
                Err(_) => {}
            }
        }
        timed.sort_by(|x, y| x.1.median_ms.total_cmp(&y.1.median_ms));
        let call = timed.first().ok_or("no library call ran")?.0;
        Ok((
            Prepared {
                library: self,
                shape,
                math,
                call,
                plan,
            },
            timed,
        ))
    }

    /// Runs `call`: `out = a·b` for the row-major problem `shape`.
    #[allow(clippy::too_many_arguments)]
    fn run<T: CublasGemm>(
        &self,
        shape: GemmShape,
        math: Math,
        call: Call,
        plan: Option<&LtPlan>,
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        out: &mut CudaSlice<T>,
    ) -> Result<(), BoxError> {
        match (call, plan) {
            (Call::Cublas, _) => {
                let blas = match math {
                    Math::Exact => &self.blas,
                    Math::Tf32 => &self.blas_tf32,
                };
                cublas_gemm(blas, shape, a, b, out)
            }
            (
                Call::Lt {
                    algo, workspace, ..
                },
                Some(plan),
            ) => plan.matmul(self, &algo, workspace, shape, a, b, out),
            (Call::Lt { .. }, None) => Err("a cuBLASLt call without its descriptors".into()),
        }
    }
}

/// The fastest library call for one problem, ready to run again.
pub struct Prepared<'a> {
    library: &'a Library,
    shape: GemmShape,
    math: Math,
    /// Which call.
    pub call: Call,
    plan: Option<LtPlan>,
}

impl Prepared<'_> {
    /// Runs the call: `out = a·b` for the row-major problem it was picked for.
    ///
    /// # Errors
    /// What the library reports, or buffers smaller than the shape.
    pub fn run<T: CublasGemm>(
        &self,
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        out: &mut CudaSlice<T>,
    ) -> Result<(), BoxError> {
        self.library.run(
            self.shape,
            self.math,
            self.call,
            self.plan.as_ref(),
            a,
            b,
            out,
        )
    }
}

/// cuBLASLt's descriptors of one problem, in cuBLAS's column-major view as [`cublas_gemm`] makes it: the
/// row-major `C = op(A)·op(B)` is `Cᵀ = op(B)ᵀ·op(A)ᵀ`, so B is cuBLASLt's A.
struct LtPlan {
    desc: lt::cublasLtMatmulDesc_t,
    a: lt::cublasLtMatrixLayout_t,
    b: lt::cublasLtMatrixLayout_t,
    c: lt::cublasLtMatrixLayout_t,
}

impl Drop for LtPlan {
    fn drop(&mut self) {
        // SAFETY: each was created once by `LtPlan::new` and is destroyed once, here.
        unsafe {
            let _ = cudarc::cublaslt::result::destroy_matmul_desc(self.desc);
            for l in [self.a, self.b, self.c] {
                let _ = cudarc::cublaslt::result::destroy_matrix_layout(l);
            }
        }
    }
}

/// A batched layout: `rows × cols` column-major with leading dimension `ld`, `batch` of them `stride` apart.
fn layout(
    ty: lt::cudaDataType,
    (rows, cols, ld): (usize, usize, usize),
    batch: usize,
    stride: usize,
) -> Result<lt::cublasLtMatrixLayout_t, BoxError> {
    let l =
        cudarc::cublaslt::result::create_matrix_layout(ty, rows as u64, cols as u64, ld as i64)?;
    let (count, offset) = (i32::try_from(batch)?, stride as i64);
    // SAFETY: `l` is live; each attribute gets a value of the type the documentation names (int32, int64).
    unsafe {
        cudarc::cublaslt::result::set_matrix_layout_attribute(
            l,
            lt::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
            (&count as *const i32).cast(),
            size_of::<i32>(),
        )?;
        cudarc::cublaslt::result::set_matrix_layout_attribute(
            l,
            lt::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
            (&offset as *const i64).cast(),
            size_of::<i64>(),
        )?;
    }
    Ok(l)
}

impl LtPlan {
    fn new<T: CublasGemm>(shape: GemmShape, math: Math) -> Result<LtPlan, BoxError> {
        use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
        let GemmShape {
            n,
            k,
            trans_a,
            trans_b,
            ..
        } = shape;
        // A tensor times one matrix: one product of `batch · m` rows, as `cublas_gemm` runs it.
        let (batch, m) = shape.as_one_library_call()?;
        let ty = T::lt_type();
        let compute = match (math, T::lt_type()) {
            (Math::Tf32, lt::cudaDataType::CUDA_R_32F) => {
                lt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
            }
            _ => lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        };
        let desc =
            cudarc::cublaslt::result::create_matmul_desc(compute, lt::cudaDataType::CUDA_R_32F)?;
        // Made before the layouts, so that a failure below still destroys what was made.
        let mut plan = LtPlan {
            desc,
            a: std::ptr::null_mut(),
            b: std::ptr::null_mut(),
            c: std::ptr::null_mut(),
        };
        let (op_a, a_dims) = if trans_b {
            (CUBLAS_OP_T, (k, n, k))
        } else {
            (CUBLAS_OP_N, (n, k, n))
        };
        let (op_b, b_dims) = if trans_a {
            (CUBLAS_OP_T, (m, k, m))
        } else {
            (CUBLAS_OP_N, (k, m, k))
        };
        for (attr, op) in [
            (
                lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                op_a,
            ),
            (
                lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
                op_b,
            ),
        ] {
            let op = op as i32;
            // SAFETY: `desc` is live; the transpose attributes are int32 cublasOperation_t values.
            unsafe {
                cudarc::cublaslt::result::set_matmul_desc_attribute(
                    plan.desc,
                    attr,
                    (&op as *const i32).cast(),
                    size_of::<i32>(),
                )?;
            }
        }
        plan.a = layout(ty, a_dims, batch, k * n)?;
        plan.b = layout(ty, b_dims, batch, m * k)?;
        plan.c = layout(ty, (n, m, n), batch, m * n)?;
        Ok(plan)
    }

    /// The heuristic's algorithms for this problem within [`WORKSPACE`], at most [`LT_ALGOS`].
    fn heuristic(&self, lib: &Library) -> Result<Vec<Call>, BoxError> {
        let pref = cudarc::cublaslt::result::create_matmul_pref()?;
        let bytes = WORKSPACE as u64;
        // SAFETY: `pref` is live and gets a uint64 byte count; every descriptor is live; the results array holds
        // LT_ALGOS entries and cuBLASLt writes at most that many, saying how many in `found`.
        let found = unsafe {
            let set = cudarc::cublaslt::result::set_matmul_pref_attribute(
                pref,
                lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&bytes as *const u64).cast(),
                size_of::<u64>(),
            );
            let mut results: [lt::cublasLtMatmulHeuristicResult_t; LT_ALGOS] = std::mem::zeroed();
            let mut found = 0i32;
            let asked = set.map_err(BoxError::from).and_then(|()| {
                lt_ok(
                    "heuristic",
                    lt::cublasLtMatmulAlgoGetHeuristic(
                        lib.lt.0,
                        self.desc,
                        self.a,
                        self.b,
                        self.c,
                        self.c,
                        pref,
                        LT_ALGOS as i32,
                        results.as_mut_ptr(),
                        &mut found,
                    ),
                )
            });
            let _ = cudarc::cublaslt::result::destroy_matmul_pref(pref);
            asked?;
            results
                .into_iter()
                .take(found.clamp(0, LT_ALGOS as i32) as usize)
                .enumerate()
                .filter(|(_, r)| r.state == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
                .map(|(rank, r)| Call::Lt {
                    rank,
                    algo: r.algo,
                    workspace: r.workspaceSize,
                })
                .collect()
        };
        Ok(found)
    }

    /// `out = a·b` with `algo`.
    #[allow(clippy::too_many_arguments)]
    fn matmul<T: CublasGemm>(
        &self,
        lib: &Library,
        algo: &lt::cublasLtMatmulAlgo_t,
        workspace: usize,
        shape: GemmShape,
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        out: &mut CudaSlice<T>,
    ) -> Result<(), BoxError> {
        shape.check_buffers("cuBLASLt", a.len(), b.len(), out.len())?;
        if workspace > WORKSPACE {
            return Err(
                format!("a cuBLASLt algorithm asking for {workspace} bytes of workspace").into(),
            );
        }
        let s = &lib.stream;
        let (alpha, beta) = (1f32, 0f32);
        let (pa, _ra) = a.device_ptr(s);
        let (pb, _rb) = b.device_ptr(s);
        let (pc, _rc) = out.device_ptr_mut(s);
        let (pw, _rw) = lib.lt_workspace.device_ptr(s);
        // SAFETY: the buffers hold the problem the layouts describe (checked above), the workspace holds what the
        // algorithm asked for, every descriptor is live, alpha and beta are fp32 as the scale type says, and C
        // (beta 0) is only written.
        let status = unsafe {
            lt::cublasLtMatmul(
                lib.lt.0,
                self.desc,
                (&alpha as *const f32).cast(),
                pb as *const c_void,
                self.a,
                pa as *const c_void,
                self.b,
                (&beta as *const f32).cast(),
                pc as *const c_void,
                self.c,
                pc as *mut c_void,
                self.c,
                algo,
                pw as *mut c_void,
                WORKSPACE,
                s.cu_stream() as lt::cudaStream_t,
            )
        };
        lt_ok("matmul", status)
    }
}
