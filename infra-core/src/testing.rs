//! Reusable law checkers and small-domain strategies (feature `testing`).
//!
//! Every [`Refines`] instance must be a partial order and every [`Merge`] a least upper
//! bound. A custom kind proves it with one call each:
//!
//! ```
//! use infra_core::testing::{check_merge_laws, check_refines_laws};
//! use infra_core::kinds::ObjectStore;
//!
//! check_refines_laws::<ObjectStore>(256);
//! check_merge_laws::<ObjectStore>(256);
//! ```
//!
//! The strategies draw from deliberately small domains (strings from three, numbers
//! from four) so that equal values, and therefore upper bounds, turn up often enough for
//! the laws to be exercised rather than vacuously true.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;

pub use infra_derive::Sample;
pub use proptest;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::kinds::SecretSource;
use crate::{Expr, Key, Merge, Partial, Refines, SecretString, Status, Value};

/// A proptest strategy over a small domain of values of the type.
pub trait Sample: Sized + Debug + Clone + 'static {
    /// The strategy.
    fn sample() -> BoxedStrategy<Self>;

    /// Values this one refines: the same value with some of what it says forgotten
    /// (a known field made unknown, a present status made unmanaged). Two weakenings of
    /// one value always have an upper bound, the value itself, so merging them must
    /// succeed and stay below it. Ground values have nothing to forget.
    fn weaken(&self) -> BoxedStrategy<Self> {
        Just(self.clone()).boxed()
    }
}

macro_rules! small_ints {
    ($($ty:ty),*) => {
        $(
            impl Sample for $ty {
                fn sample() -> BoxedStrategy<Self> {
                    (0 as $ty..4 as $ty).boxed()
                }
            }
        )*
    };
}

small_ints!(u8, u16, u32, u64, usize, i32, i64);

impl Sample for bool {
    fn sample() -> BoxedStrategy<Self> {
        any::<bool>().boxed()
    }
}

impl Sample for () {
    fn sample() -> BoxedStrategy<Self> {
        Just(()).boxed()
    }
}

impl Sample for String {
    fn sample() -> BoxedStrategy<Self> {
        prop::sample::select(vec!["a", "b", "c"])
            .prop_map(str::to_owned)
            .boxed()
    }
}

impl<T: Sample> Sample for Partial<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop_oneof![
            1 => Just(Partial::Unknown),
            2 => T::sample().prop_map(Partial::Known),
        ]
        .boxed()
    }

    fn weaken(&self) -> BoxedStrategy<Self> {
        match self {
            Partial::Unknown => Just(Partial::Unknown).boxed(),
            Partial::Known(v) => prop_oneof![
                1 => Just(Partial::Unknown),
                2 => v.weaken().prop_map(Partial::Known),
            ]
            .boxed(),
        }
    }
}

impl<T: Sample> Sample for Option<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop_oneof![1 => Just(None), 2 => T::sample().prop_map(Some)].boxed()
    }

    fn weaken(&self) -> BoxedStrategy<Self> {
        match self {
            None => Just(None).boxed(),
            Some(v) => v.weaken().prop_map(Some).boxed(),
        }
    }
}

impl<T: Sample> Sample for Status<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop_oneof![
            1 => Just(Status::Unmanaged),
            1 => Just(Status::Absent),
            2 => T::sample().prop_map(Status::Present),
        ]
        .boxed()
    }

    fn weaken(&self) -> BoxedStrategy<Self> {
        match self {
            Status::Unmanaged => Just(Status::Unmanaged).boxed(),
            Status::Absent => prop_oneof![Just(Status::Unmanaged), Just(Status::Absent)].boxed(),
            Status::Present(v) => prop_oneof![
                1 => Just(Status::Unmanaged),
                2 => v.weaken().prop_map(Status::Present),
            ]
            .boxed(),
        }
    }
}

