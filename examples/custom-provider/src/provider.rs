//! The provider and its regions.
//!
//! A provider is a zero-sized type with an id; its regions are an enum of its own, so a
//! region of this provider cannot be handed to another and a region the service does
//! not run cannot be written.

use std::fmt;

use infra_core::prelude::{Provider, Region};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The DNS service: a small managed-DNS API with three regions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dns;

impl Provider for Dns {
    const ID: &'static str = "dns";
    type Region = DnsRegion;
}

/// Where the DNS service keeps records. Each region is a separate store: a record
/// created in `eu` is neither listed nor readable in `us`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DnsRegion {
    /// `global`: the anycast control plane.
    Global,
    /// `eu`: records kept in the European Union.
    Eu,
    /// `us`: records kept in the United States.
    Us,
}

impl Region for DnsRegion {
    type Provider = Dns;

    fn code(&self) -> &'static str {
        match self {
            DnsRegion::Global => "global",
            DnsRegion::Eu => "eu",
            DnsRegion::Us => "us",
        }
    }

    fn all() -> &'static [Self] {
        &[DnsRegion::Global, DnsRegion::Eu, DnsRegion::Us]
    }
}

impl fmt::Display for DnsRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl Serialize for DnsRegion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

impl<'de> Deserialize<'de> for DnsRegion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let code = String::deserialize(d)?;
        DnsRegion::parse(&code)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown dns region {code:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_region_parses_back_from_its_code() {
        for region in DnsRegion::all() {
            assert_eq!(DnsRegion::parse(region.code()), Some(*region));
            let json = serde_json::to_string(region).unwrap();
            assert_eq!(serde_json::from_str::<DnsRegion>(&json).unwrap(), *region);
        }
        assert_eq!(DnsRegion::parse("eu-west-3"), None);
    }
}
