//! CUDA helpers several templates share, handed to NVRTC as in-memory headers: a template writes
//! `#include "optiml/epilogue.cuh"` and [`crate::nvrtc::compile`] offers every header here under its name, so a
//! build needs no file of them on disk. A family lists the headers its templates include among its sources, so
//! they are hashed into its generator version like the templates.

/// A header NVRTC is given in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The name templates include it by.
    pub name: &'static str,
    /// Its text.
    pub text: &'static str,
}

/// The defaults of the options every matmul template reads (the layout and epilogue flags, the 16-bit element
/// type) and the names of the element-type codes (`OPTIML_DTYPE_BF16`, `OPTIML_DTYPE_F16`).
pub const DEFAULTS: Header = Header {
    name: "optiml/defaults.cuh",
    text: include_str!("optiml/defaults.cuh"),
};

/// The activations (relu, gelu, silu) in their exact (CUDA-core) and fast (tensor-core) forms, and the
/// `OPTIML_ACT_*` names of the `OPTIML_ACT` option.
pub const EPILOGUE: Header = Header {
    name: "optiml/epilogue.cuh",
    text: include_str!("optiml/epilogue.cuh"),
};

/// The Hopper PTX wrappers the warp-specialised (`wgmma`) templates share: the TMA descriptor type, mbarriers,
/// TMA and `cp.async` loads, named barriers, `wgmma` fences and groups, `setmaxnreg`.
pub const SM90: Header = Header {
    name: "optiml/sm90.cuh",
    text: include_str!("optiml/sm90.cuh"),
};

/// What every kernel generated from a tensor program shares: storage types (f32, bf16, f16) with their
/// conversions, 16-byte chunk loads and stores, the IR's scalar functions (NaN-propagating max and min, sigmoid)
/// and deterministic warp reductions (sums, products, extremes, first-index argmax and argmin).
pub const PROGRAM: Header = Header {
    name: "optiml/program.cuh",
    text: include_str!("optiml/program.cuh"),
};

/// The gate's rule for one output element against its float64 reference, and the block sums of its relative L2
/// condition: what the matmul and tensor-program references on the GPU compare through.
pub const COMPARE: Header = Header {
    name: "optiml/compare.cuh",
    text: include_str!("optiml/compare.cuh"),
};

/// The split-K reduction (`optiml_splitk_reduce`) of the f32 matmul templates, SIMT and `wgmma` alike: the
/// partial sums of every split added in a fixed order, then the including template's epilogue.
pub const SPLITK: Header = Header {
    name: "optiml/splitk.cuh",
    text: include_str!("optiml/splitk.cuh"),
};

/// Every shared header.
pub const HEADERS: &[Header] = &[DEFAULTS, EPILOGUE, SM90, PROGRAM, COMPARE, SPLITK];

/// The headers `source` includes, by name: what a family must list among the sources its version hashes.
pub fn included_by(source: &str) -> Vec<&'static Header> {
    HEADERS
        .iter()
        .filter(|h| {
            source.lines().any(|l| {
                l.trim_start().starts_with("#include") && l.contains(&format!("\"{}\"", h.name))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_found_by_their_include_line() {
        let src = "#define X 1\n#include \"optiml/epilogue.cuh\"  // activations\nint x;\n";
        assert_eq!(included_by(src), [&EPILOGUE]);
        assert!(included_by("// mentions optiml/epilogue.cuh only in a comment\n").is_empty());
        // The header guards itself: two templates of one module may both include it.
        assert!(EPILOGUE.text.contains("#ifndef OPTIML_EPILOGUE_CUH"));
    }
}
