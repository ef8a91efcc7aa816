//! Generates the held-out kernels from this crate's cache only: neither the per-user cache nor optiml's
//! pre-tuned one (the repository's `.optiml/`, tuned at other shapes) may serve them, or the "before" column
//! would not be what a new user's first build gets.

fn main() {
    optiml_build::Builder::new()
        .user_cache(None::<std::path::PathBuf>)
        .pretuned_cache(None::<std::path::PathBuf>)
        .compile()
        .unwrap_or_else(|e| e.exit());
}
