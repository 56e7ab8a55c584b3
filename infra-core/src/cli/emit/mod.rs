//! Declarations printed as Rust, to paste into a fleet: what `import-tfstate`,
//! `import` and `discover --emit-rust` print for what they took in.
//!
//! The pieces every declaration is made of live here (a region as its enum variant, a
//! struct literal, a string); [`reported`] writes the spec of a resource from what its
//! cloud reports, so that declaring exactly that makes the next plan of the resource
//! say "No changes"; `import-tfstate` writes its own from a Terraform state's
//! attributes (`tfstate::declare`).
//!
//! Emitted code assumes `use infra_core::{kinds::*, prelude::*};` and a
//! `FleetBuilder` named `fleet`. A reference to another resource is a variable holding
//! its key, named after the resource ([`variable`]); the declarations that define such
//! variables come before those that use them, and the variables they use without
//! defining them are listed ([`Need`]) for the fleet to provide.

pub(super) mod discovered;
pub(super) mod reported;

use crate::{AwsRegion, GcpRegion, LedgerRow, Region, ScalewayRegion};

/// `fleet.declare(REGION, "name", SPEC);`, bound to `binding` when given.
pub(super) fn declare(row: &LedgerRow, spec: &str, binding: Option<&str>) -> String {
    let call = format!("fleet.declare({}, {:?}, {spec});", region(row), row.name);
    match binding {
        Some(var) => format!("let {var} = {call}"),
        None => call,
    }
}

/// The region's enum variant (`AwsRegion::EuWest3`), or a comment naming it when this
/// build knows no such region.
pub(super) fn region(row: &LedgerRow) -> String {
    let code = row.region.as_str();
    let variant = match row.provider.as_str() {
        "aws" => AwsRegion::parse(code).map(|r| format!("AwsRegion::{r:?}")),
        "gcp" => GcpRegion::parse(code).map(|r| format!("GcpRegion::{r:?}")),
        "scaleway" => ScalewayRegion::parse(code).map(|r| format!("ScalewayRegion::{r:?}")),
        _ => None,
    };
    variant.unwrap_or_else(|| format!("/* the region {code} */"))
}

/// A struct literal, one field a line.
pub(super) fn literal(name: &str, fields: &[(&str, String)]) -> String {
    let body: String = fields
        .iter()
        .map(|(f, v)| format!("    {f}: {v},\n"))
        .collect();
    format!("{name} {{\n{body}}}")
}

/// A string literal made an owned `String`.
pub(super) fn owned(text: &str) -> String {
    format!("{text:?}.to_owned()")
}

/// An environment variable named after a resource: `db/password` → `DB_PASSWORD`.
pub(super) fn env_var(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The variable holding the key of the resource named `name`: `web-1` → `web_1`; a
/// name that is no identifier as it is gets a prefix (`r_1web`) or a suffix
/// (`type_`).
pub(super) fn variable(name: &str) -> String {
    let mut var: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if !var.starts_with(|c: char| c.is_ascii_lowercase()) {
        var.insert_str(0, "r_");
    }
    const KEYWORDS: &[&str] = &[
        "as", "async", "await", "box", "break", "const", "continue", "crate", "dyn", "else",
        "enum", "extern", "false", "fleet", "fn", "for", "gen", "if", "impl", "in", "let", "loop",
        "match", "mod", "move", "mut", "pub", "ref", "return", "self", "static", "struct", "super",
        "trait", "true", "try", "type", "unsafe", "use", "where", "while", "yield",
    ];
    if KEYWORDS.contains(&var.as_str()) {
        var.push('_');
    }
    var
}

/// A variable the emitted declarations use without defining it: the key of a resource
/// they refer to (declared in the fleet already, or not at all), or a value only the
/// fleet's author knows.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub(super) struct Need {
    /// The variable's name.
    pub(super) var: String,
    /// Its Rust type (`Key<SecurityGroup>`, `SecretSource`).
    #[serde(rename = "type")]
    pub(super) ty: String,
    /// What it stands for, in a sentence.
    pub(super) what: String,
}

#[cfg(test)]
mod tests {
    use super::variable;

    #[test]
    fn a_variable_is_named_after_its_resource_and_is_always_an_identifier() {
        assert_eq!(variable("web-1"), "web_1");
        assert_eq!(variable("db/password"), "db_password");
        assert_eq!(variable("1st"), "r_1st");
        assert_eq!(variable("type"), "type_");
        assert_eq!(variable("fleet"), "fleet_");
    }
}
