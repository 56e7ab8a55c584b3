//! Partial merge: the least upper bound of two targets, or the field where they collide.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::Refines;

/// The least upper bound of two values in the [`Refines`] order, when there is one.
///
/// `{port: 80}` and `{port: 443}` have no common upper bound: merging them is a
/// [`Conflict`] naming the field, never an uninformative "anything" value.
///
/// Laws, tested for every instance by `infra_core::testing` (feature `testing`): a successful merge refines
/// both inputs' upper bounds (it is above both, and below every other value above both);
/// it is commutative; and it fails only when no upper bound exists.
pub trait Merge: Refines + Sized {
    /// The least upper bound of `self` and `other`, or where they collide.
    fn merge(&self, other: &Self) -> Result<Self, Conflict>;
}

/// Where two values collide: the field path, and both sides rendered as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// The path of fields from the outermost value to the collision (`["tags", "env"]`).
    pub path: Vec<String>,
    /// The left side's value at that path, as compact JSON.
    pub left: String,
    /// The right side's value at that path, as compact JSON.
    pub right: String,
}

/// Longest rendering of a value in a conflict; longer values are cut with an ellipsis.
const RENDER_LIMIT: usize = 160;

pub(crate) fn render(value: &impl Serialize) -> String {
    let mut text = serde_json::to_string(value).unwrap_or_else(|e| format!("<unrenderable: {e}>"));
    if text.len() > RENDER_LIMIT {
        let mut cut = RENDER_LIMIT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

impl Conflict {
    /// A conflict between two values, at the root of the value being merged.
    pub fn between(left: &impl Serialize, right: &impl Serialize) -> Self {
        Self::rendered(render(left), render(right))
    }

    /// A conflict between two already rendered values.
    pub fn rendered(left: String, right: String) -> Self {
        Conflict {
            path: Vec::new(),
            left,
            right,
        }
    }

    /// The same conflict, seen from the enclosing value's field `segment`.
    pub fn within(mut self, segment: &str) -> Self {
        self.path.insert(0, segment.to_owned());
        self
    }

    /// The field path joined with dots (`tags.env`), or `(whole value)` at the root.
    pub fn path_text(&self) -> String {
        if self.path.is_empty() {
            "(whole value)".to_owned()
        } else {
            self.path.join(".")
        }
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}`: {} against {}",
            self.path_text(),
            self.left,
            self.right
        )
    }
}

impl std::error::Error for Conflict {}

macro_rules! flat_merge {
    ($($ty:ty),* $(,)?) => {
        $(
            impl Merge for $ty {
                fn merge(&self, other: &Self) -> Result<Self, Conflict> {
                    if self == other {
                        Ok(self.clone())
                    } else {
                        Err(Conflict::between(self, other))
                    }
                }
            }
        )*
    };
}

flat_merge!(
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

impl<T: Ord + Clone + Serialize> Merge for BTreeSet<T> {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        if self == other {
            Ok(self.clone())
        } else {
            Err(Conflict::between(self, other))
        }
    }
}

impl<T: Merge + Serialize> Merge for Option<T> {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        match (self, other) {
            (None, None) => Ok(None),
            (Some(a), Some(b)) => a.merge(b).map(Some),
            _ => Err(Conflict::between(self, other)),
        }
    }
}

impl<T: Merge + Serialize> Merge for Vec<T> {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        if self.len() != other.len() {
            return Err(Conflict::between(self, other));
        }
        self.iter()
            .zip(other)
            .enumerate()
            .map(|(i, (a, b))| a.merge(b).map_err(|c| c.within(&format!("[{i}]"))))
            .collect()
    }
}

impl<K: Ord + Clone + Serialize + fmt::Display, V: Merge + Serialize> Merge for BTreeMap<K, V> {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        if !self.keys().eq(other.keys()) {
            return Err(Conflict::between(self, other));
        }
        self.iter()
            .zip(other.values())
            .map(|((k, a), b)| {
                a.merge(b)
                    .map(|v| (k.clone(), v))
                    .map_err(|c| c.within(&k.to_string()))
            })
            .collect()
    }
}

/// Two writers whose contributions to one value collide.
///
/// The way server-side apply names the field manager it collided with: which field, and
/// for each side the writer and the value that writer asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WriterConflict {
    /// Where the values collide, from the merged value's root.
    pub path: Vec<String>,
    /// The writer that said it first, and what it said.
    pub first: Side,
    /// The writer that contradicted it, and what it said.
    pub second: Side,
}

/// One side of a [`WriterConflict`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    /// Who wrote it.
    pub writer: String,
    /// What it wrote at the conflicting path, as compact JSON.
    pub value: String,
}

impl fmt::Display for WriterConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(whole value)".to_owned()
        } else {
            self.path.join(".")
        };
        write!(
            f,
            "`{path}`: {} wrote {}, {} wrote {}",
            self.first.writer, self.first.value, self.second.writer, self.second.value
        )
    }
}

impl std::error::Error for WriterConflict {}

/// Merges the contributions of several writers, in order.
///
/// On a collision the error names the *earlier writer that actually set the field*, not
/// the accumulated value: each earlier contribution is merged pairwise with the one that
/// failed, and the first that collides at the same path is named. Returns `None` for no
/// writers.
///
/// ```
/// use infra_core::{engine::merge_writers, prelude::Partial};
///
/// let writes = [
///     ("base", (Partial::Known(80u32), Partial::Unknown)),
///     ("ops", (Partial::Unknown, Partial::Known(true))),
///     ("team-b", (Partial::Known(443u32), Partial::Unknown)),
/// ];
/// # use infra_core::{sdk::Conflict, prelude::Merge, prelude::Refines};
/// # #[derive(Clone, Debug, serde::Serialize)]
/// # struct Pair(Partial<u32>, Partial<bool>);
/// # impl Refines for Pair { fn refines(&self, o: &Self) -> bool { self.0.refines(&o.0) && self.1.refines(&o.1) } }
/// # impl Merge for Pair { fn merge(&self, o: &Self) -> Result<Self, Conflict> {
/// #     Ok(Pair(self.0.merge(&o.0).map_err(|c| c.within("port"))?, self.1.merge(&o.1).map_err(|c| c.within("tls"))?)) } }
/// let writes = writes.map(|(w, (a, b))| (w, Pair(a, b)));
/// let err = merge_writers(&writes).unwrap_err();
/// assert_eq!(err.to_string(), "`port`: base wrote 80, team-b wrote 443");
/// ```
pub fn merge_writers<W: AsRef<str>, T: Merge + Clone>(
    writes: &[(W, T)],
) -> Result<Option<T>, WriterConflict> {
    let mut acc: Option<T> = None;
    for (k, (writer, value)) in writes.iter().enumerate() {
        acc = Some(match acc {
            None => value.clone(),
            Some(sofar) => match sofar.merge(value) {
                Ok(merged) => merged,
                Err(conflict) => return Err(blame(&writes[..k], writer.as_ref(), value, conflict)),
            },
        });
    }
    Ok(acc)
}

fn blame<W: AsRef<str>, T: Merge>(
    earlier: &[(W, T)],
    writer: &str,
    value: &T,
    against_all: Conflict,
) -> WriterConflict {
    let pairwise: Vec<(&str, Conflict)> = earlier
        .iter()
        .filter_map(|(w, v)| v.merge(value).err().map(|c| (w.as_ref(), c)))
        .collect();
    let chosen = pairwise
        .iter()
        .find(|(_, c)| c.path == against_all.path)
        .or_else(|| pairwise.first());
    match chosen {
        Some((first, c)) => WriterConflict {
            path: c.path.clone(),
            first: Side {
                writer: (*first).to_owned(),
                value: c.left.clone(),
            },
            second: Side {
                writer: writer.to_owned(),
                value: c.right.clone(),
            },
        },
        // No single earlier writer collides: only their combination does.
        None => WriterConflict {
            path: against_all.path,
            first: Side {
                writer: earlier
                    .iter()
                    .map(|(w, _)| w.as_ref())
                    .collect::<Vec<_>>()
                    .join(" + "),
                value: against_all.left,
            },
            second: Side {
                writer: writer.to_owned(),
                value: against_all.right,
            },
        },
    }
}
