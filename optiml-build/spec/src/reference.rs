//! The float64 meaning of the spec's functions: the one place every reference (the verification gate's, the
//! tests', the examples') takes them from, so that a kernel is checked against what the word means and no two
//! checks disagree on it.

/// `max(v, 0)`. NaN stays NaN: a reference never hides an input the kernel should not have produced.
pub fn relu(v: f64) -> f64 {
    if v.is_nan() { v } else { v.max(0.0) }
}

/// The exact GELU, `0.5 · v · (1 + erf(v / √2))`.
pub fn gelu(v: f64) -> f64 {
    0.5 * v * (1.0 + libm::erf(v / std::f64::consts::SQRT_2))
}

/// `1 / (1 + e^−v)`.
pub fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// `v · sigmoid(v)` (swish).
pub fn silu(v: f64) -> f64 {
    v * sigmoid(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert!((gelu(1.0) - 0.841_344_746_068_542_9).abs() < 1e-15);
        assert_eq!(gelu(0.0), 0.0);
        assert!((silu(-2.0) - (-2.0 / (1.0 + 2f64.exp()))).abs() < 1e-15);
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(relu(-3.0), 0.0);
        assert!(relu(f64::NAN).is_nan());
    }
}
