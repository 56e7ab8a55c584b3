//! Which Terraform resource types this tool's kinds realise, and how a resource's name
//! and region are read from its attributes.
//!
//! The name is the one the cloud knows the resource by (the one a fleet declares it
//! under); the region comes from the `region` attribute, else from the `arn`, else —
//! for what an ARN does not place, an IAM role — from the fleet's own declaration of
//! that name, or its only region of the provider.

use serde_json::{Map, Value};

use super::file::Instance;
use crate::{Fleet, LedgerRow};

/// Where a Terraform resource's name is.
#[derive(Clone, Copy)]
enum Name {
    /// In this attribute.
    Attribute(&'static str),
    /// In this tag (`tags`).
    Tag(&'static str),
}

/// One Terraform type: the provider and the kinds that realise it (the first unless the
/// fleet declares the name under another), and where its name is.
struct Row {
    terraform: &'static str,
    provider: &'static str,
    kinds: &'static [&'static str],
    name: Name,
}

const TABLE: &[Row] = &[
    Row {
        terraform: "aws_s3_bucket",
        provider: "aws",
        kinds: &["objectStore", "s3Bucket"],
        name: Name::Attribute("bucket"),
    },
    Row {
        terraform: "aws_sqs_queue",
        provider: "aws",
        kinds: &["queues"],
        name: Name::Attribute("name"),
    },
    Row {
        terraform: "aws_db_instance",
        provider: "aws",
        kinds: &["postgres"],
        name: Name::Attribute("identifier"),
    },
    Row {
        terraform: "aws_lambda_function",
        provider: "aws",
        kinds: &["compute"],
        name: Name::Attribute("function_name"),
    },
    Row {
        terraform: "aws_secretsmanager_secret",
        provider: "aws",
        kinds: &["secrets"],
        name: Name::Attribute("name"),
    },
    Row {
        terraform: "aws_ecr_repository",
        provider: "aws",
        kinds: &["imageRegistry"],
        name: Name::Attribute("name"),
    },
    Row {
        terraform: "aws_instance",
        provider: "aws",
        kinds: &["awsInstance"],
        name: Name::Tag("Name"),
    },
    Row {
        terraform: "aws_security_group",
        provider: "aws",
        kinds: &["securityGroup"],
        name: Name::Attribute("name"),
    },
    Row {
        terraform: "aws_iam_role",
        provider: "aws",
        kinds: &["iam"],
        name: Name::Attribute("name"),
    },
];

/// The ledger row a Terraform resource instance would have in this fleet, or why it
/// has none.
pub(super) fn locate(instance: &Instance, fleet: &Fleet) -> Result<LedgerRow, String> {
    if !instance.managed {
        return Err("a data source: Terraform reads it, it does not manage it".into());
    }
    let row = TABLE
        .iter()
        .find(|r| r.terraform == instance.kind)
        .ok_or_else(|| {
            format!(
                "no kind of this tool realises Terraform type {}",
                instance.kind
            )
        })?;
    let attrs = &instance.attributes;
    refuse_engine(&instance.kind, attrs)?;
    let name = match row.name {
        Name::Attribute(a) => text(attrs, a),
        Name::Tag(t) => attrs
            .get("tags")
            .and_then(|tags| tags.get(t))
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
    .filter(|n| !n.is_empty())
    .ok_or_else(|| match row.name {
        Name::Attribute(a) => format!("its state has no `{a}`, the name the cloud knows it by"),
        Name::Tag(t) => format!("it has no `{t}` tag, the name the cloud knows it by"),
    })?;
    let declared = fleet.resources().find(|r| {
        let rf = r.reference();
        rf.provider == row.provider && row.kinds.contains(&rf.kind) && rf.name == name
    });
    let kind = declared.map_or(row.kinds[0], |r| r.reference().kind);
    let region = region(attrs)
        .or_else(|| declared.map(|r| r.region().to_owned()))
        .or_else(|| only_region(fleet, row.provider))
        .ok_or_else(|| {
            format!(
                "its region cannot be told: the state gives none (no `region`, none in its \
                 `arn`), and the fleet does not declare `{name}`"
            )
        })?;
    Ok(LedgerRow {
        provider: row.provider.to_owned(),
        kind: kind.to_owned(),
        name,
        region,
    })
}

/// A database engine no kind of this tool realises.
fn refuse_engine(kind: &str, attrs: &Map<String, Value>) -> Result<(), String> {
    match (kind, text(attrs, "engine")) {
        ("aws_db_instance", Some(engine)) if engine != "postgres" => Err(format!(
            "its engine is {engine}: the postgres kind realises only PostgreSQL"
        )),
        _ => Ok(()),
    }
}

/// A string attribute.
pub(super) fn text(attrs: &Map<String, Value>, key: &str) -> Option<String> {
    attrs.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The region the attributes give: `region`, else the fourth part of the `arn`.
fn region(attrs: &Map<String, Value>) -> Option<String> {
    text(attrs, "region").filter(|r| !r.is_empty()).or_else(|| {
        let arn = text(attrs, "arn")?;
        arn.split(':')
            .nth(3)
            .filter(|r| !r.is_empty())
            .map(str::to_owned)
    })
}

/// The fleet's region for `provider`, when it declares resources in exactly one.
fn only_region(fleet: &Fleet, provider: &str) -> Option<String> {
    match fleet.regions().get(provider).map(Vec::as_slice) {
        Some([one]) => Some((*one).to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::region;
    use serde_json::json;

    #[test]
    fn the_region_comes_from_the_region_attribute_or_the_arn() {
        let attrs = |v: serde_json::Value| v.as_object().unwrap().clone();
        assert_eq!(
            region(&attrs(
                json!({"region": "eu-west-3", "arn": "arn:aws:sqs:us-east-1:1:q"})
            )),
            Some("eu-west-3".into())
        );
        assert_eq!(
            region(&attrs(json!({"arn": "arn:aws:sqs:us-east-1:1:q"}))),
            Some("us-east-1".into())
        );
        assert_eq!(
            region(&attrs(json!({"arn": "arn:aws:iam::1:role/r"}))),
            None
        );
    }
}
