//! Guard regions around the buffers a gate hands a candidate (issue 19 §2): a write one element past an
//! output's end (or before its start) lands in memory the same allocation owns, so the driver reports nothing,
//! the checked elements are all right, and the kernel would corrupt its caller's neighbouring data. Each buffer
//! is one allocation of `guard + elements + guard` bytes; the candidate gets a pointer to the elements, both
//! guards hold a pattern drawn per job (a kernel cannot learn it from an earlier job and write it back), and
//! after a checked launch a changed guard byte rejects the candidate, naming the buffer and the byte.
//!
//! Reading past the end cannot be caught this way (the guard is readable memory): only writes are.

use super::device::{Stop, fault, reject};
use super::plan::splitmix;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, ValidAsZeroBits};
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// The fewest bytes in a guard: a write one 16-byte vector (or a whole warp's float) past the end lands in it.
pub const MIN_GUARD_BYTES: usize = 256;

/// The most bytes in a guard: enough for a tile's row past the end, and cheap to copy back after every check.
pub const MAX_GUARD_BYTES: usize = 4096;

/// The bytes of each guard around a buffer of `bytes` bytes: the buffer's size, between [`MIN_GUARD_BYTES`]
/// and [`MAX_GUARD_BYTES`], rounded up to 256 so that the elements after the front guard keep the 256-byte
/// alignment of the allocation (vector loads and TMA need 16).
pub fn guard_bytes(bytes: usize) -> usize {
    bytes
        .clamp(MIN_GUARD_BYTES, MAX_GUARD_BYTES)
        .next_multiple_of(256)
}

/// The bytes one buffer of `bytes` bytes takes on the device with both guards.
pub fn guarded_bytes(bytes: u64) -> u64 {
    let guard = guard_bytes(usize::try_from(bytes).unwrap_or(usize::MAX)) as u64;
    bytes.saturating_add(2 * guard)
}

/// `len` bytes drawn from `seed`: what a guard holds.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len.next_multiple_of(8));
    let mut state = seed;
    while out.len() < len {
        state = splitmix(state ^ 0x6a09_e667_f3bc_c909);
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Where a guard changed, if it did: `front` is the guard before buffer `name` (its last byte touches the first
/// element), `back` the one after it (its first byte follows the last element); each pairs the expected bytes
/// with those read back. The message gives the changed byte nearest the buffer on each side, so the first byte
/// past the end is "byte 0 past the end".
pub fn damage(name: &str, front: (&[u8], &[u8]), back: (&[u8], &[u8])) -> Option<String> {
    let differ = |(x, y): (&u8, &u8)| x != y;
    let changed = |(want, got): (&[u8], &[u8])| want.iter().zip(got).filter(|&p| differ(p)).count();
    let after = back.0.iter().zip(back.1).position(differ);
    let before = front
        .0
        .iter()
        .zip(front.1)
        .rposition(differ)
        .map(|i| front.0.len() - i);
    let mut parts = Vec::new();
    if let Some(at) = after {
        parts.push(format!(
            "past the end of {name} (byte {at} past its end changed; {} of the {} guard bytes after it differ)",
            changed(back),
            back.0.len()
        ));
    }
    if let Some(at) = before {
        parts.push(format!(
            "before the start of {name} (byte {at} before its start changed; {} of the {} guard bytes before it \
             differ)",
            changed(front),
            front.0.len()
        ));
    }
    (!parts.is_empty()).then(|| format!("the kernel wrote {}", parts.join(" and ")))
}

/// How the kernel changed input `name` (elements of `elem_bytes` bytes), if it did: the first byte whose value
/// differs, its element, and how many bytes do.
pub fn written_bytes(name: &str, elem_bytes: usize, before: &[u8], after: &[u8]) -> Option<String> {
    let differ = |(x, y): (&u8, &u8)| x != y;
    let first = before.iter().zip(after).position(differ);
    let first = match first {
        Some(i) => i,
        // A copy of another length is a change too (it cannot happen with the same buffer).
        None if before.len() != after.len() => before.len().min(after.len()),
        None => return None,
    };
    let count = before.iter().zip(after).filter(|&p| differ(p)).count();
    Some(format!(
        "the kernel wrote into its input {name}: {count} byte(s) changed, the first at byte {first} (element {})",
        first / elem_bytes.max(1)
    ))
}

/// A device buffer of `T` with a guard region before and after it (see the module docs). It dereferences to the
/// elements' [`CudaSlice`], which every launch and toolkit call takes as before; its length is the elements'.
pub struct Guarded<T: DeviceRepr> {
    /// The elements: a slice aliasing `whole` past the front guard. It owns nothing: [`Drop`] leaks it before
    /// `whole` frees the allocation.
    inner: ManuallyDrop<CudaSlice<T>>,
    /// The allocation: front guard, elements, back guard.
    whole: CudaSlice<u8>,
    /// Bytes of each guard.
    guard: usize,
    /// What the front then the back guard hold since [`Guarded::arm`].
    expected: Vec<u8>,
}

impl<T: DeviceRepr + ValidAsZeroBits> Guarded<T> {
    /// `len` zeroed elements between two guards holding the pattern of `seed`.
    ///
    /// # Errors
    /// [`Stop::Reject`] when `len` elements overflow the address space; [`Stop::Fault`] when the driver fails.
    pub fn alloc(stream: &Arc<CudaStream>, len: usize, seed: u64) -> Result<Self, Stop> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            reject(
                "memory",
                format!(
                    "{len} elements of {} bytes overflow the address space",
                    size_of::<T>()
                ),
            )
        })?;
        let guard = guard_bytes(bytes);
        let whole = stream
            .alloc_zeros::<u8>(bytes + 2 * guard)
            .map_err(fault("allocating"))?;
        let base = {
            let (ptr, _record) = whole.device_ptr(stream);
            ptr
        };
        // SAFETY: `base + guard` is inside the allocation `whole` owns, which holds `bytes = len ×
        // size_of::<T>()` zeroed bytes there (zero is a valid `T`). The slice never frees it: it is leaked in
        // `Drop` before `whole` is freed, and `whole` outlives it as a field of the same value.
        let inner = unsafe { stream.upgrade_device_ptr::<T>(base + guard as u64, len) };
        let mut g = Guarded {
            inner: ManuallyDrop::new(inner),
            whole,
            guard,
            expected: Vec::new(),
        };
        g.arm(seed)?;
        Ok(g)
    }
}

