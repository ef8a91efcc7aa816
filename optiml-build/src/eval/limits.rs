//! Caps on the memory one job may take in the worker (issue 19 §2): a job whose buffers would not fit is refused
//! before anything is allocated, with a message that says what it needed and what was allowed, instead of a
//! driver error half-way through its checks or the kernel's OOM killer ending the build.
//!
//! GPU: [`DEVICE_PERCENT`] of what the driver reports free (`cuMemGetInfo`) when the job starts; the rest is left
//! to the launchers' workspaces and the support kernels' temporaries. Host: the host copies of inputs and
//! outputs and the float64 reference together stay under [`HOST_ENV`] MiB, by default half the machine's
//! memory and at most [`DEFAULT_HOST_CAP`]. An address-space limit (`RLIMIT_AS`) is not used: the CUDA driver
//! reserves far more virtual memory than it uses, and would fail under it.

/// The setting of the host cap, in MiB.
pub const HOST_ENV: &str = optiml_spec::env::OPTIML_WORKER_HOST_MB;

/// The share of the free GPU memory a job's buffers may take, in percent.
pub const DEVICE_PERCENT: u64 = 90;

/// The host cap when [`HOST_ENV`] is unset, on a machine with more than twice as much memory: 16 GiB.
pub const DEFAULT_HOST_CAP: u64 = 16 << 30;

/// What one job (or one of its sizes) will allocate, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Need {
    /// Device memory: the buffers it allocates now (none when it reuses kept ones).
    pub device: u64,
    /// Host memory: copies of inputs and outputs, and the reference.
    pub host: u64,
}

impl Need {
    /// Adds `bytes` of device memory (saturating: a size that overflows is refused, not wrapped).
    pub fn device(&mut self, bytes: u64) {
        self.device = self.device.saturating_add(bytes);
    }

    /// Adds `bytes` of host memory (saturating).
    pub fn host(&mut self, bytes: u64) {
        self.host = self.host.saturating_add(bytes);
    }
}

/// `count` elements of `size` bytes, saturating.
pub fn bytes(count: usize, size: usize) -> u64 {
    (count as u64).saturating_mul(size as u64)
}

/// The host cap and where it came from (for the refusal's message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCap {
    /// Bytes.
    pub bytes: u64,
    /// Where the figure came from.
    pub origin: String,
}

/// Why a job was refused before its buffers were allocated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The buffers would take more of the GPU's memory than a job may.
    #[error(
        "{what} needs {} of GPU memory; a job may take {} ({DEVICE_PERCENT}% of the {} the driver reports free)",
        mib(*.need),
        mib(*.cap),
        mib(*.free)
    )]
    Device {
        /// What was being set up.
        what: String,
        /// Bytes it needs.
        need: u64,
        /// Bytes free on the device.
        free: u64,
        /// Bytes a job may take.
        cap: u64,
    },
    /// The host copies and reference would take more memory than a job may.
    #[error("{what} needs {} of host memory for its copies and float64 reference; a job may take {} ({origin})", mib(*.need), mib(*.cap))]
    Host {
        /// What was being set up.
        what: String,
        /// Bytes it needs.
        need: u64,
        /// Bytes a job may take.
        cap: u64,
        /// Where the cap came from.
        origin: String,
    },
    /// [`HOST_ENV`] is not a positive whole number.
    #[error("{HOST_ENV} is `{value}`, not a positive whole number of MiB")]
    Setting {
        /// What it held.
        value: String,
    },
}

/// `bytes` in MiB, for messages.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// `MemTotal` of `/proc/meminfo`'s text, in bytes.
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    // The kernel writes kB (meaning KiB); a unit-less figure would be bytes.
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// The host cap from the setting of [`HOST_ENV`] if any, else from `/proc/meminfo`'s text: half of `MemTotal`,
/// at most [`DEFAULT_HOST_CAP`]; [`DEFAULT_HOST_CAP`] when neither is known.
///
/// # Errors
/// [`LimitError::Setting`] when the setting is not a positive whole number.
pub fn host_cap(setting: Option<&str>, meminfo: Option<&str>) -> Result<HostCap, LimitError> {
    if let Some(value) = setting {
        let mb = value
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|&mb| mb > 0)
            .ok_or_else(|| LimitError::Setting {
                value: value.chars().take(40).collect(),
            })?;
        return Ok(HostCap {
            bytes: mb.saturating_mul(1 << 20),
            origin: format!("{HOST_ENV}={mb}"),
        });
    }
    Ok(match meminfo.and_then(mem_total) {
        Some(total) if total / 2 < DEFAULT_HOST_CAP => HostCap {
            bytes: total / 2,
            origin: format!("half of the host's {}; {HOST_ENV} sets it", mib(total)),
        },
        _ => HostCap {
            bytes: DEFAULT_HOST_CAP,
            origin: format!("the default; {HOST_ENV} sets it"),
        },
    })
}

/// The host cap of this process: [`HOST_ENV`], else this machine's `/proc/meminfo`.
///
/// # Errors
/// [`LimitError::Setting`] when [`HOST_ENV`] is not a positive whole number.
pub fn host_cap_here() -> Result<HostCap, LimitError> {
    let setting = optiml_spec::env::var(HOST_ENV);
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    host_cap(setting.as_deref(), meminfo.as_deref())
}

