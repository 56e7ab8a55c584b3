//! The Rust declaration of a resource taken over from a Terraform state, to paste into
//! the fleet, in the style of the examples, written with the pieces every printed
//! declaration shares (`cli::emit`). What the state file says plainly is filled in; a
//! reference to another resource (a security group, a password's secret) and what
//! would need a translation (rules, policies) is left as a comment for a person to fill
//! in, so that the code does not compile until they do.

use serde_json::{Map, Value};

use super::super::emit::{declare, env_var, literal};
use super::types::text;
use crate::LedgerRow;

/// `fleet.declare(REGION, "name", SPEC);`
pub(super) fn declaration(row: &LedgerRow, attrs: &Map<String, Value>) -> String {
    declare(row, &spec(row, attrs), None)
}

fn unknown(fields: &[&'static str]) -> Vec<(&'static str, String)> {
    fields
        .iter()
        .map(|f| (*f, "Partial::Unknown".to_owned()))
        .collect()
}

fn string(attrs: &Map<String, Value>, key: &str) -> String {
    format!("{:?}.into()", text(attrs, key).unwrap_or_default())
}

fn spec(row: &LedgerRow, attrs: &Map<String, Value>) -> String {
    match row.kind.as_str() {
        "objectStore" => "ObjectStore::new()".to_owned(),
        "secrets" => format!("Secrets::from_env({:?})", env_var(&row.name)),
        "queues" => {
            let fifo = attrs
                .get("fifo_queue")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let mut fields = vec![("fifo", format!("Expr::lit({fifo})"))];
            fields.extend(unknown(&[
                "visibility_timeout_seconds",
                "retention_seconds",
                "dead_letter",
                "max_receive_count",
                "tags",
            ]));
            literal("Queues", &fields)
        }
        "postgres" => format!(
            "Postgres::classic(PostgresClassic {{ engine_version: {:?}, instance_class: {:?}, master_username: {:?}, master_password: /* the key of the secret holding its master password */ }})",
            major(&text(attrs, "engine_version").unwrap_or_default()),
            text(attrs, "instance_class").unwrap_or_default(),
            text(attrs, "username").unwrap_or_default(),
        ),
        "awsInstance" => format!(
            "AwsInstance::new(Image::Ami({:?}.into()), {:?}.parse().expect(\"an instance type\"), /* the key of its security group */)",
            text(attrs, "ami").unwrap_or_default(),
            text(attrs, "instance_type").unwrap_or_default(),
        ),
        "compute" => compute(attrs),
        other => other_spec(other, attrs),
    }
}

fn other_spec(kind: &str, attrs: &Map<String, Value>) -> String {
    match kind {
        "s3Bucket" => literal(
            "S3Bucket",
            &unknown(&["versioning", "object_lock", "block_public_access", "tags"]),
        ),
        "imageRegistry" => literal(
            "ImageRegistry",
            &unknown(&["scan_on_push", "immutable_tags", "tags"]),
        ),
        "securityGroup" => {
            let mut fields = vec![
                ("description", string(attrs, "description")),
                (
                    "vpc_id",
                    format!(
                        "Partial::Known(Expr::lit({:?}.to_owned()))",
                        text(attrs, "vpc_id").unwrap_or_default()
                    ),
                ),
                ("ingress", "/* its inbound rules */".to_owned()),
            ];
            fields.extend(unknown(&["egress", "tags"]));
            literal("SecurityGroup", &fields)
        }
        "iam" => {
            let mut fields = vec![
                ("policies", "/* the policies it is granted */".to_owned()),
                (
                    "assumed_by",
                    "/* the services that may act as it */".to_owned(),
                ),
            ];
            fields.extend(unknown(&["description", "tags"]));
            literal("Iam", &fields)
        }
        other => format!("/* a {other} */"),
    }
}

fn compute(attrs: &Map<String, Value>) -> String {
    let code = match (text(attrs, "s3_bucket"), text(attrs, "s3_key")) {
        (Some(bucket), Some(key)) => format!("s3://{bucket}/{key}"),
        _ => text(attrs, "image_uri")
            .or_else(|| text(attrs, "filename"))
            .unwrap_or_default(),
    };
    let role = if text(attrs, "role").is_some_and(|r| !r.is_empty()) {
        "Some(/* the key of the iam it runs as */)".to_owned()
    } else {
        "None".to_owned()
    };
    let mut fields = vec![
        ("runtime", string(attrs, "runtime")),
        ("handler", string(attrs, "handler")),
        ("code", format!("{code:?}.into()")),
    ];
    fields.extend(unknown(&[
        "code_sha256",
        "memory_mb",
        "timeout_seconds",
        "environment",
        "secret_environment",
    ]));
    fields.push(("role", role));
    fields.extend(unknown(&["tags"]));
    literal("Compute", &fields)
}

/// The major version of an engine version (`16.3` → `16`).
fn major(version: &str) -> &str {
    version.split('.').next().unwrap_or(version)
}
