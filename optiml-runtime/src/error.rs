//! The runtime's one error type.

use cudarc::driver::DriverError;

/// Why a kernel could not be launched. Every CUDA failure, a missing driver included, ends up here; nothing in
/// this crate panics on bad input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `libcuda` could not be loaded: no NVIDIA driver on this machine.
    #[error(
        "no CUDA driver found (libcuda.so could not be loaded): this machine has no NVIDIA driver or GPU"
    )]
    NoDriver,
    /// The driver loaded but reports no device.
    #[error(
        "no CUDA device found: the driver reports {count} devices, and device {ordinal} was asked for"
    )]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many the driver reports.
        count: usize,
    },
    /// A CUDA driver call failed.
    #[error("CUDA failed to {op} for kernel `{kernel}`")]
    Driver {
        /// The kernel concerned (`-` for device probing).
        kernel: &'static str,
        /// What was being done.
        op: &'static str,
        /// The driver's status.
        #[source]
        source: DriverError,
    },
    /// A launch's arguments are not, in number and size, the parameters of the loaded function: its cache
    /// entry's launch record does not match its machine code. Nothing was launched.
    #[error(
        "kernel `{kernel}`: the launch passes parameters of {passed:?} bytes, but its loaded code declares {declared:?}: \
         the cache entry's launch record does not match its CUBIN or PTX; `cargo optiml prepare --check --rebuild` \
         finds such an entry and `cargo optiml prepare` replaces it"
    )]
    Parameters {
        /// The kernel.
        kernel: &'static str,
        /// Each parameter's size, as the loaded function declares them.
        declared: Vec<usize>,
        /// Each argument's size, as the launch passes them.
        passed: Vec<usize>,
    },
    /// The kernel was not built for this GPU.
    #[error(
        "kernel `{kernel}` has no variant that runs on {device} (built for {available}); rebuild with \
         OPTIML_ARCH={device} (or add it to the committed cache with `cargo optiml prepare --arch {device}`)"
    )]
    NoVariant {
        /// The kernel.
        kernel: &'static str,
        /// The device's architecture, e.g. `sm_75`.
        device: String,
        /// The architectures the kernel was built for.
        available: String,
    },
    /// A buffer is shorter than the dimensions need.
    #[error("kernel `{kernel}`: `{arg}` holds {got} elements but the dimensions need {expected}")]
    Shape {
        /// The kernel.
        kernel: &'static str,
        /// The buffer argument.
        arg: &'static str,
        /// Elements needed.
        expected: usize,
        /// Elements present.
        got: usize,
    },
    /// Buffers that must have one length differ.
    #[error(
        "kernel `{kernel}`: `{arg}` holds {got} elements but `{other}` holds {expected}; pass `n` to use a prefix"
    )]
    LengthMismatch {
        /// The kernel.
        kernel: &'static str,
        /// The buffer argument.
        arg: &'static str,
        /// Its length.
        got: usize,
        /// The buffer it was compared with.
        other: &'static str,
        /// That buffer's length.
        expected: usize,
    },
    /// A dimension is out of the range the kernel supports.
    #[error("kernel `{kernel}`: dimension `{arg}` = {value} {reason}")]
    Dimension {
        /// The kernel.
        kernel: &'static str,
        /// The dimension argument.
        arg: &'static str,
        /// Its value as given.
        value: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// Buffers of another element type than the kernel was compiled for (only a hand-written call through
    /// [`launch_target`](crate::matmul::launch_target) can do this: the generated functions take the spec's type).
    #[error("kernel `{kernel}` was compiled for {compiled} elements, not {given}")]
    ElementType {
        /// The kernel (the user's function name).
        kernel: &'static str,
        /// The element type of the buffers given.
        given: &'static str,
        /// The element type the kernel was compiled for.
        compiled: &'static str,
    },
    /// A tensor program's buffer does not hold exactly the elements its dimensions make.
    #[error(
        "kernel `{kernel}`: `{arg}` holds {got} elements but its dimensions {axes} make {expected}"
    )]
    BufferLength {
        /// The kernel.
        kernel: &'static str,
        /// The buffer argument.
        arg: &'static str,
        /// Its length.
        got: usize,
        /// The product of its dimensions.
        expected: usize,
        /// Its dimensions as known, e.g. `[r=4, c=?]`.
        axes: String,
    },
    /// A tensor program's dimension was not given and the buffer lengths do not determine it.
    #[error("kernel `{kernel}`: dimension `{dim}` {reason}")]
    Undetermined {
        /// The kernel.
        kernel: &'static str,
        /// The dimension.
        dim: &'static str,
        /// Why it is not known.
        reason: String,
    },
    /// An environment variable the runtime reads holds a value it does not know.
    #[error("{var}={value:?} is not a setting the optiml runtime knows: expected {expected}")]
    Setting {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it may hold.
        expected: &'static str,
    },
    /// A launch on a stream being captured into a CUDA graph while cudarc orders the context's streams with
    /// events: each buffer argument would wait on an event recorded before the capture, which the driver refuses
    /// (it invalidates the whole capture). Nothing was launched.
    #[error(
        "kernel `{kernel}`: the stream is being captured into a CUDA graph while cudarc tracks buffer events \
         across this context's streams, and waiting on an event recorded before the capture would invalidate it; \
         call `CudaContext::disable_event_tracking` before capturing (and order the streams yourself), as cudarc \
         requires for graph capture"
    )]
    TrackedCapture {
        /// The kernel.
        kernel: &'static str,
    },
    /// A buffer lives in another CUDA context than the stream.
    #[error("kernel `{kernel}`: `{arg}` was allocated in another CUDA context than the stream's")]
    ContextMismatch {
        /// The kernel.
        kernel: &'static str,
        /// The buffer argument.
        arg: &'static str,
    },
}

impl Error {
    pub(crate) fn driver(
        kernel: &'static str,
        op: &'static str,
    ) -> impl FnOnce(DriverError) -> Error {
        move |source| Error::Driver { kernel, op, source }
    }
}
