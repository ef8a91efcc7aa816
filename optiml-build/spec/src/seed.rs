//! A user's own kernel named as a seed of a spec: `#[optiml::kernel("…", seed = "kernels/softmax.cu:softmax_rows")]`.
//! The macro and the build script read the attribute's seed with [`Seed::parse`], so they agree on its meaning and
//! on the kernel's id ([`crate::KernelId::seeded`]); the build script reads the file and puts the kernel in the
//! search beside the generated ones.

use proc_macro2::{Span, TokenStream};
use std::fmt;

/// The arguments of `#[optiml::kernel(…)]`: the spec string, then optionally `seed = "file.cu:function"`.
#[derive(Clone, Debug)]
pub struct KernelArgs {
    /// The spec, as written.
    pub spec: syn::LitStr,
    /// The seed, with the literal it was read from (for spans).
    pub seed: Option<(syn::LitStr, Seed)>,
}

impl KernelArgs {
    /// What the attribute expects, for messages.
    pub const USAGE: &str = "expected a kernel spec string, e.g. #[optiml::kernel(\"batched matmul, f32\")], \
                             optionally followed by `, seed = \"kernels/file.cu:function\"`";

    /// Reads the attribute's arguments.
    ///
    /// # Errors
    /// A spanned error: no spec string, an unknown key, a key given twice, or a seed that is not one.
    pub fn parse(args: TokenStream) -> syn::Result<Self> {
        use syn::parse::Parser;
        if args.is_empty() {
            return Err(syn::Error::new(Span::call_site(), Self::USAGE));
        }
        let parser = |input: syn::parse::ParseStream<'_>| -> syn::Result<Self> {
            let spec: syn::LitStr = input
                .parse()
                .map_err(|e| syn::Error::new(e.span(), Self::USAGE))?;
            let mut seed = None;
            while !input.is_empty() {
                input.parse::<syn::Token![,]>()?;
                if input.is_empty() {
                    break;
                }
                let key: syn::Ident = input.parse()?;
                if key != "seed" {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown argument `{key}`: the attribute takes a spec string and `seed = \"file.cu:function\"`"
                        ),
                    ));
                }
                if seed.is_some() {
                    return Err(syn::Error::new(key.span(), "`seed` is given twice"));
                }
                input.parse::<syn::Token![=]>()?;
                let lit: syn::LitStr = input.parse()?;
                let parsed =
                    Seed::parse(&lit.value()).map_err(|e| syn::Error::new(lit.span(), e))?;
                seed = Some((lit, parsed));
            }
            Ok(Self { spec, seed })
        };
        parser.parse2(args)
    }
}

/// A seed: a `.cu` file, relative to the package's root (the folder of its `Cargo.toml`, as `cc`'s and
/// `build.rs`'s paths are), and the `__global__` function in it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Seed {
    /// The file, as written (`/`-separated, relative).
    pub file: String,
    /// The kernel function's name.
    pub function: String,
}

/// Why a seed's text is not a seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeedError {
    /// No `:` between file and function.
    NoFunction(String),
    /// The function is not a C identifier.
    BadFunction(String),
    /// The path is absolute or climbs out of the package.
    OutsidePackage(String),
    /// The file is not CUDA source.
    NotCuda(String),
}

impl fmt::Display for SeedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeedError::NoFunction(t) => write!(
                f,
                "a seed is `file.cu:function` (a path relative to the package root, then the kernel's name); \
                 `{t}` has no `:`"
            ),
            SeedError::BadFunction(n) => write!(
                f,
                "`{n}` is not the name of a CUDA function (letters, digits and `_`, not starting with a digit)"
            ),
            SeedError::OutsidePackage(p) => write!(
                f,
                "the seed file `{p}` must be relative to the package root and stay inside it (no leading `/`, \
                 no `..`)"
            ),
            SeedError::NotCuda(p) => write!(
                f,
                "the seed file `{p}` must be a CUDA source file ending in `.cu` or `.cuh`"
            ),
        }
    }
}

impl std::error::Error for SeedError {}