impl<T: DeviceRepr> Guarded<T> {
    /// The elements' bytes.
    fn bytes(&self) -> usize {
        self.inner.len() * std::mem::size_of::<T>()
    }

    /// Writes the pattern of `seed` into both guards (a kept buffer gets each job's own).
    ///
    /// # Errors
    /// [`Stop::Fault`] when the copy fails.
    pub fn arm(&mut self, seed: u64) -> Result<(), Stop> {
        let (guard, bytes) = (self.guard, self.bytes());
        let expected = pattern(seed, 2 * guard);
        let stream = self.whole.stream().clone();
        stream
            .memcpy_htod(&expected[..guard], &mut self.whole.slice_mut(..guard))
            .map_err(fault("writing guard regions"))?;
        stream
            .memcpy_htod(
                &expected[guard..],
                &mut self.whole.slice_mut(guard + bytes..),
            )
            .map_err(fault("writing guard regions"))?;
        self.expected = expected;
        Ok(())
    }

    /// Rejects the candidate of check `check` when it wrote into a guard of this buffer, `name`.
    ///
    /// # Errors
    /// [`Stop::Reject`] naming the buffer and the changed byte; [`Stop::Fault`] when the copy back fails.
    pub fn check(&self, check: &str, name: &str) -> Result<(), Stop> {
        let (guard, bytes) = (self.guard, self.bytes());
        let stream = self.whole.stream();
        let read = |from: usize| {
            stream
                .clone_dtoh(&self.whole.slice(from..from + guard))
                .map_err(fault("reading guard regions"))
        };
        let (front, back) = (read(0)?, read(guard + bytes)?);
        let (want_front, want_back) = self.expected.split_at(guard);
        match damage(name, (want_front, &front), (want_back, &back)) {
            Some(reason) => Err(reject(check, reason)),
            None => Ok(()),
        }
    }

    /// The bytes of one element.
    pub fn elem_bytes(&self) -> usize {
        std::mem::size_of::<T>()
    }

    /// A host copy of the elements' bytes (to see whether a kernel wrote into an input).
    ///
    /// # Errors
    /// [`Stop::Fault`] when the copy fails.
    pub fn host_bytes(&self) -> Result<Vec<u8>, Stop> {
        let (guard, bytes) = (self.guard, self.bytes());
        self.whole
            .stream()
            .clone_dtoh(&self.whole.slice(guard..guard + bytes))
            .map_err(fault("copying inputs"))
    }
}

