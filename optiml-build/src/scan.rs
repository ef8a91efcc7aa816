//! Finding `#[optiml::kernel("…")]` in a crate's sources, with the same parser and signature check the macro uses.

use crate::fs::{self, FsError};
use optiml_spec::{Binding, KernelId, Spec};
use std::path::{Path, PathBuf};

/// A kernel declaration found in the sources.
#[derive(Clone, Debug)]
pub struct FoundKernel {
    /// The function's name.
    pub name: String,
    /// The file it is declared in.
    pub file: PathBuf,
    /// Its line.
    pub line: usize,
    /// The spec as written.
    pub spec_text: String,
    /// The parsed spec.
    pub spec: Spec,
    /// The checked signature.
    pub binding: Binding,
    /// The id the macro will look for.
    pub id: KernelId,
    /// The user's own kernel named as a seed, read from its file.
    pub seed: Option<SeedSource>,
}

/// A seed kernel ([`optiml_spec::Seed`]) and the file it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedSource {
    /// The seed as the attribute names it.
    pub seed: optiml_spec::Seed,
    /// The file, resolved against the package root.
    pub path: PathBuf,
    /// The file's text when scanned.
    pub text: String,
}

impl SeedSource {
    /// sha256 of the file's text: what a tuned entry whose winner is the seed was made from.
    pub fn sha256(&self) -> String {
        optiml_spec::sha256_hex(self.text.as_bytes())
    }
}

/// `seed`, named by a declaration in `file`, read from `file`'s package root; why not, in words.
fn read_seed(file: &Path, seed: optiml_spec::Seed) -> Result<SeedSource, String> {
    let root = package_root(file).ok_or_else(|| {
        format!(
            "the seed `{seed}` is relative to the package root, and no `Cargo.toml` is above `{}`",
            file.display()
        )
    })?;
    let path = root.join(&seed.file);
    let text = fs::read_to_string(&path)
        .map_err(|e| format!("the seed file `{}` cannot be read: {e}", path.display()))?;
    Ok(SeedSource { seed, path, text })
}

/// The package root of `file`: the nearest folder above it with a `Cargo.toml`.
pub fn package_root(file: &Path) -> Option<&Path> {
    file.ancestors()
        .skip(1)
        .find(|d| d.join("Cargo.toml").is_file())
}

/// A declaration the build script skips; the macro reports it with a span at compile time.
#[derive(Clone, Debug)]
pub struct Skipped {
    /// Where.
    pub file: PathBuf,
    /// The line.
    pub line: usize,
    /// Why.
    pub message: String,
    /// The spec and the parser's error, when the spec itself was not understood (a model may offer a reading).
    pub refused_spec: Option<(String, String)>,
}

/// What a scan found.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// Valid kernel declarations, in file order.
    pub kernels: Vec<FoundKernel>,
    /// Declarations with a bad spec or signature.
    pub skipped: Vec<Skipped>,
    /// Every file read (for `rerun-if-changed`).
    pub files: Vec<PathBuf>,
    /// Every folder walked (new files in them must rerun the scan).
    pub dirs: Vec<PathBuf>,
}

impl Scan {
    /// The kernels with distinct ids, first declaration first: two functions with one spec share one kernel.
    pub fn unique_kernels(&self) -> Vec<FoundKernel> {
        let mut seen = std::collections::BTreeSet::new();
        self.kernels
            .iter()
            .filter(|k| seen.insert(k.id))
            .cloned()
            .collect()
    }

