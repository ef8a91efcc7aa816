//! What every matmul benchmark needs besides its kernel: the problem's shape and layout, random operands on both
//! sides, the float64 reference of the very values the kernel read, and cuBLAS computing the same product.

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use optiml::cudarc::driver::{CudaSlice, CudaStream};
use optiml::half::{bf16, f16};
use std::sync::Arc;

use crate::BoxError;
use crate::check::check_sampled;
use crate::fill::{Element, random};

/// An activation as the float64 reference applies it.
pub type Activation = fn(f64) -> f64;

/// A fused epilogue as the reference applies it: the bias added to every row, then the activation.
pub type Epilogue<'a> = (&'a [f32], Activation);

/// The shape and operand layout of a row-major batched product `C[z] = op(A[z])·op(B[z])`, packed matrices.
#[derive(Clone, Copy, Debug)]
pub struct GemmShape {
    /// Batch items.
    pub batch: usize,
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// A stored `k × m` (transposed).
    pub trans_a: bool,
    /// B stored `n × k` (transposed).
    pub trans_b: bool,
    /// One B for every batch item (a 3-D tensor times one matrix).
    pub shared_b: bool,
}

impl GemmShape {
    /// `batch` untransposed `m × k` by `k × n` products, each with its own B.
    pub fn batched(batch: usize, m: usize, n: usize, k: usize) -> GemmShape {
        GemmShape {
            batch,
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            shared_b: false,
        }
    }

    /// The batch and the rows of the product a library runs: a tensor times one matrix is, row-major and packed,
    /// one matrix of `batch · m` rows times that matrix, the single gemm a library user would write.
    ///
    /// # Errors
    /// A shared B times transposed A items, which no single strided call computes.
    pub fn as_one_library_call(&self) -> Result<(usize, usize), BoxError> {
        match (self.shared_b, self.trans_a) {
            (false, _) => Ok((self.batch, self.m)),
            (true, false) => Ok((1, self.batch * self.m)),
            (true, true) => {
                Err("a shared B times transposed A items is not one library call".into())
            }
        }
    }

    /// Elements of A, B and C.
    pub fn lens(&self) -> (usize, usize, usize) {
        let b_items = if self.shared_b { 1 } else { self.batch };
        (
            self.batch * self.m * self.k,
            b_items * self.k * self.n,
            self.batch * self.m * self.n,
        )
    }

    /// That buffers of `a`, `b` and `out` elements hold this product, so that `who` (a library) reads and writes
    /// only inside them.
    ///
    /// # Errors
    /// Which buffer is short, in `who`'s name.
    pub fn check_buffers(&self, who: &str, a: usize, b: usize, out: usize) -> Result<(), BoxError> {
        let (a_len, b_len, c_len) = self.lens();
        if a < a_len || b < b_len || out < c_len {
            return Err(format!(
                "{who} operands of {a} / {b} / {out} elements for a {self:?} product"
            )
            .into());
        }
        Ok(())
    }
}

/// A product's operands, random in [-1, 1) and rounded to `T`, on the host (for the reference) and on the device
/// (for the kernel and its baseline), with the fp32 bias a fused epilogue adds (drawn for every product, read
/// only by the kernels that fuse one).
pub struct Operands<T> {
    /// A, as the host reference reads it.
    pub a: Vec<T>,
    /// B.
    pub b: Vec<T>,
    /// The bias, one per column of C.
    pub bias: Vec<f32>,
    /// A on the device.
    pub da: CudaSlice<T>,
    /// B on the device.
    pub db: CudaSlice<T>,
    /// The bias on the device.
    pub dbias: CudaSlice<f32>,
    /// The seeds of A, B and the bias, for an error message to name.
    pub seeds: [u64; 3],
}

impl<T: Element> Operands<T> {
    /// Fresh operands of a `shape` product, copied to the device.
    ///
    /// # Errors
    /// What the copies report.
    pub fn random(stream: &Arc<CudaStream>, shape: GemmShape) -> Result<Operands<T>, BoxError> {
        let (a_len, b_len, _) = shape.lens();
        let (a, seed_a) = random::<T>(a_len);
        let (b, seed_b) = random::<T>(b_len);
        let (bias, seed_bias) = random::<f32>(shape.n);
        Ok(Operands {
            da: stream.clone_htod(&a)?,
            db: stream.clone_htod(&b)?,
            dbias: stream.clone_htod(&bias)?,
            a,
            b,
            bias,
            seeds: [seed_a, seed_b, seed_bias],
        })
    }

    /// `seeds A, B, bias`, for an error message: the inputs of a failure can be drawn again.
    pub fn seeds(&self) -> String {
        let [a, b, bias] = self.seeds;
        format!("seeds {a}, {b}, {bias}")
    }