impl<T: DeviceRepr> Deref for Guarded<T> {
    type Target = CudaSlice<T>;

    fn deref(&self) -> &CudaSlice<T> {
        &self.inner
    }
}

/// Launches and the toolkit write through it. Replacing the slice behind the reference (`mem::swap`) would leak
/// the replacement and free an address inside another allocation: the gates only pass it on.
impl<T: DeviceRepr> DerefMut for Guarded<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.inner
    }
}

impl<T: DeviceRepr> Drop for Guarded<T> {
    fn drop(&mut self) {
        // SAFETY: `inner` is taken once, here, and not used after; its memory is `whole`'s, freed with it when
        // the fields drop after this.
        let inner = unsafe { ManuallyDrop::take(&mut self.inner) };
        let _ = inner.leak();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_are_at_least_256_bytes_at_most_4_kib_and_keep_the_elements_aligned() {
        assert_eq!(guard_bytes(0), 256);
        assert_eq!(guard_bytes(4), 256);
        assert_eq!(guard_bytes(300), 512);
        assert_eq!(guard_bytes(1 << 30), 4096);
        for bytes in [0, 1, 255, 257, 1000, 4095, 4097, usize::MAX] {
            let g = guard_bytes(bytes);
            assert!(
                (256..=4096).contains(&g) && g.is_multiple_of(256),
                "{bytes}: {g}"
            );
        }
        assert_eq!(guarded_bytes(4), 4 + 512);
        assert_eq!(guarded_bytes(1 << 20), (1 << 20) + 8192);
        assert_eq!(guarded_bytes(u64::MAX), u64::MAX);
    }

    #[test]
    fn patterns_are_fixed_by_their_seed_and_differ_between_seeds() {
        let a = pattern(7, 4096);
        assert_eq!(a.len(), 4096);
        assert_eq!(a, pattern(7, 4096));
        assert_eq!(&pattern(7, 13)[..], &a[..13]);
        let b = pattern(8, 4096);
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        // About 1 in 256 bytes agree by chance.
        assert!(same < 64, "{same} bytes agree");
        // Not a constant: a kernel writing zeros, NaN or a repeated word past the end is seen.
        assert!(a.windows(4).any(|w| w[0] != w[1]));
        assert!(a.chunks(4).all(|w| w != [0; 4]));
    }

    #[test]
    fn a_changed_guard_names_the_buffer_and_the_byte_nearest_it() {
        let front = pattern(1, 256);
        let back = pattern(2, 256);
        assert_eq!(damage("C", (&front, &front), (&back, &back)), None);
        // One f32 written just past the end: bytes 0..4 after it.
        let mut past = back.clone();
        for b in &mut past[..4] {
            *b ^= 0xff;
        }
        let why = damage("C", (&front, &front), (&back, &past)).unwrap();
        assert_eq!(
            why,
            "the kernel wrote past the end of C (byte 0 past its end changed; 4 of the 256 guard bytes after it \
             differ)"
        );
        // Farther on: the first changed byte is named.
        let mut far = back.clone();
        far[100] ^= 1;
        far[200] ^= 1;
        assert!(
            damage("A", (&front, &front), (&back, &far))
                .unwrap()
                .contains("byte 100 past its end changed; 2 of the 256")
        );
        // One element before the start: the front guard's last bytes, 1 to 4 bytes before the first element.
        let mut before = front.clone();
        for b in &mut before[252..] {
            *b ^= 0x80;
        }
        let why = damage("bias", (&front, &before), (&back, &back)).unwrap();
        assert!(
            why.starts_with(
                "the kernel wrote before the start of bias (byte 1 before its start changed; 4 of the 256"
            ),
            "{why}"
        );
        let both = damage("y", (&front, &before), (&back, &past)).unwrap();
        assert!(both.contains("past the end of y") && both.contains(" and before the start of y"));
    }

    #[test]
    fn a_changed_input_is_named_with_its_first_changed_byte_and_element() {
        let before = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(written_bytes("x", 4, &before, &before), None);
        let mut after = before;
        after[5] = 0;
        after[7] = 0;
        assert_eq!(
            written_bytes("x", 4, &before, &after).unwrap(),
            "the kernel wrote into its input x: 2 byte(s) changed, the first at byte 5 (element 1)"
        );
        assert!(written_bytes("x", 2, &before, &before[..6]).is_some());
    }
}
