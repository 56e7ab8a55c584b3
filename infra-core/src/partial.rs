//! `Partial<T>`: a value that may not have been said yet.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Conflict, Merge, Refines};

/// `Unknown` or `Known(value)`, with `Unknown` below everything in the refinement order.
///
/// One constructor covers three situations that behave the same under merge and diff:
/// the author chose not to say, the value is only known after apply, and the world was
/// not (fully) observed. It is not [`Option`]: a spec field of type `Option<T>` means
/// "said: none", while `Partial::Unknown` means "not said". Both can be written, and
/// neither is faked with a default value.
///
/// `Unknown` serialises as `null`. Inside a spec, an unknown field is left out of the
/// serialised object altogether, so that `null` there keeps meaning "said: none".
///
/// ```
/// use infra_core::prelude::Partial;
/// assert_eq!(serde_json::to_string(&Partial::<u32>::Unknown).unwrap(), "null");
/// assert_eq!(serde_json::to_string(&Partial::Known(3u32)).unwrap(), "3");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Partial<T> {
    /// Not said, not known yet, or not observed. The bottom of the order.
    #[default]
    Unknown,
    /// Said.
    Known(T),
}

impl<T> Partial<T> {
    /// Whether nothing has been said.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Partial::Unknown)
    }

    /// The value, if said.
    pub fn known(&self) -> Option<&T> {
        match self {
            Partial::Unknown => None,
            Partial::Known(v) => Some(v),
        }
    }

    /// Converts into an [`Option`], losing the distinction from a said `None`.
    pub fn into_known(self) -> Option<T> {
        match self {
            Partial::Unknown => None,
            Partial::Known(v) => Some(v),
        }
    }

    /// Borrows the value.
    pub fn as_ref(&self) -> Partial<&T> {
        match self {
            Partial::Unknown => Partial::Unknown,
            Partial::Known(v) => Partial::Known(v),
        }
    }

    /// Applies `f` to a known value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Partial<U> {
        match self {
            Partial::Unknown => Partial::Unknown,
            Partial::Known(v) => Partial::Known(f(v)),
        }
    }
}

impl<T> From<T> for Partial<T> {
    fn from(value: T) -> Self {
        Partial::Known(value)
    }
}

impl<T: Refines> Refines for Partial<T> {
    fn refines(&self, other: &Self) -> bool {
        match (self, other) {
            (Partial::Unknown, _) => true,
            (Partial::Known(_), Partial::Unknown) => false,
            (Partial::Known(a), Partial::Known(b)) => a.refines(b),
        }
    }
}

impl<T: Merge + Clone> Merge for Partial<T> {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        match (self, other) {
            (Partial::Unknown, x) | (x, Partial::Unknown) => Ok(x.clone()),
            (Partial::Known(a), Partial::Known(b)) => a.merge(b).map(Partial::Known),
        }
    }
}

impl<T: Serialize> Serialize for Partial<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Partial::Unknown => serializer.serialize_none(),
            Partial::Known(v) => v.serialize(serializer),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Partial<T> {
    /// `null` reads as `Unknown`. (A `Partial<Option<T>>` therefore cannot round-trip a
    /// said `None` on its own; inside a spec the field is omitted when unknown instead.)
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(deserializer)? {
            None => Partial::Unknown,
            Some(v) => Partial::Known(v),
        })
    }
}