impl<T: Sample> Sample for Vec<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop::collection::vec(T::sample(), 0..3).boxed()
    }

    fn weaken(&self) -> BoxedStrategy<Self> {
        self.iter().map(Sample::weaken).collect::<Vec<_>>().boxed()
    }
}

impl<T: Sample + Ord> Sample for BTreeSet<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop::collection::btree_set(T::sample(), 0..3).boxed()
    }
}

impl<V: Sample> Sample for BTreeMap<String, V> {
    fn sample() -> BoxedStrategy<Self> {
        prop::collection::btree_map(String::sample(), V::sample(), 0..3).boxed()
    }

    fn weaken(&self) -> BoxedStrategy<Self> {
        let keys: Vec<String> = self.keys().cloned().collect();
        self.values()
            .map(Sample::weaken)
            .collect::<Vec<_>>()
            .prop_map(move |values| keys.iter().cloned().zip(values).collect())
            .boxed()
    }
}

impl<K: crate::Kind> Sample for Key<K> {
    /// Keys of a test fleet (id 0), indices 0 to 2.
    fn sample() -> BoxedStrategy<Self> {
        (0u32..3).prop_map(|i| Key::raw(0, i)).boxed()
    }
}

impl Sample for SecretString {
    fn sample() -> BoxedStrategy<Self> {
        prop::sample::select(vec!["s1", "s2"])
            .prop_map(SecretString::new)
            .boxed()
    }
}

impl<T: Value + Sample> Sample for Expr<T> {
    /// Mostly literals; sometimes one of two computed expressions shared by the whole
    /// strategy, so that equal (identical) computed expressions occur too.
    fn sample() -> BoxedStrategy<Self> {
        let pool: Arc<[Expr<T>]> = Arc::from(vec![computed::<T>(0), computed::<T>(1)]);
        prop_oneof![
            4 => T::sample().prop_map(Expr::lit),
            1 => (0usize..2).prop_map(move |i| pool[i].clone()),
        ]
        .boxed()
    }
}

/// A computed expression reading the observed state of test key `index`.
fn computed<T: Value + Sample>(index: u32) -> Expr<T> {
    use crate::kinds::ObjectStore;
    let mut runner = TestRunner::deterministic();
    let value = T::sample()
        .new_tree(&mut runner)
        .expect("a sample value")
        .current();
    Expr::observed(Key::<ObjectStore>::raw(0, index)).map(move |_| value.clone())
}

impl Sample for SecretSource {
    fn sample() -> BoxedStrategy<Self> {
        prop_oneof![
            String::sample().prop_map(SecretSource::FromEnv),
            Expr::<SecretString>::sample().prop_map(SecretSource::Composed),
            (8u16..10).prop_map(|length| SecretSource::Generated { length }),
        ]
        .boxed()
    }
}

fn law(holds: bool, message: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if holds {
        Ok(())
    } else {
        Err(TestCaseError::fail(message()))
    }
}

/// Checks the order laws on three values: reflexive, antisymmetric (`a ⊑ b` and
/// `b ⊑ a` only for equal values), transitive.
pub fn refines_laws<T: Refines + PartialEq + Debug>(
    a: &T,
    b: &T,
    c: &T,
) -> Result<(), TestCaseError> {
    law(a.refines(a), || {
        format!("not reflexive: {a:?} does not refine itself")
    })?;
    law(!(a.refines(b) && b.refines(a)) || a == b, || {
        format!("not antisymmetric: {a:?} and {b:?} refine each other but differ")
    })?;
    law(!(a.refines(b) && b.refines(c)) || a.refines(c), || {
        format!("not transitive: {a:?} ⊑ {b:?} ⊑ {c:?} but not {a:?} ⊑ {c:?}")
    })
}