    /// [`Scan::unique_kernels`] among the functions named in `only` (every one where `None`): a name picks its
    /// kernel even where an earlier function with another name declares the same one (`--kernel p3` where
    /// `bmm` has p3's spec).
    ///
    /// # Errors
    /// The names in `only` that no function has, with the names there are.
    pub fn kernels_named(&self, only: Option<&[String]>) -> Result<Vec<FoundKernel>, String> {
        let Some(only) = only else {
            return Ok(self.unique_kernels());
        };
        let missing: Vec<&str> = only
            .iter()
            .filter(|n| !self.kernels.iter().any(|k| &k.name == *n))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let mut names: Vec<&str> = self.kernels.iter().map(|k| k.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            return Err(format!(
                "no kernel function named {} (there are: {})",
                missing.join(", "),
                names.join(", ")
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        Ok(self
            .kernels
            .iter()
            .filter(|k| only.contains(&k.name) && seen.insert(k.id))
            .cloned()
            .collect())
    }
}

/// The `.rs` files under `root`, skipping `target/`, hidden folders and nested packages (folders with their own
/// `Cargo.toml`), which have build scripts of their own.
pub fn rust_files(root: &Path, scan: &mut Scan) -> Result<Vec<PathBuf>, FsError> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        scan.dirs.push(dir.clone());
        for path in fs::read_dir(&dir)? {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if path.is_dir() {
                let nested = path != root && path.join("Cargo.toml").is_file();
                if !(name.starts_with('.') || name == "target" || nested) {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Scans every `.rs` file under each root.
///
/// # Errors
/// An unreadable file or folder.
pub fn scan(roots: &[PathBuf]) -> Result<Scan, FsError> {
    let mut scan = Scan::default();
    for root in roots {
        if root.is_file() {
            scan_file(root, &mut scan)?;
            continue;
        }
        for file in rust_files(root, &mut scan)? {
            scan_file(&file, &mut scan)?;
        }
    }
    Ok(scan)
}

/// Scans one file's text (public for tests and tools that hold sources in memory).
pub fn scan_source(file: &Path, text: &str, scan: &mut Scan) {
    // Most files mention no kernel; skip the parse for them.
    if !text.contains("kernel") {
        return;
    }
    match syn::parse_file(text) {
        Ok(parsed) => visit_items(file, &parsed.items, scan),
        Err(e) => scan.skipped.push(Skipped {
            file: file.to_path_buf(),
            line: e.span().start().line,
            message: format!("could not parse the file ({e}); its kernels are skipped"),
            refused_spec: None,
        }),
    }
}

fn scan_file(file: &Path, scan: &mut Scan) -> Result<(), FsError> {
    let text = fs::read_to_string(file)?;
    scan.files.push(file.to_path_buf());
    scan_source(file, &text, scan);
    Ok(())
}

fn visit_items(file: &Path, items: &[syn::Item], scan: &mut Scan) {
    for item in items {
        match item {
            syn::Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    visit_items(file, items, scan);
                }
            }
            // A bodyless `fn f(..);` is not an `Item::Fn` to syn.
            syn::Item::Verbatim(tokens) => {
                if let Ok(f) = syn::parse2::<syn::ForeignItemFn>(tokens.clone()) {
                    declaration(file, &f, scan);
                }
            }
            _ => {}
        }
    }
}

fn is_kernel_attr(attr: &syn::Attribute) -> bool {
    let segs: Vec<String> = attr
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    segs == ["optiml", "kernel"]
}

fn declaration(file: &Path, f: &syn::ForeignItemFn, scan: &mut Scan) {
    let Some(attr) = f.attrs.iter().find(|a| is_kernel_attr(a)) else {
        return;
    };
    let line = f.sig.ident.span().start().line;
    let skip = |scan: &mut Scan, message: String| {
        scan.skipped.push(Skipped {
            file: file.to_path_buf(),
            line,
            message,
            refused_spec: None,
        });
    };
    let args = match attr
        .meta
        .require_list()
        .and_then(|l| optiml_spec::KernelArgs::parse(l.tokens.clone()))
    {
        Ok(a) => a,
        Err(e) => return skip(scan, format!("`{}`: {e}", f.sig.ident)),
    };
    let lit = args.spec;
    let spec = match optiml_spec::parse(&lit.value()) {
        Ok(s) => s,
        Err(e) => {
            skip(scan, format!("`{}`: {e}", f.sig.ident));
            if let Some(last) = scan.skipped.last_mut() {
                last.refused_spec = Some((lit.value(), e.to_string()));
            }
            return;
        }
    };
    let binding = match optiml_spec::bind(&spec, &f.sig) {
        Ok(b) => b,
        Err(e) => return skip(scan, format!("`{}`: {e}", f.sig.ident)),
    };
    let seed = match args.seed.map(|(_, seed)| read_seed(file, seed)).transpose() {
        Ok(seed) => seed,
        Err(e) => return skip(scan, format!("`{}`: {e}", f.sig.ident)),
    };
    if let Some(s) = &seed {
        scan.files.push(s.path.clone());
    }
    let id = KernelId::seeded(&spec, &binding, seed.as_ref().map(|s| &s.seed));
    scan.kernels.push(FoundKernel {
        name: f.sig.ident.to_string(),
        file: file.to_path_buf(),
        line,
        spec_text: lit.value(),
        spec,
        binding,
        id,
        seed,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_kernels_in_modules_and_skips_bad_ones() {
        let text = r#"
            use optiml::cudarc::driver::CudaSlice;
            mod inner {
                #[optiml::kernel("bmm")]
                pub fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);
                mod deeper {
                    /// docs are fine
                    #[optiml::kernel("y = relu(x)")]
                    fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
                }
            }
            #[optiml::kernel("softmaxx")]
            fn bad(x: &CudaSlice<f32>);
            #[other::kernel("relu")]
            fn not_ours(x: &CudaSlice<f32>);
            fn normal() {}
        "#;
        let mut scan = Scan::default();
        scan_source(Path::new("lib.rs"), text, &mut scan);
        let names: Vec<&str> = scan.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["bmm", "relu"]);
        assert_eq!(scan.kernels[0].line, 5);
        assert_eq!(scan.skipped.len(), 1);
        assert!(
            scan.skipped[0].message.contains("unknown word `softmaxx`"),
            "{:?}",
            scan.skipped
        );
    }

    /// A kernel is found by any of its functions' names, not only by the first one's.
    #[test]
    fn a_kernel_is_named_by_any_function_that_declares_it() {
        let text = r#"
            use optiml::cudarc::driver::CudaSlice;
            #[optiml::kernel("batched matmul, f32")]
            pub fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);
            #[optiml::kernel("batched matmul, f32")]
            pub fn p3(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);
            #[optiml::kernel("y = relu(x)")]
            fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);
        "#;
        let mut scan = Scan::default();
        scan_source(Path::new("lib.rs"), text, &mut scan);
        let names = |only: &[&str]| {
            let only: Vec<String> = only.iter().map(|s| s.to_string()).collect();
            scan.kernels_named(Some(&only))
                .map(|ks| ks.into_iter().map(|k| k.name).collect::<Vec<_>>())
        };
        assert_eq!(scan.unique_kernels().len(), 2);
        assert_eq!(names(&["p3"]).unwrap(), ["p3"]);
        assert_eq!(names(&["bmm", "p3", "relu"]).unwrap(), ["bmm", "relu"]);
        let err = names(&["p3", "gemm"]).unwrap_err();
        assert!(
            err.contains("named gemm") && err.contains("bmm, p3, relu"),
            "{err}"
        );
        assert_eq!(scan.kernels_named(None).unwrap().len(), 2);
    }

    /// A seed is read from the package root at scan time: the kernel holds its text, the file is watched, and
    /// the id is another kernel's than the same declaration without a seed. An unreadable seed skips the kernel
    /// with the path it looked at.
    #[test]
    fn a_seed_is_read_from_the_package_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("kernels")).unwrap();
        std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"p\"\n").unwrap();
        let cu = "extern \"C\" __global__ void rows(const float* x, float* y, long long r, long long c) {}\n";
        std::fs::write(root.join("kernels/rows.cu"), cu).unwrap();
        std::fs::write(
            root.join("src/lib.rs"),
            "#[optiml::kernel(\"softmax over the last axis\", seed = \"kernels/rows.cu:rows\")]\n\
             fn seeded(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);\n\
             #[optiml::kernel(\"softmax over the last axis\")]\n\
             fn plain(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);\n\
             #[optiml::kernel(\"softmax over the last axis\", seed = \"kernels/gone.cu:rows\")]\n\
             fn gone(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);\n",
        )
        .unwrap();
        let scan = scan(&[root.join("src")]).unwrap();
        let names: Vec<&str> = scan.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["seeded", "plain"]);
        let (seeded, plain) = (&scan.kernels[0], &scan.kernels[1]);
        let seed = seeded.seed.as_ref().unwrap();
        assert_eq!(
            (seed.seed.to_string(), seed.text.as_str()),
            ("kernels/rows.cu:rows".to_string(), cu)
        );
        assert_eq!(seed.path, root.join("kernels/rows.cu"));
        assert!(scan.files.contains(&root.join("kernels/rows.cu")));
        assert!(plain.seed.is_none());
        assert_ne!(seeded.id, plain.id);
        assert_eq!(plain.id, KernelId::new(&plain.spec, &plain.binding));
        assert_eq!(scan.skipped.len(), 1);
        let message = &scan.skipped[0].message;
        assert!(
            message.contains("`gone`: the seed file") && message.contains("kernels/gone.cu"),
            "{message}"
        );
    }
}
