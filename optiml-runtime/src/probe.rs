//! Finding the CUDA driver and its devices without panicking.
//!
//! cudarc loads `libcuda` lazily and panics when it is missing; every entry point here checks for the library
//! first and returns [`Error::NoDriver`] instead, so a program can say "no CUDA device found" and carry on.

use crate::{Arch, Error};
use cudarc::driver::{CudaContext, result, sys};
use std::sync::{Arc, OnceLock};

/// Whether the CUDA driver library can be loaded. Checked once per process.
pub fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to dlopen the library names cudarc knows and drops the handles.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// A CUDA device as the driver reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Its ordinal.
    pub ordinal: usize,
    /// Its marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Its compute capability.
    pub arch: Arch,
}

/// Every device the driver reports; empty when there is no driver.
///
/// # Errors
/// [`Error::Driver`] when the driver is present but fails to initialise or answer.
pub fn devices() -> Result<Vec<Device>, Error> {
    if !driver_present() {
        return Ok(Vec::new());
    }
    let op = Error::driver("-", "initialise the driver");
    result::init().map_err(op)?;
    let count = result::device::get_count().map_err(Error::driver("-", "count devices"))?;
    (0..count)
        .map(|i| {
            let dev = result::device::get(i).map_err(Error::driver("-", "open a device"))?;
            let name =
                result::device::get_name(dev).map_err(Error::driver("-", "read a device name"))?;
            let attr = |a| {
                // SAFETY: `dev` is a device handle the driver just returned.
                unsafe { result::device::get_attribute(dev, a) }
                    .map_err(Error::driver("-", "read the compute capability"))
            };
            let major =
                attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
            let minor =
                attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
            Ok(Device {
                ordinal: i as usize,
                name,
                arch: Arch::new(major as u32, minor as u32),
            })
        })
        .collect()
}

/// The primary context of device `ordinal`.
///
/// # Errors
/// [`Error::NoDriver`] without a driver, [`Error::NoDevice`] when there is no such device, [`Error::Driver`] when
/// the driver fails.
pub fn context(ordinal: usize) -> Result<Arc<CudaContext>, Error> {
    if !driver_present() {
        return Err(Error::NoDriver);
    }
    result::init().map_err(Error::driver("-", "initialise the driver"))?;
    let count = result::device::get_count().map_err(Error::driver("-", "count devices"))? as usize;
    if ordinal >= count {
        return Err(Error::NoDevice { ordinal, count });
    }
    CudaContext::new(ordinal).map_err(Error::driver("-", "create a context"))
}

/// The compute capability of the device behind `ctx`.
///
/// # Errors
/// [`Error::Driver`] when the driver cannot answer.
pub fn arch_of(ctx: &CudaContext) -> Result<Arch, Error> {
    let (major, minor) = ctx
        .compute_capability()
        .map_err(Error::driver("-", "read the compute capability"))?;
    Ok(Arch::new(major as u32, minor as u32))
}
