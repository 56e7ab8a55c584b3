//! The kinds this crate declares, and which provider realises which.
//!
//! Seven portable kinds that every cloud realises its own way ([`Iam`],
//! [`ObjectStore`], [`Compute`], [`Queues`], [`Secrets`], [`ImageRegistry`],
//! [`Postgres`]), and provider-local ones: [`S3Bucket`], [`SecurityGroup`] and
//! [`AwsInstance`] on AWS; [`FunctionNamespace`], [`Function`], [`ContainerNamespace`]
//! and [`Container`] on Scaleway.
//!
//! In every spec, a required field is a plain [`Expr`](crate::Expr) or
//! [`Key`](crate::Key); an optional one is [`Partial`](crate::Partial) ("not said" unless
//! given); and a field where "none" is itself a choice holds an `Option`.
//!
//! A resource's region is its placement in the fleet; no spec has a region field that
//! could disagree with it.
//!
//! ```
//! use infra_core::{prelude::Expr, prelude::Partial, kinds::ObjectStore};
//! let _ = ObjectStore { versioning: Partial::Known(Expr::lit(true)), ..ObjectStore::new() };
//! ```
//!
//! ```compile_fail
//! use infra_core::{prelude::Expr, kinds::ObjectStore};
//! let _ = ObjectStore { region: Expr::lit("eu-west-3".to_string()), ..ObjectStore::new() };
//! ```
//!
//! A required field cannot be left out: an instance names its security group.
//!
//! ```
//! use infra_core::{prelude::Key, kinds::*};
//! fn instance(group: Key<SecurityGroup>) -> AwsInstance {
//!     AwsInstance { image: Image::Latest.into(),
//!         instance_type: InstanceType::T3(BurstableSize::Micro).into(),
//!         security_group: group,
//!         subnet_id: Default::default(), key_name: Default::default(),
//!         user_data: Default::default(), tags: Default::default() }
//! }
//! ```
//!
//! ```compile_fail
//! use infra_core::{prelude::Key, kinds::*};
//! fn instance(group: Key<SecurityGroup>) -> AwsInstance {
//!     AwsInstance { image: Image::Latest.into(),
//!         instance_type: InstanceType::T3(BurstableSize::Micro).into(),
//!         subnet_id: Default::default(), key_name: Default::default(),
//!         user_data: Default::default(), tags: Default::default() }
//! }
//! ```
//!
//! A secret has exactly one source: an environment variable, a composition, or the
//! provider's generator.
//!
//! ```
//! use infra_core::kinds::{SecretSource, Secrets};
//! let s = Secrets::from_env("DB_PASSWORD");
//! assert!(matches!(s.value_from, SecretSource::FromEnv(_)));
//! ```
//!
//! ```compile_fail
//! use infra_core::kinds::SecretSource;
//! let _ = SecretSource::Both("DB_PASSWORD".into());
//! ```

mod aws;
mod instance_type;
mod portable;
mod scaleway;

pub use aws::*;
pub use instance_type::*;
pub use portable::*;
pub use scaleway::*;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Aws, Gcp, Scaleway, Supports};

/// Key-value labels attached to a resource. Compared as a set of pairs.
pub type Tags = BTreeMap<String, String>;

/// Environment variables of a function or container. Compared as a set of pairs.
pub type EnvVars = BTreeMap<String, String>;

/// Who may call a function or a container over HTTP. Nothing is public unless declared
/// so: [`Access::Private`] is what a fleet says when it says nothing else, and a
/// resource found public when declared private is changed back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Access {
    /// Only callers the cloud authenticates and authorises (an IAM principal with the
    /// invoker role, a token the cloud issued).
    #[default]
    Private,
    /// Anyone on the internet, without credentials.
    Public,
}

#[cfg(any(test, feature = "testing"))]
impl crate::testing::Sample for Access {
    fn sample() -> proptest::strategy::BoxedStrategy<Self> {
        use proptest::strategy::{Just, Strategy};
        proptest::prop_oneof![Just(Access::Private), Just(Access::Public)].boxed()
    }
}

macro_rules! supports {
    ($provider:ty: $($kind:ty),* $(,)?) => {
        $( impl Supports<$kind> for $provider {} )*
    };
}

supports!(Aws: Iam, ObjectStore, Compute, Queues, Secrets, ImageRegistry, Postgres, S3Bucket, SecurityGroup, AwsInstance);
supports!(Gcp: Iam, ObjectStore, Compute, Queues, Secrets, ImageRegistry, Postgres);
supports!(Scaleway: Iam, ObjectStore, Compute, Queues, Secrets, ImageRegistry, Postgres,
    FunctionNamespace, Function, ContainerNamespace, Container);

/// Pushes a problem when a field's known literal lies outside `range`: the check every
/// numeric field of a kind makes (custom kinds use it too).
pub fn check_range(
    problems: &mut Vec<String>,
    field: &str,
    value: &crate::Partial<crate::Expr<u32>>,
    range: std::ops::RangeInclusive<u32>,
) {
    if let Some(v) = value.known().and_then(|e| e.as_lit())
        && !range.contains(v)
    {
        problems.push(format!(
            "`{field}` is {v}, outside {}..={}",
            range.start(),
            range.end()
        ));
    }
}
