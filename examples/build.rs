//! Generates the examples' kernels (from the committed `.optiml/` when there is no GPU or NVRTC).

fn main() {
    optiml_build::Builder::new()
        .compile()
        .unwrap_or_else(|e| e.exit());
}
