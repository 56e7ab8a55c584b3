//! How the suite declares a resource of one kind: [`KindSample`] and [`Variant`].

use std::fmt;
use std::sync::Arc;

use infra_core::prelude::{FleetBuilder, Kind, Provider, Region, Supports};

/// Which version of a sample's resource to declare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The resource as first created.
    Base,
    /// The base with one field of the kind's divergence table that is
    /// [`Mutable`](infra_core::sdk::Mutability::Mutable) changed: applying it after the base
    /// must be an update in place.
    Mutable,
    /// The base with one field that
    /// [`ForcesReplace`](infra_core::sdk::Mutability::ForcesReplace) changed: applying it
    /// after the base must be a replace.
    Replace,
}

/// The declare function of a sample: declares, into the builder, the resource under
/// test in the region whose code is given, named exactly as given, in the variant
/// given, plus any prerequisites it needs (named from it: `{name}-dep`, `{name}-dep2`).
///
/// It is only called with a region code for which [`KindSample::region_parses`]
/// answered `true`.
pub type DeclareFn = Arc<dyn Fn(&mut FleetBuilder, &str, &str, Variant) + Send + Sync>;

/// How the suite declares resources of one kind on one provider.
///
/// A sample belongs to one provider: the suite runs the samples whose provider is the
/// backend's, whose kind is in the backend's capabilities, and whose region parses for
/// that provider. [`KindSample::new`] is the typed way to write one: the closure
/// receives the provider's own region value, so it cannot place the resource on
/// another cloud.
///
/// ```
/// use infra_core::{prelude::Aws, prelude::Expr, prelude::Partial, kinds::ObjectStore};
/// use infra_testkit::conformance::{KindSample, Variant};
///
/// let sample = KindSample::new::<Aws, ObjectStore>(|fleet, region, name, variant| {
///     let versioning = variant == Variant::Mutable;
///     fleet.declare(region, name, ObjectStore {
///         versioning: Partial::Known(Expr::lit(versioning)),
///         ..ObjectStore::new()
///     });
/// })
/// .mutable(true);
/// assert_eq!((sample.provider, sample.kind), ("aws", "objectStore"));
/// assert!(sample.region_parses("eu-west-3") && !sample.region_parses("fr-par"));
/// ```
#[derive(Clone)]
pub struct KindSample {
    /// The provider the sample places resources on (`aws`).
    pub provider: &'static str,
    /// The kind's id (`objectStore`).
    pub kind: &'static str,
    /// Whether the sample has a [`Variant::Mutable`].
    pub mutable: bool,
    /// Whether the sample has a [`Variant::Replace`].
    pub replace: bool,
    /// Whether a region code is one of the provider's regions.
    pub parse_region: fn(&str) -> bool,
    /// Declares the resource under test and its prerequisites.
    pub declare: DeclareFn,
}

impl fmt::Debug for KindSample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KindSample")
            .field("provider", &self.provider)
            .field("kind", &self.kind)
            .field("mutable", &self.mutable)
            .field("replace", &self.replace)
            .finish_non_exhaustive()
    }
}

fn parses<P: Provider>(code: &str) -> bool {
    <P::Region as Region>::parse(code).is_some()
}

impl KindSample {
    /// A sample of kind `K` on provider `P`. `declare` receives the builder, the region
    /// (parsed with the provider's [`Region::parse`]), the name of the resource under
    /// test and the variant. Neither variant is supported until said with
    /// [`mutable`](Self::mutable) and [`replace`](Self::replace).
    pub fn new<P, K>(
        declare: impl Fn(&mut FleetBuilder, P::Region, &str, Variant) + Send + Sync + 'static,
    ) -> Self
    where
        P: Provider + Supports<K>,
        K: Kind,
    {
        let declare: DeclareFn = Arc::new(move |fleet, code, name, variant| {
            if let Some(region) = <P::Region as Region>::parse(code) {
                declare(fleet, region, name, variant);
            }
        });
        KindSample {
            provider: P::ID,
            kind: K::ID,
            mutable: false,
            replace: false,
            parse_region: parses::<P>,
            declare,
        }
    }

    /// The same sample, saying whether it has a [`Variant::Mutable`].
    pub fn mutable(mut self, supported: bool) -> Self {
        self.mutable = supported;
        self
    }

    /// The same sample, saying whether it has a [`Variant::Replace`].
    pub fn replace(mut self, supported: bool) -> Self {
        self.replace = supported;
        self
    }

    /// Whether `code` is a region of the sample's provider.
    pub fn region_parses(&self, code: &str) -> bool {
        (self.parse_region)(code)
    }

    /// Whether the sample supports `variant`.
    pub fn supports(&self, variant: Variant) -> bool {
        match variant {
            Variant::Base => true,
            Variant::Mutable => self.mutable,
            Variant::Replace => self.replace,
        }
    }
}
