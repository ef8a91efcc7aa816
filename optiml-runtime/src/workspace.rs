//! Scratch device memory for launches that pass partial results between kernels (split-K, reduction trees).

use cudarc::driver::{CudaStream, result, sys};
use std::sync::Mutex;

/// Uninitialised device memory ordered on one stream: allocated from a memory pool on the stream ([`pool_of`])
/// and freed on it when dropped, so it outlives the launches queued before the drop and costs no synchronisation.
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
        // SAFETY: plain allocations in the context just bound to this thread, on a live stream of it (the pool
        // is this device's).
        let ptr = unsafe {
            match (pooled, pooled.then(|| pool_of(ctx.cu_device())).flatten()) {
                (true, Some(pool)) => {
                    let mut ptr = 0;
                    sys::cuMemAllocFromPoolAsync(&mut ptr, bytes, pool, stream.cu_stream())
                        .result()?;
                    ptr
                }
                (true, None) => result::malloc_async(stream.cu_stream(), bytes)?,
                (false, _) => result::malloc_sync(bytes)?,
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

/// The workspace pool of `device`, created on first use and kept, with the memory it holds, for the life of the
/// process; `None` where the driver cannot make one (the caller then uses the device's default pool).
///
/// Why not the default pool: it hands its memory back to the driver at every synchronisation, so the next call
/// maps fresh memory. On the H200 that was 110–150 µs of host time per reduction-tree call against 8–22 µs for
/// a single-launch program (the KernelBench harness's `optiml_host_us`, 2026-12-02). Workspaces hold a few
/// partials per block, so keeping them costs kilobytes.
fn pool_of(device: sys::CUdevice) -> Option<sys::CUmemoryPool> {
    // Handles as addresses: a raw pointer is not `Send`, and the pools are never destroyed.
    static POOLS: Mutex<Vec<(sys::CUdevice, usize)>> = Mutex::new(Vec::new());
    let mut pools = POOLS.lock().ok()?;
    if let Some(&(_, pool)) = pools.iter().find(|(d, _)| *d == device) {
        return Some(pool as sys::CUmemoryPool);
    }
    // SAFETY: zero is a valid value of every field of this plain C struct (null pointers, zero enums and sizes);
    // the fields that matter are set below.
    let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
    props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    props.location = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: device,
    };
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut keep = u64::MAX;
    // SAFETY: `props` describes device memory of an existing device; `keep` outlives the call that reads it.
    unsafe {
        sys::cuMemPoolCreate(&mut pool, &props).result().ok()?;
        let kept = sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut keep as *mut u64).cast(),
        );
        if kept.result().is_err() {
            let _ = sys::cuMemPoolDestroy(pool);
            return None;
        }
    }
    pools.push((device, pool as usize));
    Some(pool)
}
