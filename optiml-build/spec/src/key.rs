//! The kernel id: what names a kernel's generated files, computed alike by the macro and the build script.

use crate::SPEC_FORMAT;
use crate::model::Spec;
use crate::signature::Binding;
use sha2::{Digest, Sha256};
use std::fmt;

/// sha256 over the canonical spec and binding. Architecture, toolchain and generator are not in it: one id names
/// a kernel for every GPU, and the build script keys each architecture's cache entry by id + arch + toolchain +
/// generator (see `optiml_build::cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelId([u8; 32]);

impl KernelId {
    /// The id of `spec` bound to `binding`.
    pub fn new(spec: &Spec, binding: &Binding) -> Self {
        let text = format!(
            "optiml-spec/{SPEC_FORMAT}\nspec {}\nbinding {}\n",
            spec.canonical(),
            binding.canonical()
        );
        Self(Sha256::digest(text.as_bytes()).into())
    }

    /// The id of `spec` bound to `binding` with `seed` among its candidates: another kernel than the one without
    /// (its tuned winner may be the seed), and the same id as [`KernelId::new`] when there is none.
    pub fn seeded(spec: &Spec, binding: &Binding, seed: Option<&crate::Seed>) -> Self {
        let Some(seed) = seed else {
            return Self::new(spec, binding);
        };
        let text = format!(
            "optiml-spec/{SPEC_FORMAT}\nspec {}\nbinding {}\nseed {seed}\n",
            spec.canonical(),
            binding.canonical()
        );
        Self(Sha256::digest(text.as_bytes()).into())
    }

    /// Full lower-case hex.
    pub fn hex(&self) -> String {
        hex(&self.0)
    }

    /// The first 16 hex digits: enough to be unique within a crate, short enough for file names.
    pub fn short(&self) -> String {
        self.hex()[..16].to_string()
    }

    /// The file, relative to `$OUT_DIR`, that the build script writes and the macro `include!`s.
    pub fn generated_file(&self) -> String {
        format!("optiml/kernel-{}.rs", self.short())
    }
}

impl fmt::Display for KernelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bind, parse};

    fn id(spec: &str, sig: &str) -> KernelId {
        let spec = parse(spec).unwrap();
        let sig = syn::parse_str::<syn::ForeignItemFn>(sig).unwrap().sig;
        KernelId::new(&spec, &bind(&spec, &sig).unwrap())
    }

    const BMM: &str = "fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);";

    /// Golden value: if this changes, every cache in the wild is invalidated. Change it only together with
    /// `SPEC_FORMAT` or the canonical form, on purpose.
    #[test]
    fn key_is_stable() {
        assert_eq!(
            id("batched matmul, f32", BMM).hex(),
            "06c8309277b52fee500d5756fa7793810a1c051e9ea2c032d3401e2272afcd07"
        );
    }

    #[test]
    fn key_ignores_phrasing_and_names_but_not_meaning() {
        let base = id("batched matmul, f32", BMM);
        assert_eq!(id("bmm", BMM), base);
        assert_eq!(
            id(
                "batch of matrix products",
                "fn x(k: u32, c: &mut CudaSlice<f32>, a: &CudaSlice<f32>, b: &CudaSlice<f32>, batch: usize, m: usize, n: usize);"
            ),
            base
        );
        assert_ne!(id("bmm, B transposed", BMM), base);
        assert_ne!(
            id(
                "bmm, k=1024",
                "fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize);"
            ),
            base
        );
    }
}
