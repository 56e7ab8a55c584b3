//! The refinement order: how far a value has been pinned down.
//!
//! `a.refines(&b)` reads "`b` pins down everything `a` does, and possibly more". It is a
//! boolean on purpose and deliberately not [`PartialOrd`]: `"a" <= "b"` is an ordering of
//! strings, not a statement that one says more than the other. Ground values are *flat*:
//! a value refines only itself, so `3` does not refine `5`.
//!
//! ```
//! use infra_core::{prelude::Partial, prelude::Refines};
//!
//! assert!(!3u32.refines(&5));
//! assert!(Partial::<u32>::Unknown.refines(&Partial::Known(5)));
//! assert!(!Partial::Known(5u32).refines(&Partial::Unknown));
//! ```
//!
//! Because it is not `PartialOrd`, the comparison operators do not mean refinement:
//!
//! ```compile_fail
//! use infra_core::prelude::Partial;
//! // `Partial` is ordered by `Refines`, never by `<=`.
//! let _ = Partial::<u32>::Unknown <= Partial::Known(3);
//! ```

use std::collections::{BTreeMap, BTreeSet};

/// A partial order of information: `a.refines(&b)` when `b` says everything `a` says.
///
/// Instances must be reflexive, antisymmetric and transitive; the law checkers in
/// `infra_core::testing` (feature `testing`) test any instance, including those of a custom kind.
pub trait Refines {
    /// Whether `other` pins down everything `self` does (and maybe more).
    fn refines(&self, other: &Self) -> bool;
}

macro_rules! flat {
    ($($ty:ty),* $(,)?) => {
        $(
            impl Refines for $ty {
                fn refines(&self, other: &Self) -> bool {
                    self == other
                }
            }
        )*
    };
}

flat!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    String
);

impl<T: Ord> Refines for BTreeSet<T> {
    /// Sets are ground values: equal sets, in any order of insertion.
    fn refines(&self, other: &Self) -> bool {
        self == other
    }
}

impl<T: Refines> Refines for Option<T> {
    /// `None` is a statement ("said: none"), not a hole: it refines only `None`.
    fn refines(&self, other: &Self) -> bool {
        match (self, other) {
            (None, None) => true,
            (Some(a), Some(b)) => a.refines(b),
            _ => false,
        }
    }
}

impl<T: Refines> Refines for Vec<T> {
    /// Position by position; lists of different lengths are unrelated.
    fn refines(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a.refines(b))
    }
}

impl<K: Ord, V: Refines> Refines for BTreeMap<K, V> {
    /// Entry by entry over the same set of keys.
    fn refines(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other)
                .all(|((ka, va), (kb, vb))| ka == kb && va.refines(vb))
    }
}

impl<T: Refines + ?Sized> Refines for Box<T> {
    fn refines(&self, other: &Self) -> bool {
        (**self).refines(other)
    }
}
