//! The dispatch shape checked on every element against a float64 reference computed on the GPU
//! (`cuda/reference.cu`, part of the worker's trusted support module).
//!
//! The host reference costs about a second per sampled 4096³ check, so the dispatch shape used to be checked on
//! sampled rows and columns only: a kernel with a branch taken only at that shape, or only in some of its tiles,
//! passed whenever its wrong elements missed the samples, and a spec that fixes every dimension had no element
//! of its one real shape fully checked. Here the reference runs in chunks of whole rows from the f32 operands
//! (which for a 16-bit kernel hold its 16-bit values exactly) and is compared on the GPU; only the sums and the
//! first failing element cross to the host, whose own arithmetic ([`epilogue`], [`Comparison::check`]) words the
//! failure.

use super::plan::{MatmulShape, epilogue};
use crate::eval::device::{Bench, Stop, fault, reject};
use crate::eval::plan::{Comparison, Tolerance};
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use optiml_spec::{Activation, MatmulSpec, Triangle};

/// The most reference elements one chunk holds (two float64 buffers of it: 128 MiB).
const CHUNK: usize = 1 << 23;

/// The most rows one chunk spans (the reference's grid has one 64-row tile per block row, at most 65535 of them).
const MAX_ROWS: usize = 1 << 20;

/// Blocks of the comparison (fixed, so its per-block sums add up in the same order on every run).
const COMPARE_BLOCKS: u32 = 512;

/// The operands the reference reads, as the candidate got them (for a 16-bit kernel, the f32 buffers its copies
/// were converted from).
pub struct Inputs<'a> {
    /// A as stored.
    pub a: &'a CudaSlice<f32>,
    /// B as stored.
    pub b: &'a CudaSlice<f32>,
    /// The old C of a spec with beta.
    pub c0: Option<&'a CudaSlice<f32>>,
    /// The bias of a spec with one.
    pub bias: Option<&'a CudaSlice<f32>>,
}

/// One chunk of the output: whole rows `[row0, row0 + rows)` of items `[item0, item0 + items)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Chunk {
    item0: usize,
    items: usize,
    row0: usize,
    rows: usize,
}

impl Chunk {
    fn len(&self, n: usize) -> usize {
        self.items * self.rows * n
    }
}

/// The chunks covering `shape`'s output, in order: whole items while one fits, else rows of one item.
fn chunks(shape: &MatmulShape) -> Vec<Chunk> {
    let (m, n) = (shape.m, shape.n);
    if shape.batch == 0 || m == 0 || n == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    if m * n <= CHUNK && m <= MAX_ROWS {
        let per = CHUNK / (m * n);
        let mut item0 = 0;
        while item0 < shape.batch {
            let items = per.min(shape.batch - item0);
            out.push(Chunk {
                item0,
                items,
                row0: 0,
                rows: m,
            });
            item0 += items;
        }
    } else {
        let per = (CHUNK / n).clamp(1, MAX_ROWS);
        for item0 in 0..shape.batch {
            let mut row0 = 0;
            while row0 < m {
                let rows = per.min(m - row0);
                out.push(Chunk {
                    item0,
                    items: 1,
                    row0,
                    rows,
                });
                row0 += rows;
            }
        }
    }
    out
}

/// The device bytes a full check of `shape` allocates: a chunk's reference and magnitudes, the comparison's
/// sums and its failing index.
pub fn scratch_bytes(shape: &MatmulShape) -> u64 {
    let len = chunks(shape)
        .iter()
        .map(|c| c.len(shape.n))
        .max()
        .unwrap_or(0);
    (len as u64 * 16) + u64::from(COMPARE_BLOCKS) * 16 + 8
}

/// The flags `optiml_matmul_reference` and `optiml_matmul_compare` read.
fn flags(spec: &MatmulSpec) -> i32 {
    [
        spec.trans_a,
        spec.trans_b,
        spec.shared_a,
        spec.shared_b,
        spec.alpha,
        spec.beta,
        spec.bias,
    ]
    .iter()
    .enumerate()
    .map(|(bit, &on)| i32::from(on) << bit)
    .sum()
}

fn triangle_code(spec: &MatmulSpec) -> i32 {
    match spec.triangle {
        None => 0,
        Some(Triangle::Upper) => 1,
        Some(Triangle::Lower) => 2,
    }
}

fn activation_code(spec: &MatmulSpec) -> i32 {
    match spec.activation {
        None => 0,
        Some(Activation::Relu) => 1,
        Some(Activation::Gelu) => 2,
        Some(Activation::Silu) => 3,
    }
}

/// A dimension as the reference kernels' `int`.
fn int(what: &str, v: usize) -> Result<i32, Stop> {
    i32::try_from(v).map_err(|_| {
        reject(
            "reference",
            format!("{what} = {v} is past the float64 reference's 32-bit extents"),
        )
    })
}

