//! Providers, their regions, and which kinds each one realises.
//!
//! A region is a value of its provider's own enum, so a region of one cloud cannot be
//! given to another, and a region that does not exist cannot be written:
//!
//! ```
//! use infra_core::{prelude::Fleet, prelude::AwsRegion, prelude::ScalewayRegion, kinds::{ObjectStore, SecurityGroup}};
//! fn place(fleet: &mut infra_core::prelude::FleetBuilder, group: SecurityGroup) {
//!     fleet.declare(AwsRegion::EuWest3, "web", group);
//!     fleet.declare(ScalewayRegion::PlWaw, "assets", ObjectStore::new());
//! }
//! ```
//!
//! ```compile_fail
//! use infra_core::{prelude::Fleet, prelude::ScalewayRegion, kinds::SecurityGroup};
//! fn place(fleet: &mut infra_core::prelude::FleetBuilder, group: SecurityGroup) {
//!     // `securityGroup` is an AWS kind; a Scaleway region places it on Scaleway.
//!     fleet.declare(ScalewayRegion::FrPar, "web", group);
//! }
//! ```
//!
//! ```compile_fail
//! use infra_core::prelude::AwsRegion;
//! let _ = AwsRegion::PlWaw; // AWS has no Warsaw region
//! ```
//!
//! Every resource is placed: `declare` has no form without a region.
//!
//! ```compile_fail
//! use infra_core::{prelude::Fleet, kinds::ObjectStore};
//! let mut fleet = Fleet::builder("shop");
//! fleet.declare("assets", ObjectStore::new());
//! ```

use std::fmt;
use std::hash::Hash;

use crate::Kind;

/// A cloud (or any other target a backend reaches).
pub trait Provider: Copy + Default + fmt::Debug + Send + Sync + 'static {
    /// The provider's id, lowercase (`aws`).
    const ID: &'static str;
    /// Where this provider places resources.
    type Region: Region<Provider = Self>;
}

/// A region of one provider.
pub trait Region: Copy + Eq + Ord + Hash + fmt::Debug + Send + Sync + 'static {
    /// The provider the region belongs to.
    type Provider: Provider<Region = Self>;

    /// The provider's own code for the region (`eu-west-3`).
    fn code(&self) -> &'static str;

    /// Every region of the provider.
    fn all() -> &'static [Self];

    /// The region with this code.
    fn parse(code: &str) -> Option<Self> {
        Self::all().iter().copied().find(|r| r.code() == code)
    }
}

/// The provider realises kind `K`: resources of that kind can be declared on it.
///
/// A kind a provider lacks has no implementation, so declaring one does not compile.
#[diagnostic::on_unimplemented(
    message = "provider `{Self}` has no kind `{K}`",
    label = "this region's provider does not realise that kind",
    note = "each provider lists its kinds with `impl Supports<Kind> for Provider`"
)]
pub trait Supports<K: Kind>: Provider {}

macro_rules! regions {
    (
        $(#[$meta:meta])*
        $name:ident for $provider:ident { $( $(#[$vmeta:meta])* $variant:ident => $code:literal ),* $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* #[doc = concat!("`", $code, "`")] $variant, )*
        }

        impl Region for $name {
            type Provider = $provider;

            fn code(&self) -> &'static str {
                match self {
                    $( $name::$variant => $code, )*
                }
            }

            fn all() -> &'static [Self] {
                &[ $( $name::$variant, )* ]
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.code())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let code = String::deserialize(d)?;
                <$name as Region>::parse(&code).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "unknown {} region {code:?}", <$provider as Provider>::ID
                    ))
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.code())
            }
        }
    };
}

/// Amazon Web Services.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Aws;

impl Provider for Aws {
    const ID: &'static str = "aws";
    type Region = AwsRegion;
}

/// Google Cloud.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Gcp;

impl Provider for Gcp {
    const ID: &'static str = "gcp";
    type Region = GcpRegion;
}

/// Scaleway.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Scaleway;

impl Provider for Scaleway {
    const ID: &'static str = "scaleway";
    type Region = ScalewayRegion;
}

regions! {
    /// An AWS region.
    AwsRegion for Aws {
        UsEast1 => "us-east-1",
        UsEast2 => "us-east-2",
        UsWest1 => "us-west-1",
        UsWest2 => "us-west-2",
        CaCentral1 => "ca-central-1",
        SaEast1 => "sa-east-1",
        EuWest1 => "eu-west-1",
        EuWest2 => "eu-west-2",
        EuWest3 => "eu-west-3",
        EuCentral1 => "eu-central-1",
        EuCentral2 => "eu-central-2",
        EuNorth1 => "eu-north-1",
        EuSouth1 => "eu-south-1",
        EuSouth2 => "eu-south-2",
        ApNortheast1 => "ap-northeast-1",
        ApNortheast2 => "ap-northeast-2",
        ApNortheast3 => "ap-northeast-3",
        ApSoutheast1 => "ap-southeast-1",
        ApSoutheast2 => "ap-southeast-2",
        ApSouth1 => "ap-south-1",
        AfSouth1 => "af-south-1",
        MeSouth1 => "me-south-1",
        IlCentral1 => "il-central-1",
    }
}

regions! {
    /// A Google Cloud region.
    GcpRegion for Gcp {
        UsCentral1 => "us-central1",
        UsEast1 => "us-east1",
        UsEast4 => "us-east4",
        UsWest1 => "us-west1",
        UsWest2 => "us-west2",
        NorthamericaNortheast1 => "northamerica-northeast1",
        SouthamericaEast1 => "southamerica-east1",
        EuropeWest1 => "europe-west1",
        EuropeWest2 => "europe-west2",
        EuropeWest3 => "europe-west3",
        EuropeWest4 => "europe-west4",
        EuropeWest6 => "europe-west6",
        EuropeWest9 => "europe-west9",
        EuropeNorth1 => "europe-north1",
        EuropeCentral2 => "europe-central2",
        AsiaEast1 => "asia-east1",
        AsiaNortheast1 => "asia-northeast1",
        AsiaSoutheast1 => "asia-southeast1",
        AustraliaSoutheast1 => "australia-southeast1",
    }
}

regions! {
    /// A Scaleway region.
    ScalewayRegion for Scaleway {
        FrPar => "fr-par",
        NlAms => "nl-ams",
        PlWaw => "pl-waw",
    }
}
