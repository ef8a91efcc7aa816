//! GPU architectures as NVRTC and the driver name them.

use std::fmt;
use std::str::FromStr;

/// A compute capability, e.g. `sm_90`, or `sm_90a` for code that uses the architecture-specific instructions
/// (`wgmma`, `setmaxnreg`) and runs on that exact chip only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Arch {
    /// Major version (9 for Hopper).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// The `a` suffix: architecture-specific features, no forward compatibility.
    pub specific: bool,
}

impl Arch {
    /// `sm_{major}{minor}`.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self {
            major,
            minor,
            specific: false,
        }
    }

    /// `sm_{major}{minor}a`.
    pub const fn specific(major: u32, minor: u32) -> Self {
        Self {
            major,
            minor,
            specific: true,
        }
    }

    /// Whether a CUBIN built for `self` runs on a device of compute capability `device`: same major version,
    /// minor not above the device's, and the exact chip for `a` targets.
    pub fn cubin_runs_on(self, device: Arch) -> bool {
        self.major == device.major
            && self.minor <= device.minor
            && (!self.specific || self.minor == device.minor)
    }

    /// Whether PTX built for `self` can be JIT-compiled for `device`.
    pub fn ptx_runs_on(self, device: Arch) -> bool {
        if self.specific {
            self.major == device.major && self.minor == device.minor
        } else {
            (self.major, self.minor) <= (device.major, device.minor)
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sm_{}{}{}",
            self.major,
            self.minor,
            if self.specific { "a" } else { "" }
        )
    }
}

/// A string that is not an architecture name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a GPU architecture: write it like `sm_80`, `sm_90` or `sm_90a`")]
pub struct ArchParseError(pub String);

impl FromStr for Arch {
    type Err = ArchParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ArchParseError(s.to_string());
        let t = s.trim();
        let rest = t
            .strip_prefix("sm_")
            .or_else(|| t.strip_prefix("compute_"))
            .ok_or_else(bad)?;
        let (digits, specific) = match rest.strip_suffix('a') {
            Some(d) => (d, true),
            None => (rest, false),
        };
        if digits.len() < 2 || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        Ok(Arch {
            major: major.parse().map_err(|_| bad())?,
            minor: minor.parse().map_err(|_| bad())?,
            specific,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for s in ["sm_80", "sm_90", "sm_90a", "sm_100", "sm_120a"] {
            assert_eq!(s.parse::<Arch>().unwrap().to_string(), s);
        }
        assert_eq!("compute_86".parse::<Arch>().unwrap(), Arch::new(8, 6));
        for bad in ["", "sm90", "sm_9", "sm_x0", "gfx90a"] {
            assert!(bad.parse::<Arch>().is_err(), "{bad}");
        }
    }

    #[test]
    fn compatibility_rules() {
        let h100 = Arch::new(9, 0);
        assert!(Arch::new(9, 0).cubin_runs_on(h100));
        assert!(Arch::specific(9, 0).cubin_runs_on(h100));
        assert!(!Arch::new(8, 0).cubin_runs_on(h100));
        assert!(Arch::new(8, 0).cubin_runs_on(Arch::new(8, 9)));
        assert!(!Arch::specific(8, 6).cubin_runs_on(Arch::new(8, 9)));
        assert!(Arch::new(8, 0).ptx_runs_on(h100));
        assert!(!Arch::new(9, 0).ptx_runs_on(Arch::new(8, 9)));
        assert!(!Arch::specific(9, 0).ptx_runs_on(Arch::new(10, 0)));
    }
}