/// Checks every element of `out` (the whole batched C of `shape`) against the float64 reference of `inputs`.
/// `when` ends each element's name in a failure ("after the first run").
///
/// # Errors
/// The outer error is a driver fault or a shape past the reference's extents; the inner one says why the
/// output is wrong: the first failing element in the order the host reference walks them, or the relative L2
/// error over every element.
#[allow(clippy::too_many_arguments)]
pub fn check_all(
    w: &Bench,
    spec: &MatmulSpec,
    shape: &MatmulShape,
    alpha: f32,
    beta: f32,
    tol: &Tolerance,
    inputs: &Inputs<'_>,
    out: &CudaSlice<f32>,
    when: &str,
) -> Result<Result<usize, String>, Stop> {
    let s = &w.stream;
    let (m, n, k) = (int("m", shape.m)?, int("n", shape.n)?, int("k", shape.k)?);
    let chunks = chunks(shape);
    let len = chunks.iter().map(|c| c.len(shape.n)).max().unwrap_or(0);
    let mut cmp = Comparison::default();
    if len == 0 {
        return Ok(cmp.finish(tol));
    }
    let alloc = |what: &str, n: usize| {
        s.alloc_zeros::<f64>(n)
            .map_err(fault(format!("allocating the reference's {what}")))
    };
    let mut acc = alloc("values", len)?;
    let mut mag = alloc("magnitudes", len)?;
    let mut partial = alloc("sums", 2 * COMPARE_BLOCKS as usize)?;
    let mut first = s
        .alloc_zeros::<u64>(1)
        .map_err(fault("allocating the failing index"))?;
    let (flags, tri, act) = (flags(spec), triangle_code(spec), activation_code(spec));
    let support = w.support();
    // An absent operand is passed as a null pointer, which the kernels never read.
    let null: u64 = 0;
    let (alpha64, beta64) = (f64::from(alpha), f64::from(beta));
    for chunk in chunks {
        let (item0, items, row0, rows) = (
            chunk.item0 as i64,
            int("items", chunk.items)?,
            int("row", chunk.row0)?,
            int("rows", chunk.rows)?,
        );
        let mut b = s.launch_builder(&support.matmul_reference);
        b.arg(inputs.a).arg(inputs.b).arg(&mut acc).arg(&mut mag);
        b.arg(&item0).arg(&items).arg(&row0).arg(&rows);
        b.arg(&m).arg(&n).arg(&k).arg(&flags).arg(&tri);
        let cfg = LaunchConfig {
            grid_dim: (
                shape.n.div_ceil(64) as u32,
                chunk.rows.div_ceil(64) as u32,
                chunk.items.min(65535) as u32,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `optiml_matmul_reference(const float*, const float*, double*, double*, long long, int, int,
        // int, int, int, int, int, int)` reads A and B at the offsets of `shape` under `spec`'s layout (the
        // buffers hold every item's operands, `operand_lens`), and writes `items · rows · n ≤ len` elements of
        // the two outputs.
        unsafe { b.launch(cfg) }.map_err(fault("computing the float64 reference"))?;
        s.memcpy_htod(&[u64::MAX], &mut first)
            .map_err(fault("resetting the failing index"))?;
        let mut b = s.launch_builder(&support.matmul_compare);
        b.arg(out).arg(&acc).arg(&mag);
        match inputs.c0 {
            Some(c0) => b.arg(c0),
            None => b.arg(&null),
        };
        match inputs.bias {
            Some(bias) => b.arg(bias),
            None => b.arg(&null),
        };
        b.arg(&item0).arg(&items).arg(&row0).arg(&rows);
        b.arg(&m).arg(&n).arg(&flags).arg(&alpha64).arg(&beta64);
        let forgive = tol.forgive_abs();
        b.arg(&act)
            .arg(&tri)
            .arg(&tol.scaled_abs)
            .arg(&tol.abs)
            .arg(&forgive);
        b.arg(&mut partial).arg(&mut first);
        let cfg = LaunchConfig {
            grid_dim: (COMPARE_BLOCKS, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `optiml_matmul_compare(const float*, const double*, const double*, const float*, const
        // float*, long long, int, int, int, int, int, int, double, double, int, int, double, double, double,
        // double*, u64*)` reads the chunk's elements of C (and of the old C and the bias where the flags say so, which
        // is exactly when they are passed), the chunk's reference, and writes two sums per block and the index.
        unsafe { b.launch(cfg) }.map_err(fault("comparing with the float64 reference"))?;
        let sums = s
            .clone_dtoh(&partial)
            .map_err(fault("reading the comparison"))?;
        let at = s
            .clone_dtoh(&first)
            .map_err(fault("reading the comparison"))?[0];
        if at != u64::MAX {
            let reason = describe(
                w, spec, shape, alpha, beta, tol, inputs, out, chunk, &acc, &mag, at, when,
            )?;
            return Ok(Err(reason));
        }
        let (diff2, ref2) = sums
            .chunks_exact(2)
            .fold((0.0, 0.0), |(d, r), p| (d + p[0], r + p[1]));
        cmp.add_sums(diff2, ref2, chunk.len(shape.n));
    }
    Ok(cmp.finish(tol))
}

/// Words the failure of C's element at flattened index `at` (which the GPU comparison found first) with the
/// host's own arithmetic on its reference.
#[allow(clippy::too_many_arguments)]
fn describe(
    w: &Bench,
    spec: &MatmulSpec,
    shape: &MatmulShape,
    alpha: f32,
    beta: f32,
    tol: &Tolerance,
    inputs: &Inputs<'_>,
    out: &CudaSlice<f32>,
    chunk: Chunk,
    acc: &CudaSlice<f64>,
    mag: &CudaSlice<f64>,
    at: u64,
    when: &str,
) -> Result<String, Stop> {
    let s = &w.stream;
    let at = at as usize;
    let (item, i, j) = (
        at / (shape.m * shape.n),
        at / shape.n % shape.m,
        at % shape.n,
    );
    let one = |buf: &CudaSlice<f32>, index: usize| -> Result<f32, Stop> {
        Ok(s.clone_dtoh(&buf.slice(index..index + 1))
            .map_err(fault("reading a failing element"))?[0])
    };
    let one64 = |buf: &CudaSlice<f64>, index: usize| -> Result<f64, Stop> {
        Ok(s.clone_dtoh(&buf.slice(index..index + 1))
            .map_err(fault("reading a failing element"))?[0])
    };
    let name = || format!("C[{item}][{i}][{j}] {when}");
    let value = one(out, at)?;
    let mut cmp = Comparison::default();
    if spec.triangle.is_some_and(|t| t.outside(i, j)) {
        cmp.check_zero(&name, value);
    } else {
        let e = ((item - chunk.item0) * chunk.rows + (i - chunk.row0)) * shape.n + j;
        let c0 = match inputs.c0 {
            Some(c0) => one(c0, at)?,
            None => 0.0,
        };
        let bias = inputs.bias.map(|b| one(b, j)).transpose()?;
        let (r, g) = epilogue(spec, alpha, beta, one64(acc, e)?, one64(mag, e)?, c0, bias);
        cmp.check(tol, &name, value, r, g);
        if cmp.failure.is_none() {
            // The bound's edge, where the device's and the host's last bits of the activation differ.
            return Ok(format!(
                "{} is {value:.8e}, expected {r:.8e}: at the edge of its bound (magnitude {g:.3e})",
                name()
            ));
        }
    }
    Ok(cmp.failure.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(batch: usize, m: usize, n: usize, k: usize) -> MatmulShape {
        MatmulShape { batch, m, n, k }
    }

    /// Chunks cover every output row of every item exactly once, in the host reference's order, and none holds
    /// more than [`CHUNK`] elements unless one row alone does.
    #[test]
    fn chunks_cover_the_output_once_in_order() {
        for s in [
            shape(128, 512, 2048, 1024),
            shape(1, 32768, 32768, 64),
            shape(3, 5, 7, 9),
            shape(1 << 22, 1, 1, 8),
            shape(1, 2048, 1, 1 << 20),
            shape(1, 3, 1 << 24, 2),
            shape(2, 0, 4, 4),
        ] {
            let cs = chunks(&s);
            let mut next = (0, 0);
            for c in &cs {
                assert!(c.len(s.n) <= CHUNK.max(s.n), "{s}: {c:?}");
                assert!(c.rows <= MAX_ROWS, "{s}: {c:?}");
                assert_eq!((c.item0, c.row0), next, "{s}: {c:?}");
                next = if c.row0 + c.rows == s.m {
                    (c.item0 + c.items, 0)
                } else {
                    assert_eq!(c.items, 1);
                    (c.item0, c.row0 + c.rows)
                };
            }
            let expected = if s.m * s.n == 0 { (0, 0) } else { (s.batch, 0) };
            assert_eq!(next, expected, "{s}");
        }
    }

    #[test]
    fn flags_name_each_option_by_its_bit() {
        let spec = |text: &str| match optiml_spec::parse(text).unwrap().family {
            optiml_spec::Family::Matmul(m) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(flags(&spec("matmul, f32")), 0);
        assert_eq!(flags(&spec("matmul, f32, A transposed")), 1);
        assert_eq!(flags(&spec("matmul, f32, B transposed, bias")), 2 | 64);
        assert_eq!(flags(&spec("gemm, alpha, beta")), 16 | 32);
        assert_eq!(flags(&spec("batched matmul, B shared")), 8);
        assert_eq!(activation_code(&spec("matmul, f32, gelu")), 2);
        assert_eq!(
            triangle_code(&spec("matmul for upper triangular matrices")),
            1
        );
        // A 4096² output in one chunk takes its two float64 buffers, the sums and the index.
        assert_eq!(
            scratch_bytes(&shape(1, 4096, 4096, 4096)),
            (1 << 23) * 16 + 512 * 16 + 8
        );
    }
}
