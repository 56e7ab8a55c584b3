//! The configuration digest: what "the node runs this artifact" is compared by.
//!
//! [`config_digest`] is SHA-256 over the configuration bytes with their trailing line
//! breaks normalised: every line break at the very end — `\n` or `\r\n`, in any number
//! and mix — is removed and exactly one `\n` appended. Nothing else is touched: line
//! breaks and whitespace inside the document, a leading byte-order mark, a lone `\r`
//! at the end, all count. The same function digests an artifact's plaintext before it
//! is sent and the configuration read back from the node, so a configuration applied
//! and read back digests equal even when the node's encoder adds or drops the final
//! newline.
//!
//! `\r\n` is treated as one line break because a document written with CRLF endings
//! and the same document read back with its final CRLF turned into LF (or dropped)
//! are the same configuration; a `\r` not followed by `\n` is content.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

/// A SHA-256 configuration digest. Displayed, parsed and serialised as 64 lowercase
/// hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest with these bytes.
    #[must_use]
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Digest(bytes)
    }

    /// The digest's bytes.
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The digest as 64 lowercase hex digits.
    #[must_use]
    pub fn to_hex(&self) -> String {
        let mut out = String::with_capacity(64);
        for byte in self.0 {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        out
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Computes the configuration digest of `bytes` (see the module documentation).
#[must_use]
pub fn config_digest(bytes: &[u8]) -> Digest {
    let mut hasher = Sha256::new();
    hasher.update(content(bytes));
    hasher.update(b"\n");
    Digest(hasher.finalize().into())
}

/// `bytes` without its trailing line breaks (`\n` or `\r\n`).
fn content(bytes: &[u8]) -> &[u8] {
    let mut end = bytes.len();
    while end > 0 && bytes[end - 1] == b'\n' {
        end -= 1;
        if end > 0 && bytes[end - 1] == b'\r' {
            end -= 1;
        }
    }
    &bytes[..end]
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.to_hex())
    }
}

/// A string that is not 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a configuration digest is 64 hex digits")]
pub struct DigestParseError;

impl FromStr for Digest {
    type Err = DigestParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.as_bytes();
        if text.len() != 64 {
            return Err(DigestParseError);
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
            *byte = (hex_value(pair[0])? << 4) | hex_value(pair[1])?;
        }
        Ok(Digest(bytes))
    }
}

fn hex_value(digit: u8) -> Result<u8, DigestParseError> {
    match digit {
        b'0'..=b'9' => Ok(digit - b'0'),
        b'a'..=b'f' => Ok(digit - b'a' + 10),
        b'A'..=b'F' => Ok(digit - b'A' + 10),
        _ => Err(DigestParseError),
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::attempt::ConfigArtifact;

    /// Any number and mix of trailing line breaks.
    fn line_breaks() -> impl Strategy<Value = String> {
        prop::collection::vec(prop_oneof![Just("\n"), Just("\r\n")], 0..5)
            .prop_map(|breaks| breaks.concat())
    }

    /// A document that does not itself end in a line break or a `\r`.
    fn document() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>(), 0..200).prop_map(|mut bytes| {
            while matches!(bytes.last(), Some(b'\n' | b'\r')) {
                bytes.pop();
            }
            bytes
        })
    }

    #[test]
    fn known_values() {
        // SHA-256 of "\n".
        let newline = "01ba4719c80b6fe911b091a7c05124b64eeece964e09c058ef8f9805daca546b";
        assert_eq!(config_digest(b"").to_hex(), newline);
        assert_eq!(config_digest(b"\n\n").to_hex(), newline);
        assert_eq!(config_digest(b"\r\n").to_hex(), newline);
        // A lone carriage return at the end is content.
        assert_ne!(config_digest(b"a\r"), config_digest(b"a"));
        assert_eq!(config_digest(b"a\r\r\n"), config_digest(b"a\r"));
    }

    #[test]
    fn hex_round_trip_and_serde() {
        let digest = config_digest(b"version: v1alpha1\n");
        let hex = digest.to_hex();
        assert_eq!(hex.len(), 64);
        assert_eq!(hex.parse::<Digest>(), Ok(digest));
        assert_eq!(hex.to_uppercase().parse::<Digest>(), Ok(digest));
        assert_eq!("abc".parse::<Digest>(), Err(DigestParseError));
        assert_eq!("g".repeat(64).parse::<Digest>(), Err(DigestParseError));
        let json = serde_json::to_string(&digest).expect("serialise");
        assert_eq!(json, format!("\"{hex}\""));
        assert_eq!(
            serde_json::from_str::<Digest>(&json).expect("deserialise"),
            digest
        );
    }

    proptest! {
        #[test]
        fn trailing_line_breaks_do_not_matter(
            doc in document(),
            a in line_breaks(),
            b in line_breaks(),
        ) {
            let with = |breaks: &str| [doc.as_slice(), breaks.as_bytes()].concat();
            prop_assert_eq!(config_digest(&with(&a)), config_digest(&with(&b)));
        }

        #[test]
        fn everything_else_matters(
            doc in document(),
            extra in any::<u8>(),
            at in any::<prop::sample::Index>(),
            breaks in line_breaks(),
        ) {
            let base = config_digest(&[doc.as_slice(), breaks.as_bytes()].concat());
            // A byte added before the trailing line breaks, anywhere in the document.
            let mut changed = doc.clone();
            changed.insert(at.index(doc.len() + 1), extra);
            if matches!(changed.last(), Some(b'\n' | b'\r')) {
                // The added byte would join the trailing line breaks: end the document
                // with content instead.
                changed.push(b'x');
            }
            prop_assert_ne!(
                config_digest(&[changed.as_slice(), breaks.as_bytes()].concat()),
                base
            );
            // A byte changed inside the document.
            if !doc.is_empty() {
                let i = at.index(doc.len());
                let mut flipped = doc.clone();
                flipped[i] ^= 0x20;
                let flipped = [flipped.as_slice(), b"x"].concat();
                let original = [doc.as_slice(), b"x"].concat();
                prop_assert_ne!(config_digest(&flipped), config_digest(&original));
            }
        }

        #[test]
        fn artifact_and_read_back_digest_equal(
            doc in document(),
            sent in line_breaks(),
            read_back in line_breaks(),
        ) {
            let artifact = ConfigArtifact::new([doc.as_slice(), sent.as_bytes()].concat());
            let observed = config_digest(&[doc.as_slice(), read_back.as_bytes()].concat());
            prop_assert_eq!(artifact.digest(), observed);
        }
    }
}
