//! `cargo optiml`: see `optiml_build::cli`.

use clap::Parser;

fn main() {
    // `cargo optiml tune` starts its evaluation workers as this same executable.
    optiml_build::serve_worker_if_requested();
    match optiml_build::cli::run(optiml_build::cli::CargoCli::parse()) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
