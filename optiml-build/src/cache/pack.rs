//! An entry's packs: its files in a few gzip-compressed tar archives, byte-for-byte reproducible, opened with
//! bounds.
//!
//! PTX and CUBIN compress to about a fifth, so a committed cache costs a repository a fifth of what the plain
//! files did. A tar archive, not a format of our own, so a reviewer can open one with `tar xzf`. Every header field
//! that could differ between machines (times, owners, modes) is fixed, and gzip's own header carries no time, so
//! the same files give the same bytes on every machine, and git stores an unchanged entry once.

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::io::{Read, Write};

/// The most a pack may hold once unpacked, whatever its manifest says: a forged length cannot make a reader
/// allocate more than this.
pub const MAX_UNPACKED: u64 = 1 << 30;

/// Named files with their bytes: a pack's members, or an entry's packs.
pub type Named = Vec<(String, Vec<u8>)>;

/// What a tar archive spends around a member: its 512-byte header, and its data padded to 512 bytes.
fn tar_size(len: u64) -> u64 {
    512 + len.div_ceil(512) * 512
}

/// The pack of `members` (name, bytes), in the order given.
///
/// # Errors
/// An I/O error from the encoder (writing into memory, so only a name tar cannot hold, which no entry has).
pub fn write(members: &[(&str, &[u8])]) -> std::io::Result<Vec<u8>> {
    let gz = GzEncoder::new(Vec::new(), Compression::best());
    let mut tar = tar::Builder::new(gz);
    for (name, bytes) in members {
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, name, *bytes)?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    gz.finish()
}

/// The members of a pack, in its order, when it unpacks to regular files with plain names, each at most the
/// length `expected` gives its name (`None`: not expected, an error), and in all at most [`MAX_UNPACKED`] bytes.
///
/// # Errors
/// What is wrong, in words: not gzip, not tar, truncated, an unexpected, duplicated or oversized member.
pub fn read(
    bytes: &[u8],
    expected: impl Fn(&str) -> Option<u64>,
    expected_total: u64,
) -> Result<Named, String> {
    // The archive can be no longer than its expected members and the two zero blocks that end it; reading
    // stops there, so a gzip bomb costs no more memory than an honest pack.
    let limit = expected_total.min(MAX_UNPACKED) + 1024;
    let mut archive = tar::Archive::new(GzDecoder::new(bytes).take(limit));
    let mut out: Named = Vec::new();
    let entries = archive
        .entries()
        .map_err(|e| format!("not a gzip-compressed tar archive ({e})"))?;
    for member in entries {
        let mut member = member.map_err(|e| format!("does not unpack ({e})"))?;
        if member.header().entry_type() != tar::EntryType::Regular {
            return Err("holds something other than a plain file".into());
        }
        let name = member
            .path()
            .ok()
            .and_then(|p| p.to_str().map(str::to_string))
            .ok_or("holds a member whose name is not UTF-8")?;
        let Some(most) = expected(&name) else {
            return Err(format!(
                "holds `{name}`, which the manifest does not place there"
            ));
        };
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("holds `{name}` twice"));
        }
        let size = member.size();
        if size > most {
            return Err(format!(
                "holds `{name}` of {size} bytes, the manifest says {most}"
            ));
        }
        // The header's size is checked against the bound only by reading: reserve no more than the bound.
        let mut data = Vec::with_capacity(size.min(limit) as usize);
        member
            .read_to_end(&mut data)
            .map_err(|e| format!("does not unpack `{name}` ({e})"))?;
        if data.len() as u64 != size {
            return Err(format!("is truncated in `{name}`"));
        }
        out.push((name, data));
    }
    Ok(out)
}

/// What [`read`] may have to unpack for members of these lengths: the bound to give it.
pub fn unpacked_bound(lens: impl IntoIterator<Item = u64>) -> u64 {
    lens.into_iter()
        .map(tar_size)
        .fold(0u64, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members() -> Vec<(&'static str, Vec<u8>)> {
        vec![
            ("v0.cu", b"__global__ void k() {}\n".repeat(40)),
            ("v0.cubin", (0..3000u32).map(|i| (i % 251) as u8).collect()),
            ("search-v0.jsonl", Vec::new()),
        ]
    }

    fn packed() -> Vec<u8> {
        let m = members();
        let refs: Vec<(&str, &[u8])> = m.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        write(&refs).unwrap()
    }

    fn expected(name: &str) -> Option<u64> {
        members()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b.len() as u64)
    }

    fn bound() -> u64 {
        unpacked_bound(members().iter().map(|(_, b)| b.len() as u64))
    }

    #[test]
    fn packs_round_trip_and_are_reproducible() {
        let bytes = packed();
        assert_eq!(bytes, packed(), "the same members gave other bytes");
        let back = read(&bytes, expected, bound()).unwrap();
        let want: Vec<(String, Vec<u8>)> = members()
            .into_iter()
            .map(|(n, b)| (n.to_string(), b))
            .collect();
        assert_eq!(back, want);
        // Text and machine code compress: the point of packing.
        let plain: usize = members().iter().map(|(_, b)| b.len()).sum();
        assert!(bytes.len() * 2 < plain, "{} of {plain}", bytes.len());
    }

    #[test]
    fn damaged_or_unexpected_packs_are_errors_not_allocations() {
        let bytes = packed();
        // Truncated, and a flipped byte in the compressed stream.
        assert!(read(&bytes[..bytes.len() / 2], expected, bound()).is_err());
        let mut flipped = bytes.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x55;
        let flipped_read = read(&flipped, expected, bound());
        assert!(
            flipped_read.is_err()
                || flipped_read.is_ok_and(|m| m != read(&bytes, expected, bound()).unwrap()),
            "a flipped byte went unnoticed"
        );
        // Not gzip at all.
        assert!(read(b"not a pack", expected, bound()).is_err());
        // A member the manifest does not place here, or longer than it says.
        assert!(
            read(&bytes, |n| (n != "v0.cubin").then_some(10_000), bound())
                .unwrap_err()
                .contains("v0.cubin")
        );
        assert!(
            read(&bytes, |_| Some(10), bound())
                .unwrap_err()
                .contains("the manifest says 10")
        );
        // A pack that unpacks to far more than expected (a gzip bomb) stops at the bound.
        let zeros = vec![0u8; 8 << 20];
        let bomb = write(&[("v0.cubin", &zeros)]).unwrap();
        assert!(bomb.len() < 64 << 10);
        assert!(read(&bomb, |_| Some(u64::MAX), 4096).is_err());
    }
}