/// The bytes a job may allocate on a device with `free` bytes free.
pub fn device_cap(free: u64) -> u64 {
    free / 100 * DEVICE_PERCENT + free % 100 * DEVICE_PERCENT / 100
}

/// Whether `need` fits: `free` is the device's free memory (`None` when it was not asked, as nothing is
/// allocated), `host` the host cap.
///
/// # Errors
/// [`LimitError::Device`] or [`LimitError::Host`], naming `what`.
pub fn admit(
    what: &str,
    need: Need,
    free: Option<u64>,
    host: &Result<HostCap, LimitError>,
) -> Result<(), LimitError> {
    if let Some(free) = free
        && need.device > device_cap(free)
    {
        return Err(LimitError::Device {
            what: what.to_string(),
            need: need.device,
            free,
            cap: device_cap(free),
        });
    }
    let host = host.as_ref().map_err(Clone::clone)?;
    if need.host > host.bytes {
        return Err(LimitError::Host {
            what: what.to_string(),
            need: need.host,
            cap: host.bytes,
            origin: host.origin.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:       131072000 kB\nMemFree:        100000000 kB\n";

    #[test]
    fn the_host_cap_is_the_setting_else_half_the_memory_at_most_16_gib() {
        assert_eq!(mem_total(MEMINFO), Some(131_072_000 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total("MemTotal: lots kB\n"), None);
        // 125 GiB: half is past 16 GiB.
        assert_eq!(host_cap(None, Some(MEMINFO)).unwrap().bytes, 16 << 30);
        // A small machine: half of 8 GiB.
        let small = host_cap(None, Some("MemTotal: 8388608 kB\n")).unwrap();
        assert_eq!(small.bytes, 4 << 30);
        assert!(small.origin.contains(HOST_ENV), "{}", small.origin);
        // Nothing known (not Linux): the default.
        assert_eq!(host_cap(None, None).unwrap().bytes, DEFAULT_HOST_CAP);
        assert_eq!(host_cap(None, Some("")).unwrap().bytes, DEFAULT_HOST_CAP);
        // The setting wins, either way.
        let set = host_cap(Some(" 2048 "), Some(MEMINFO)).unwrap();
        assert_eq!(set.bytes, 2 << 30);
        assert_eq!(set.origin, "OPTIML_WORKER_HOST_MB=2048");
        assert_eq!(
            host_cap(Some("40000000"), None).unwrap().bytes,
            40_000_000 << 20
        );
        for bad in ["0", "-1", "2GB", "1.5"] {
            assert_eq!(
                host_cap(Some(bad), Some(MEMINFO)),
                Err(LimitError::Setting { value: bad.into() })
            );
        }
    }

    #[test]
    fn a_job_may_take_90_percent_of_the_free_gpu_memory() {
        assert_eq!(device_cap(1000), 900);
        assert_eq!(device_cap(0), 0);
        assert_eq!(device_cap(80 << 30), (80u64 << 30) / 10 * 9);
        assert!(device_cap(u64::MAX) < u64::MAX);
        assert_eq!(device_cap(99), 89);
    }

    #[test]
    fn a_job_past_either_cap_is_refused_with_what_it_needed() {
        let host = host_cap(Some("1024"), None);
        let fits = Need {
            device: 900,
            host: 1 << 30,
        };
        assert_eq!(admit("x", fits, Some(1000), &host), Ok(()));
        // Kept buffers: the device is not asked.
        let kept = Need {
            device: 0,
            host: 10,
        };
        assert_eq!(admit("x", kept, None, &host), Ok(()));
        let big = Need {
            device: 901,
            ..fits
        };
        let e = admit("the m=4096 buffers", big, Some(1000), &host).unwrap_err();
        assert!(matches!(
            e,
            LimitError::Device {
                need: 901,
                cap: 900,
                free: 1000,
                ..
            }
        ));
        let text = e.to_string();
        assert!(
            text.starts_with("the m=4096 buffers needs 0.0 MiB of GPU memory; a job may take"),
            "{text}"
        );
        assert!(text.contains("90% of the"), "{text}");
        let hungry = Need {
            host: (1 << 30) + 1,
            ..fits
        };
        let text = admit("x", hungry, Some(1000), &host)
            .unwrap_err()
            .to_string();
        assert_eq!(
            text,
            "x needs 1024.0 MiB of host memory for its copies and float64 reference; a job may take 1024.0 MiB \
             (OPTIML_WORKER_HOST_MB=1024)"
        );
        // A size whose bytes overflow saturates, and is refused.
        let mut n = Need::default();
        n.device(bytes(usize::MAX, 8));
        n.device(1);
        assert_eq!(n.device, u64::MAX);
        assert!(admit("x", n, Some(u64::MAX), &host).is_err());
        // A bad setting refuses every job, saying why.
        let bad = host_cap(Some("lots"), None);
        assert_eq!(
            admit("x", kept, None, &bad).unwrap_err().to_string(),
            "OPTIML_WORKER_HOST_MB is `lots`, not a positive whole number of MiB"
        );
    }
}
