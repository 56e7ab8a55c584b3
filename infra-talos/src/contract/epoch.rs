//! Recovery epochs (§7.1, choice §10.17).
//!
//! An epoch is a random 128-bit value; one is drawn when the installation is created
//! and a new one on each recovery-mode entry. A restore can rewind counters but cannot make a random value
//! collide with one issued later, so epochs are compared for equality only. [`Epoch`]
//! deliberately has no ordering:
//!
//! ```compile_fail,E0369
//! use infra_talos::contract::epoch::Epoch;
//! let a = Epoch::from_bytes([1; 16]);
//! let b = Epoch::from_bytes([2; 16]);
//! let _ = a < b; // epochs are never ordered (§7.1)
//! ```
//!
//! ```
//! use infra_talos::contract::epoch::Epoch;
//! let a = Epoch::from_bytes([1; 16]);
//! assert!(a == Epoch::from_bytes([1; 16]));
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A recovery epoch: 16 random bytes, compared for equality only (§7.1).
///
/// Serialized as 32 lowercase hexadecimal characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Epoch([u8; 16]);

impl Epoch {
    /// The epoch with these bytes. The store draws them from a secure random source.
    #[must_use]
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The epoch's bytes.
    #[must_use]
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Epoch({self})")
    }
}

/// Text that is not 32 hexadecimal characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an epoch is written as 32 hexadecimal characters")]
pub struct EpochParseError;

impl FromStr for Epoch {
    type Err = EpochParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let raw = s.as_bytes();
        if raw.len() != 32 {
            return Err(EpochParseError);
        }
        let mut bytes = [0u8; 16];
        for (i, pair) in raw.chunks_exact(2).enumerate() {
            let hi = hex_value(pair[0]).ok_or(EpochParseError)?;
            let lo = hex_value(pair[1]).ok_or(EpochParseError)?;
            bytes[i] = (hi << 4) | lo;
        }
        Ok(Self(bytes))
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl Serialize for Epoch {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Epoch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What carries an epoch and is checked against the current one (§7.1 item 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpochBearer {
    /// An approval (§3.2 comparison 1).
    Approval,
    /// An operation owner's token (§3.3 comparison 7).
    OwnershipToken,
    /// A scope release (§3.2 comparison 6, §7.3 step 7).
    ScopeRelease,
}

impl fmt::Display for EpochBearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Approval => "the approval",
            Self::OwnershipToken => "the ownership token",
            Self::ScopeRelease => "the scope release",
        })
    }
}

/// A bearer issued in another epoch: it authorizes nothing (§8 invariant 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{bearer} was issued in epoch {carried}, not in the current recovery epoch {current}, \
     so it authorizes nothing (§7.1, §8 invariant 8)"
)]
pub struct ForeignEpoch {
    /// What carried the epoch.
    pub bearer: EpochBearer,
    /// The epoch it carries.
    pub carried: Epoch,
    /// The current recovery epoch.
    pub current: Epoch,
}

/// Whether something issued in `carried` may authorize anything now: only when it was
/// issued in the current epoch (§7.1, §8 invariant 8).
#[must_use]
pub fn authorizes(carried: Epoch, current: Epoch) -> bool {
    carried == current
}

/// [`authorizes`], with a refusal that names the bearer.
///
/// # Errors
///
/// [`ForeignEpoch`] when `carried` is not `current`.
pub fn check_epoch(
    bearer: EpochBearer,
    carried: Epoch,
    current: Epoch,
) -> Result<(), ForeignEpoch> {
    if authorizes(carried, current) {
        Ok(())
    } else {
        Err(ForeignEpoch {
            bearer,
            carried,
            current,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_serde() {
        let e = Epoch::from_bytes([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xa, 0xb, 0xc, 0xd, 0xe, 0xff]);
        let text = e.to_string();
        assert_eq!(text, "000102030405060708090a0b0c0d0eff");
        assert_eq!(text.parse::<Epoch>(), Ok(e));
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, "\"000102030405060708090a0b0c0d0eff\"");
        assert_eq!(serde_json::from_str::<Epoch>(&json).unwrap(), e);
    }

    #[test]
    fn bad_text_is_refused() {
        for bad in ["", "00", &"0".repeat(31), &"0".repeat(33), &"g".repeat(32)] {
            assert_eq!(bad.parse::<Epoch>(), Err(EpochParseError), "{bad:?}");
        }
        assert!(serde_json::from_str::<Epoch>("\"xyz\"").is_err());
    }

    #[test]
    fn equality_only() {
        let a = Epoch::from_bytes([7; 16]);
        let b = Epoch::from_bytes([8; 16]);
        assert!(authorizes(a, a));
        assert!(!authorizes(a, b));
        assert_eq!(check_epoch(EpochBearer::Approval, a, a), Ok(()));
        assert_eq!(
            check_epoch(EpochBearer::ScopeRelease, a, b),
            Err(ForeignEpoch {
                bearer: EpochBearer::ScopeRelease,
                carried: a,
                current: b
            })
        );
    }
}
