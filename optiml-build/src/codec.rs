//! The one bincode configuration every stored or piped message uses: bincode's standard encoding with a bound on
//! what a decode may claim. Unbounded, a damaged or forged length prefix (a 13-byte `manifest.bin` announcing a
//! 2⁶²-byte vector) made the decoder ask for that much memory and abort the process; bounded, it is an error
//! that names the file, and a damaged entry is regenerated like any other.

use bincode::config::{Configuration, LittleEndian, Varint};
use bincode::error::{DecodeError, EncodeError};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The most bytes one decode may claim (allocate) in all: 256 MiB, the largest frame the worker protocol sends.
/// A manifest is a few KiB.
pub const LIMIT: usize = 256 << 20;

/// The configuration: bincode's standard one (little-endian varints), bounded by [`LIMIT`].
pub type Config = Configuration<LittleEndian, Varint, bincode::config::Limit<LIMIT>>;

/// [`Config`].
pub fn config() -> Config {
    bincode::config::standard().with_limit::<LIMIT>()
}

/// Encodes `value`.
///
/// # Errors
/// The value does not serialize.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, EncodeError> {
    bincode::serde::encode_to_vec(value, config())
}

/// Decodes a `T` from the start of `bytes`; returns it and the bytes it used.
///
/// # Errors
/// The bytes are not a `T`, or claim more than [`LIMIT`] bytes.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, usize), DecodeError> {
    bincode::serde::decode_from_slice(bytes, config())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vector whose length prefix announces 2⁶² elements: bincode's varint marker for a u64 (253), then the
    /// length in little-endian.
    fn huge_prefix() -> Vec<u8> {
        let mut b = vec![253u8];
        b.extend_from_slice(&(1u64 << 62).to_le_bytes());
        b.extend_from_slice(&[0, 0, 0, 0]);
        b
    }

    #[test]
    fn a_forged_length_is_an_error_not_an_allocation() {
        let bytes = huge_prefix();
        assert_eq!(bytes.len(), 13);
        // A string is read whole, so its length is claimed up front (unbounded: a 2^62-byte allocation that
        // aborted `cargo build`): the bound refuses it.
        let r = decode::<String>(&bytes);
        assert!(matches!(r, Err(DecodeError::LimitExceeded)), "{r:?}");
        // Sequences grow element by element and run out of bytes.
        assert!(decode::<Vec<u8>>(&bytes).is_err());
        assert!(decode::<Vec<String>>(&bytes).is_err());
    }

    #[test]
    fn values_round_trip() {
        let v = (7u32, "seven".to_string(), vec![1.5f64, -2.0]);
        let bytes = encode(&v).unwrap();
        assert_eq!(
            decode::<(u32, String, Vec<f64>)>(&bytes).unwrap(),
            (v, bytes.len())
        );
        // The same bytes as the unbounded standard configuration: entries written before the bound still read.
        assert_eq!(
            bytes,
            bincode::serde::encode_to_vec(
                &(7u32, "seven", vec![1.5f64, -2.0]),
                bincode::config::standard()
            )
            .unwrap()
        );
    }
}
