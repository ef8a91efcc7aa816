//! Outputs against a float64 reference: every element, or pseudo-random samples of a large product, after making
//! sure nothing is left of the NaN poison.

/// The float64 activations every reference uses (the gate's too).
pub use optiml_spec::reference::{gelu, silu};

/// The first element that is not a finite number, as the error a check reports: a poisoned NaN the kernel left
/// unwritten, or an overflow.
fn first_unwritten<T: Copy + Into<f64>>(out: &[T]) -> Result<(), String> {
    match out.iter().position(|&v| !v.into().is_finite()) {
        Some(i) => Err(format!(
            "element {i} is {} (unwritten or wrong)",
            out[i].into()
        )),
        None => Ok(()),
    }
}

/// Checks every element of `out` against `reference(index)`: all written, and each within `tol` (absolute) of
/// its float64 reference. Returns the largest error.
///
/// # Errors
/// The first element not written, or the largest error when it exceeds `tol`.
pub fn check_each<T: Copy + Into<f64>>(
    out: &[T],
    tol: f64,
    reference: impl Fn(usize) -> f64,
) -> Result<f64, String> {
    first_unwritten(out)?;
    let (worst, at) = out
        .iter()
        .enumerate()
        .map(|(i, &v)| ((v.into() - reference(i)).abs(), i))
        .fold((0f64, 0), |w, e| if e.0 > w.0 { e } else { w });
    if worst > tol {
        return Err(format!(
            "max absolute error {worst:e} > {tol:e} (element {at}: {}, expected {})",
            out[at].into(),
            reference(at)
        ));
    }
    Ok(worst)
}

/// Checks a batched `m × n` output (f32, or a 16-bit type read exactly as f64): every element written (nothing
/// left of the NaN poison, no overflow), and `samples` pseudo-random elements within `tol` (1e-5 for exact fp32,
/// 2e-3 for TF32, 8e-3 for bf16, 1e-3 for fp16) of `reference(item, row, column)`, which returns the float64
/// value and the magnitude of its terms (Σ|a·b| + |bias|, the scale a dot product's rounding error is
/// proportional to). Returns the largest sampled error relative to that magnitude.
///
/// # Errors
/// The first element not written, or the largest sampled error when it exceeds `tol`.
pub fn check_sampled<T: Copy + Into<f64>>(
    out: &[T],
    (batch, m, n): (usize, usize, usize),
    samples: usize,
    tol: f64,
    reference: impl Fn(usize, usize, usize) -> (f64, f64),
) -> Result<f64, String> {
    first_unwritten(out)?;
    let (mut worst, mut state) = (0f64, 0x9e37_79b9_7f4a_7c15_u64);
    for _ in 0..samples {
        // xorshift: the same positions every run, spread over every batch item, row and column.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let (z, i, j) = (
            (state % batch as u64) as usize,
            ((state >> 20) % m as u64) as usize,
            ((state >> 40) % n as u64) as usize,
        );
        let (want, mag) = reference(z, i, j);
        let err = (out[z * m * n + i * n + j].into() - want).abs() / mag.max(1e-30);
        worst = worst.max(err);
    }
    if worst > tol {
        return Err(format!("sampled relative error {worst:e} > {tol:e}"));
    }
    Ok(worst)
}

/// ‖x − y‖₂ / ‖y‖₂ in float64: how far a result is from a baseline's.
pub fn rel_diff<T: Copy + Into<f64>>(x: &[T], y: &[T]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (&a, &b) in x.iter().zip(y) {
        let (a, b): (f64, f64) = (a.into(), b.into());
        num += (a - b).powi(2);
        den += b.powi(2);
    }
    (num / den.max(1e-300)).sqrt()
}