impl Seed {
    /// Reads `file.cu:function`.
    ///
    /// # Errors
    /// The text is not of that form, the path leaves the package, or the name is not an identifier.
    pub fn parse(text: &str) -> Result<Self, SeedError> {
        let (file, function) = text
            .rsplit_once(':')
            .ok_or_else(|| SeedError::NoFunction(text.to_string()))?;
        let (file, function) = (file.trim(), function.trim());
        let ident = function
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && function
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ident {
            return Err(SeedError::BadFunction(function.to_string()));
        }
        let path = std::path::Path::new(file);
        let climbs = path.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        });
        if file.is_empty() || climbs || file.starts_with('/') || file.contains('\\') {
            return Err(SeedError::OutsidePackage(file.to_string()));
        }
        if !(file.ends_with(".cu") || file.ends_with(".cuh")) {
            return Err(SeedError::NotCuda(file.to_string()));
        }
        Ok(Self {
            file: file.to_string(),
            function: function.to_string(),
        })
    }

    /// Whether `source` defines `__global__ … function(`: the check the macro makes before the build script
    /// compiles the file (comments are not parsed; NVRTC has the last word).
    pub fn is_defined_in(&self, source: &str) -> bool {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let name = self.function.as_str();
        let mut from = 0;
        while let Some(at) = source[from..].find(name) {
            let at = from + at;
            let before = &source[..at];
            let after = &source[at + name.len()..];
            let word_start = before.chars().next_back().is_none_or(|c| !word(c))
                && after.trim_start().starts_with('(')
                && after.chars().next().is_none_or(|c| !word(c));
            // The declaration's head: from the last `;`, `}` or `{` before the name.
            let head = before
                .rfind([';', '}', '{'])
                .map_or(before, |i| &before[i + 1..]);
            if word_start && head.contains("__global__") {
                return true;
            }
            from = at + name.len();
        }
        false
    }
}

impl fmt::Display for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.function)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attribute_takes_a_spec_then_a_seed() {
        let args = |t: &str| KernelArgs::parse(t.parse().unwrap()).map_err(|e| e.to_string());
        let plain = args("\"relu\"").unwrap();
        assert_eq!(plain.spec.value(), "relu");
        assert!(plain.seed.is_none());
        let seeded = args("\"relu\", seed = \"k/relu.cu:relu_all\",").unwrap();
        assert_eq!(seeded.seed.unwrap().1.to_string(), "k/relu.cu:relu_all");
        assert!(
            args("")
                .unwrap_err()
                .contains("expected a kernel spec string")
        );
        assert!(
            args("relu")
                .unwrap_err()
                .contains("expected a kernel spec string")
        );
        assert!(
            args("\"relu\", sed = \"k.cu:f\"")
                .unwrap_err()
                .contains("unknown argument `sed`")
        );
        assert!(
            args("\"relu\", seed = \"k.cu:f\", seed = \"k.cu:g\"")
                .unwrap_err()
                .contains("given twice")
        );
        assert!(
            args("\"relu\", seed = \"k.cu\"")
                .unwrap_err()
                .contains("has no `:`")
        );
        assert!(args("\"relu\", seed = 3").is_err());
    }

    #[test]
    fn a_seed_is_a_relative_cuda_file_and_a_function() {
        assert_eq!(
            Seed::parse("kernels/softmax.cu:softmax_rows").unwrap(),
            Seed {
                file: "kernels/softmax.cu".into(),
                function: "softmax_rows".into()
            }
        );
        assert_eq!(
            Seed::parse("kernels/softmax.cu"),
            Err(SeedError::NoFunction("kernels/softmax.cu".into()))
        );
        assert_eq!(
            Seed::parse("k.cu:9lives"),
            Err(SeedError::BadFunction("9lives".into()))
        );
        assert_eq!(Seed::parse("k.cu:"), Err(SeedError::BadFunction("".into())));
        for outside in ["/abs/k.cu:f", "../k.cu:f", "a/../../k.cu:f", ":f"] {
            assert!(
                matches!(Seed::parse(outside), Err(SeedError::OutsidePackage(_))),
                "{outside}"
            );
        }
        assert_eq!(
            Seed::parse("k.rs:f"),
            Err(SeedError::NotCuda("k.rs".into()))
        );
        assert_eq!(Seed::parse("k.cu:f").unwrap().to_string(), "k.cu:f");
    }

    #[test]
    fn the_function_must_be_a_global_definition() {
        let seed = Seed::parse("k.cu:rows").unwrap();
        assert!(seed.is_defined_in("extern \"C\" __global__ void rows(const float* x) {}"));
        assert!(seed.is_defined_in(
            "__device__ float f();\n__global__ void\n__launch_bounds__(256) rows (float* x) {}"
        ));
        assert!(!seed.is_defined_in("__device__ void rows(float* x) {}"));
        assert!(!seed.is_defined_in("__global__ void my_rows(float* x) {}"));
        assert!(!seed.is_defined_in("__global__ void k() { rows(x); }"));
    }
}
