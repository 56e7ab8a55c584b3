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
pub trait Sample: Sized + Debug {
    /// The strategy.
    fn sample() -> BoxedStrategy<Self>;
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

impl<T: Sample + 'static> Sample for Partial<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop_oneof![
            1 => proptest::strategy::LazyJust::new(|| Partial::Unknown),
            2 => T::sample().prop_map(Partial::Known),
        ]
        .boxed()
    }
}

impl<T: Sample + 'static> Sample for Option<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop_oneof![
            1 => proptest::strategy::LazyJust::new(|| None),
            2 => T::sample().prop_map(Some),
        ]
        .boxed()
    }
}

impl<T: Sample + Clone + 'static> Sample for Status<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop_oneof![
            1 => Just(Status::Unmanaged),
            1 => Just(Status::Absent),
            2 => T::sample().prop_map(Status::Present),
        ]
        .boxed()
    }
}

impl<T: Sample + 'static> Sample for Vec<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop::collection::vec(T::sample(), 0..3).boxed()
    }
}

impl<T: Sample + Ord + 'static> Sample for BTreeSet<T> {
    fn sample() -> BoxedStrategy<Self> {
        prop::collection::btree_set(T::sample(), 0..3).boxed()
    }
}

impl<V: Sample + 'static> Sample for BTreeMap<String, V> {
    fn sample() -> BoxedStrategy<Self> {
        prop::collection::btree_map(String::sample(), V::sample(), 0..3).boxed()
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

fn run<T: Sample + 'static>(cases: u32, check: impl Fn(&T, &T, &T) -> Result<(), TestCaseError>) {
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

/// Runs [`refines_laws`] over `cases` random triples of `T`. Panics with the smallest
/// counterexample found.
pub fn check_refines_laws<T: Sample + Refines + PartialEq + 'static>(cases: u32) {
    run::<T>(cases, refines_laws);
}

/// Runs [`merge_laws`] over `cases` random triples of `T`, trying as upper bounds the
/// third value and the merges of it with either input (which are upper bounds whenever
/// they exist). Panics with the smallest counterexample found.
pub fn check_merge_laws<T: Sample + Merge + PartialEq + 'static>(cases: u32) {
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
}
