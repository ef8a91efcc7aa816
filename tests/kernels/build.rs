//! Generates this crate's kernels, as any user's build script would.

fn main() {
    optiml_build::Builder::new()
        .compile()
        .unwrap_or_else(|e| e.exit());
}
