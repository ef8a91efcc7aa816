//! Scratch device memory for launches that pass partial results between kernels (split-K, reduction trees).

use cudarc::driver::{CudaStream, result, sys};

/// Uninitialised device memory ordered on one stream: allocated from the context's memory pool on the stream and
/// freed on it when dropped, so it outlives the launches queued before the drop and costs no synchronisation.
/// (Raw rather than a `CudaSlice` because a stream-ordered `CudaSlice` needs the stream's `Arc`, which the
/// generated wrappers do not ask the caller for.)
pub(crate) struct Workspace<'s> {
    /// The device address.
    pub(crate) ptr: sys::CUdeviceptr,
    stream: &'s CudaStream,
    pooled: bool,
}

impl<'s> Workspace<'s> {
    /// `bytes` of uninitialised memory, on `stream`.
    pub(crate) fn new(
        stream: &'s CudaStream,
        bytes: usize,
    ) -> Result<Self, cudarc::driver::DriverError> {
        let ctx = stream.context();
        ctx.bind_to_thread()?;
        let pooled = ctx.has_async_alloc();
        // SAFETY: plain allocations in the context just bound to this thread, on a live stream of it.
        let ptr = unsafe {
            if pooled {
                result::malloc_async(stream.cu_stream(), bytes)?
            } else {
                result::malloc_sync(bytes)?
            }
        };
        Ok(Self {
            ptr,
            stream,
            pooled,
        })
    }
}

impl Drop for Workspace<'_> {
    fn drop(&mut self) {
        // A failure here leaves a leak, never a dangling use: nothing else holds the pointer. Without a pool,
        // the launches that use the memory must finish before a plain free.
        // SAFETY: `ptr` came from the matching allocation above and is freed once.
        unsafe {
            if self.pooled {
                let _ = result::free_async(self.ptr, self.stream.cu_stream());
            } else if self.stream.synchronize().is_ok() {
                let _ = result::free_sync(self.ptr);
            }
        }
    }
}