/// Checks the merge laws on two values and a candidate upper bound `u`:
/// a successful merge is above both inputs and below `u` whenever `u` is above both; a
/// merge fails only when `u` is *not* above both; merging is commutative and merging a
/// value with itself gives it back.
pub fn merge_laws<T: Merge + PartialEq + Debug>(a: &T, b: &T, u: &T) -> Result<(), TestCaseError> {
    let upper = a.refines(u) && b.refines(u);
    match (a.merge(b), b.merge(a)) {
        (Ok(m), Ok(n)) => {
            law(a.refines(&m) && b.refines(&m), || {
                format!("merge of {a:?} and {b:?} is {m:?}, not above both")
            })?;
            law(!upper || m.refines(u), || {
                format!("merge of {a:?} and {b:?} is {m:?}, not below the upper bound {u:?}")
            })?;
            law(m == n, || {
                format!("not commutative: {a:?} ⊔ {b:?} = {m:?} but {b:?} ⊔ {a:?} = {n:?}")
            })?;
        }
        (Err(conflict), Err(_)) => law(!upper, || {
            format!("{a:?} and {b:?} conflict ({conflict}) although {u:?} is above both")
        })?,
        (left, right) => {
            return Err(TestCaseError::fail(format!(
                "not commutative: {a:?} ⊔ {b:?} is {left:?} but {b:?} ⊔ {a:?} is {right:?}"
            )));
        }
    }
    law(a.merge(a).as_ref() == Ok(a), || {
        format!("{a:?} ⊔ {a:?} is not {a:?}")
    })
}

fn run<T: Sample>(cases: u32, check: impl Fn(&T, &T, &T) -> Result<(), TestCaseError>) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (T::sample(), T::sample(), T::sample());
    if let Err(e) = runner.run(&strategy, |(a, b, c)| check(&a, &b, &c)) {
        panic!("{} laws fail: {e}", std::any::type_name::<T>());
    }
}

/// Triples `(a, b, top)` where `a` and `b` are weakenings of `top`: compatible by
/// construction, with `top` an upper bound of both.
fn weakened<T: Sample>() -> impl Strategy<Value = (T, T, T)> {
    T::sample().prop_flat_map(|top| (top.weaken(), top.weaken(), Just(top)))
}

/// Runs [`refines_laws`] over `cases` random triples of `T`, and over as many triples
/// of a value and two weakenings of it (where refinement holds by construction, so
/// transitivity and antisymmetry are exercised). Panics with the smallest counterexample.
pub fn check_refines_laws<T: Sample + Refines + PartialEq>(cases: u32) {
    run::<T>(cases, refines_laws);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&weakened::<T>(), |(a, b, top)| {
        law(a.refines(&top) && b.refines(&top), || {
            format!("a weakening of {top:?} does not refine it: {a:?} or {b:?}")
        })?;
        refines_laws(&a, &b, &top)?;
        refines_laws(&top, &a, &b)
    });
    if let Err(e) = result {
        panic!("{} laws fail: {e}", std::any::type_name::<T>());
    }
}

/// Runs [`merge_laws`] over `cases` random triples of `T` (trying as upper bounds the
/// third value and its merges with either input), and over as many pairs of weakenings
/// of one value, which must merge to something below that value. Panics with the
/// smallest counterexample found.
pub fn check_merge_laws<T: Sample + Merge + PartialEq>(cases: u32) {
    run::<T>(cases, |a, b, c| {
        merge_laws(a, b, c)?;
        for bound in [a.merge(c), b.merge(c)].into_iter().flatten() {
            merge_laws(a, b, &bound)?;
            if let Ok(both) = bound.merge(a).and_then(|x| x.merge(b)) {
                merge_laws(a, b, &both)?;
            }
        }
        Ok(())
    });
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&weakened::<T>(), |(a, b, top)| {
        law(a.merge(&b).is_ok(), || {
            format!("{a:?} and {b:?} conflict although {top:?} is above both")
        })?;
        merge_laws(&a, &b, &top)
    });
    if let Err(e) = result {
        panic!("{} laws fail: {e}", std::any::type_name::<T>());
    }
}