    /// [`check_matmul`] of `out` against these operands, with `act(C + bias)` applied when `act` is given.
    ///
    /// # Errors
    /// As [`check_matmul`].
    pub fn check(
        &self,
        shape: GemmShape,
        act: Option<Activation>,
        out: &[T],
        samples: usize,
        tol: f64,
    ) -> Result<f64, String> {
        let epilogue = act.map(|act| (self.bias.as_slice(), act));
        check_matmul(shape, (&self.a, &self.b, epilogue), out, samples, tol)
    }
}

/// [`check_sampled`] for the row-major product `C[z] = op(A[z])·op(B[z])` of packed matrices laid out as `shape`
/// says, with `act(C + bias)` applied when `epilogue = (bias, act)` is given: the float64 reference from the
/// very values the kernel read (f32, or 16-bit read exactly), with the magnitude Σ|a·b| + |bias|, which bounds
/// |reference| too (the activations here grow no faster than their argument).
///
/// # Errors
/// As [`check_sampled`].
pub fn check_matmul<T: Copy + Into<f64>>(
    shape: GemmShape,
    (a, b, epilogue): (&[T], &[T], Option<Epilogue<'_>>),
    out: &[T],
    samples: usize,
    tol: f64,
) -> Result<f64, String> {
    let GemmShape {
        batch,
        m,
        n,
        k,
        trans_a,
        trans_b,
        shared_b,
    } = shape;
    let a_at = |z: usize, i: usize, l: usize| {
        a[z * m * k + if trans_a { l * m + i } else { i * k + l }].into()
    };
    let b_at = |z: usize, l: usize, j: usize| {
        let z = if shared_b { 0 } else { z };
        b[z * k * n + if trans_b { j * k + l } else { l * n + j }].into()
    };
    check_sampled(out, (batch, m, n), samples, tol, |z, i, j| {
        let (mut acc, mut mag) = (0f64, 0f64);
        for l in 0..k {
            let p = a_at(z, i, l) * b_at(z, l, j);
            acc += p;
            mag += p.abs();
        }
        if let Some((bias, act)) = epilogue {
            acc += f64::from(bias[j]);
            mag += f64::from(bias[j]).abs();
            acc = act(acc);
        }
        (acc, mag)
    })
}

/// Whether cuBLAS can be loaded (cudarc panics at the first call when it cannot).
pub fn cublas_present() -> bool {
    // SAFETY: probing only dlopens and drops library handles.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

/// A cuBLAS handle on `stream`, or an error saying that a comparison with cuBLAS has nothing to compare with.
///
/// # Errors
/// cuBLAS not installed, or what creating the handle reports.
pub fn cublas_handle(stream: &Arc<CudaStream>) -> Result<CudaBlas, BoxError> {
    if !cublas_present() {
        return Err("cuBLAS is not installed: the sweep has nothing to compare with".into());
    }
    Ok(CudaBlas::new(stream.clone())?)
}

/// The cuBLAS configuration of a row-major problem, operands swapped as [`cublas_gemm`] says (the caller passes
/// `b` as cuBLAS's A). A tensor times one matrix is, row-major and packed, one matrix of `batch · m` rows times
/// that matrix: the single gemm a cuBLAS user would write.
fn swapped<T>(shape: GemmShape, alpha: T, beta: T) -> Result<StridedBatchedConfig<T>, BoxError> {
    use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
    let GemmShape {
        n,
        k,
        trans_a,
        trans_b,
        ..
    } = shape;
    let (batch, m) = shape.as_one_library_call()?;
    let (transa, lda) = if trans_b {
        (CUBLAS_OP_T, k)
    } else {
        (CUBLAS_OP_N, n)
    };
    let (transb, ldb) = if trans_a {
        (CUBLAS_OP_T, m)
    } else {
        (CUBLAS_OP_N, k)
    };
    Ok(StridedBatchedConfig {
        gemm: GemmConfig {
            transa,
            transb,
            m: n as i32,
            n: m as i32,
            k: k as i32,
            alpha,
            lda: lda as i32,
            ldb: ldb as i32,
            beta,
            ldc: n as i32,
        },
        batch_size: batch as i32,
        stride_a: (k * n) as i64,
        stride_b: (m * k) as i64,
        stride_c: (m * n) as i64,
    })
}

/// An element type cuBLAS multiplies, and the entry point a benchmark measures for it.
pub trait CublasGemm: Element {
    /// The element's type as cuBLASLt's layouts name it.
    fn lt_type() -> cudarc::cublaslt::sys::cudaDataType;

    /// `out = a·b` through cuBLAS for the row-major problem `shape`, the buffers' sizes already checked.
    ///
    /// # Errors
    /// What cuBLAS reports.
    fn gemm(
        blas: &CudaBlas,
        shape: GemmShape,
        a: &CudaSlice<Self>,
        b: &CudaSlice<Self>,
        out: &mut CudaSlice<Self>,
    ) -> Result<(), BoxError>;
}

/// fp32 (default math mode: exact fp32, unless the handle was set to TF32): sgemm for one matrix,
/// sgemm_strided_batched for more.
impl CublasGemm for f32 {
    fn lt_type() -> cudarc::cublaslt::sys::cudaDataType {
        cudarc::cublaslt::sys::cudaDataType::CUDA_R_32F
    }

    fn gemm(
        blas: &CudaBlas,
        shape: GemmShape,
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), BoxError> {
        let cfg = swapped(shape, 1.0f32, 0.0f32)?;
        if cfg.batch_size == 1 {
            // SAFETY: the caller checked that the buffers hold matrices of the sizes in `cfg.gemm`.
            unsafe { blas.gemm(cfg.gemm, b, a, out) }?;
        } else {
            // SAFETY: the caller checked that every buffer holds `batch` packed matrices of the sizes in `cfg`.
            unsafe { blas.gemm_strided_batched(cfg, b, a, out) }?;
        }
        Ok(())
    }
}

/// 16-bit operands and output, fp32 compute: `cublasGemmStridedBatchedEx` with A, B and C `CUDA_R_16BF` (or
/// `CUDA_R_16F`), `CUBLAS_COMPUTE_32F`, `CUBLAS_GEMM_DEFAULT` and fp32 alpha = 1, beta = 0 — the call cudarc
/// 0.19's `Gemm<bf16>` / `Gemm<f16>::gemm_strided_batched` makes (`src/cublas/safe/gemm.rs`). One matrix is a
/// batch of one rather than `cublasGemmEx`, so every row measures the same entry point.
fn gemm16<T: Element>(
    blas: &CudaBlas,
    shape: GemmShape,
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    out: &mut CudaSlice<T>,
) -> Result<(), BoxError>
where
    CudaBlas: Gemm<T>,
{
    let cfg = swapped(shape, T::ONE, T::ZERO)?;
    // SAFETY: the caller checked that every buffer holds `batch` packed matrices of the sizes in `cfg`.
    unsafe { blas.gemm_strided_batched(cfg, b, a, out) }?;
    Ok(())
}

/// The 16-bit types go through [`gemm16`].
macro_rules! cublas_gemm16 {
    ($($t:ty: $lt:ident),*) => {$(
        impl CublasGemm for $t {
            fn lt_type() -> cudarc::cublaslt::sys::cudaDataType {
                cudarc::cublaslt::sys::cudaDataType::$lt
            }

            fn gemm(
                blas: &CudaBlas,
                shape: GemmShape,
                a: &CudaSlice<$t>,
                b: &CudaSlice<$t>,
                out: &mut CudaSlice<$t>,
            ) -> Result<(), BoxError> {
                gemm16(blas, shape, a, b, out)
            }
        }
    )*};
}

cublas_gemm16!(bf16: CUDA_R_16BF, f16: CUDA_R_16F);

/// cuBLAS's product for the same row-major problem as the kernel's, through the entry point
/// [`CublasGemm`] names for `T`. cuBLAS is column-major: the row-major `C = op(A)·op(B)` is the column-major
/// `Cᵀ = op(B)ᵀ·op(A)ᵀ`, so B goes first, and a row-major operand stored untransposed is a column-major one to
/// use as it is.
///
/// # Errors
/// A buffer smaller than `shape` says (cuBLAS would read or write past it), or what cuBLAS reports.
pub fn cublas_gemm<T: CublasGemm>(
    blas: &CudaBlas,
    shape: GemmShape,
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    out: &mut CudaSlice<T>,
) -> Result<(), BoxError> {
    shape.check_buffers("cuBLAS", a.len(), b.len(), out.len())?;
    T::gemm(blas, shape, a, b, out)
}

#[cfg(test)]
mod tests {
    use super::GemmShape;

    /// A tensor times one matrix is one call of `batch · m` rows; a shared B with transposed A items is none.
    #[test]
    fn a_shared_b_folds_the_batch_into_rows() {
        let mut s = GemmShape::batched(32, 512, 1024, 256);
        assert_eq!(s.as_one_library_call().unwrap(), (32, 512));
        s.shared_b = true;
        assert_eq!(s.as_one_library_call().unwrap(), (1, 32 * 512));
        s.trans_a = true;
        assert!(s.as_one_library_call().is_err());
    }
}
