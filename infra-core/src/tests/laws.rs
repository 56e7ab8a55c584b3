//! The order and merge laws, for every `Refines`/`Merge` instance of this crate,
//! including the fourteen kinds' derived instances.

use std::collections::{BTreeMap, BTreeSet};

use crate::kinds::*;
use crate::testing::{check_merge_laws, check_refines_laws};
use crate::{Expr, Key, Partial, Status};

/// At least 256 cases per instance, as the project requires.
const CASES: u32 = 256;

macro_rules! laws {
    ($($name:ident: $ty:ty),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check_refines_laws::<$ty>(CASES);
                check_merge_laws::<$ty>(CASES);
            }
        )*
    };
}

laws!(
    ground_bool: bool,
    ground_u32: u32,
    ground_string: String,
    ground_set: BTreeSet<String>,
    partial_u32: Partial<u32>,
    partial_of_option: Partial<Option<u32>>,
    option_of_partial: Option<Partial<u32>>,
    vec_of_partial: Vec<Partial<u32>>,
    map_of_partial: BTreeMap<String, Partial<bool>>,
    status_of_partial: Status<Partial<u32>>,
    expr_u32: Expr<u32>,
    partial_expr_option: Partial<Expr<Option<u32>>>,
    key: Key<SecurityGroup>,
    partial_option_key: Partial<Option<Key<S3Bucket>>>,
    secret_source: SecretSource,
    status_of_kind: Status<ObjectStore>,
    kind_iam: Iam,
    kind_object_store: ObjectStore,
    kind_compute: Compute,
    kind_queues: Queues,
    kind_secrets: Secrets,
    kind_image_registry: ImageRegistry,
    kind_postgres: Postgres,
    kind_s3_bucket: S3Bucket,
    kind_security_group: SecurityGroup,
    kind_aws_instance: AwsInstance,
    kind_function_namespace: FunctionNamespace,
    kind_function: Function,
    kind_container_namespace: ContainerNamespace,
    kind_container: Container,
);

/// The law checkers are only worth something if they can fail: a lawless instance must
/// be caught.
mod the_checkers_catch_broken_instances {
    use crate::testing::{Sample, proptest::prelude::*};
    use crate::{Conflict, Merge, Refines};

    /// "Refines" as `<=`: a total order, not a refinement. Merge as `max`, which is an
    /// upper bound but saturates instead of failing.
    #[derive(Clone, Debug, PartialEq, serde::Serialize)]
    struct Ordered(u32);
    impl Refines for Ordered {
        fn refines(&self, other: &Self) -> bool {
            self.0 <= other.0
        }
    }
    impl Merge for Ordered {
        fn merge(&self, other: &Self) -> Result<Self, Conflict> {
            Ok(Ordered(self.0.max(other.0) + 1)) // not the least upper bound
        }
    }
    impl Sample for Ordered {
        fn sample() -> BoxedStrategy<Self> {
            (0u32..4).prop_map(Ordered).boxed()
        }
    }

    /// Equality that refines nothing but itself, merging by refusing everything.
    #[derive(Clone, Debug, PartialEq, serde::Serialize)]
    struct Refusing(u32);
    impl Refines for Refusing {
        fn refines(&self, other: &Self) -> bool {
            self == other
        }
    }
    impl Merge for Refusing {
        fn merge(&self, other: &Self) -> Result<Self, Conflict> {
            Err(Conflict::between(self, other))
        }
    }
    impl Sample for Refusing {
        fn sample() -> BoxedStrategy<Self> {
            (0u32..4).prop_map(Refusing).boxed()
        }
    }

    /// Not reflexive.
    #[derive(Clone, Debug, PartialEq, serde::Serialize)]
    struct Irreflexive(u32);
    impl Refines for Irreflexive {
        fn refines(&self, other: &Self) -> bool {
            self.0 < other.0
        }
    }
    impl Sample for Irreflexive {
        fn sample() -> BoxedStrategy<Self> {
            (0u32..4).prop_map(Irreflexive).boxed()
        }
    }

    #[test]
    #[should_panic(expected = "not below the upper bound")]
    fn a_merge_above_the_least_upper_bound_fails() {
        crate::testing::check_merge_laws::<Ordered>(256);
    }

    #[test]
    #[should_panic(expected = "conflict")]
    fn a_conflict_where_an_upper_bound_exists_fails() {
        crate::testing::check_merge_laws::<Refusing>(256);
    }

    #[test]
    #[should_panic(expected = "not reflexive")]
    fn an_irreflexive_order_fails() {
        crate::testing::check_refines_laws::<Irreflexive>(256);
    }
}
