//! The GPU a run measures on, or a plain sentence saying there is none.

use optiml::cudarc::driver::{CudaContext, CudaStream};
use std::error::Error;
use std::sync::Arc;

/// The examples' error type.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// Device 0's context, or `None` after printing why there is none (no driver, no device).
pub fn gpu_or_explain(what: &str) -> Option<Arc<CudaContext>> {
    match optiml::runtime::probe::context(0) {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            println!("no CUDA device found ({e}).");
            println!(
                "{what}: built from the kernel cache; run this example on a machine with an NVIDIA GPU to launch it."
            );
            None
        }
    }
}

/// The device's name and compute capability, e.g. `NVIDIA H200 (sm_90)`.
pub fn describe(ctx: &CudaContext) -> String {
    let arch = optiml::runtime::probe::arch_of(ctx)
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    format!(
        "{} ({arch})",
        ctx.name().unwrap_or_else(|_| "unknown GPU".into())
    )
}

/// What every report names beside its numbers: the GPU and the day they were measured on, with the stream they
/// were measured on.
pub struct Device {
    /// Device 0.
    pub ctx: Arc<CudaContext>,
    /// Its default stream: every kernel and baseline of a run goes there, so events time them in order.
    pub stream: Arc<CudaStream>,
    /// [`describe`]'s line.
    pub gpu: String,
    /// [`today`](crate::today).
    pub date: String,
}

impl Device {
    /// Device 0, or `None` after [`gpu_or_explain`] has said why there is none.
    pub fn open_or_explain(what: &str) -> Option<Device> {
        let ctx = gpu_or_explain(what)?;
        Some(Device {
            stream: ctx.default_stream(),
            gpu: describe(&ctx),
            date: crate::today(),
            ctx,
        })
    }
}

/// The value following `flag` on the command line, if any.
pub fn arg_value(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
}
