//! Reading a Terraform state file, format version 4 (Terraform 0.12 and later): each
//! resource instance with its address, its mode, its type and its attributes.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The version of the state format this reads.
const VERSION: u64 = 4;

/// One instance of a resource the state lists.
#[derive(Clone, Debug)]
pub(super) struct Instance {
    /// Its address in Terraform's words: `module.net.aws_s3_bucket.logs["eu"]`.
    pub(super) address: String,
    /// Whether Terraform manages it (`mode: "managed"`), not merely reads it (`data`).
    pub(super) managed: bool,
    /// Its Terraform type (`aws_s3_bucket`).
    pub(super) kind: String,
    /// Its attributes, as the state holds them.
    pub(super) attributes: Map<String, Value>,
}

/// What a state file holds.
#[derive(Clone, Debug)]
pub(super) struct StateFile {
    /// The Terraform version that wrote it.
    pub(super) terraform_version: Option<String>,
    /// Every resource instance, in the file's order.
    pub(super) instances: Vec<Instance>,
}

#[derive(Deserialize)]
struct Raw {
    terraform_version: Option<String>,
    #[serde(default)]
    resources: Vec<RawResource>,
}

#[derive(Deserialize)]
struct RawResource {
    #[serde(default)]
    module: Option<String>,
    mode: String,
    #[serde(rename = "type")]
    kind: String,
    name: String,
    #[serde(default)]
    instances: Vec<RawInstance>,
}

#[derive(Deserialize)]
struct RawInstance {
    #[serde(default)]
    index_key: Option<Value>,
    #[serde(default)]
    attributes: Map<String, Value>,
}

/// Reads and checks a state file; an error names the file and the line.
pub(super) fn read(path: &Path) -> Result<StateFile, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| located(path, &e, "not JSON"))?;
    match value.get("version").map(Value::as_u64) {
        Some(Some(VERSION)) => {}
        None => {
            return Err(format!(
                "{shown}:1: not a Terraform state file: it has no \"version\""
            ));
        }
        Some(_) => {
            return Err(format!(
                "{shown}:{}: Terraform state version {}; import-tfstate reads version {VERSION} \
                 (written by Terraform 0.12 and later: `terraform state pull` prints it)",
                line_of(&text, "\"version\""),
                value["version"]
            ));
        }
    }
    let raw: Raw = serde_json::from_str(&text)
        .map_err(|e| located(path, &e, "not a Terraform state of version 4"))?;
    Ok(StateFile {
        terraform_version: raw.terraform_version,
        instances: raw.resources.into_iter().flat_map(instances).collect(),
    })
}

fn instances(r: RawResource) -> Vec<Instance> {
    let prefix = match (&r.module, r.mode.as_str()) {
        (Some(m), "data") => format!("{m}.data."),
        (Some(m), _) => format!("{m}."),
        (None, "data") => "data.".to_owned(),
        (None, _) => String::new(),
    };
    let managed = r.mode == "managed";
    r.instances
        .into_iter()
        .map(|i| Instance {
            address: format!(
                "{prefix}{}.{}{}",
                r.kind,
                r.name,
                index(i.index_key.as_ref())
            ),
            managed,
            kind: r.kind.clone(),
            attributes: i.attributes,
        })
        .collect()
}

/// An instance's index as Terraform writes it: `[0]`, `["eu"]`, or nothing.
fn index(key: Option<&Value>) -> String {
    match key {
        None | Some(Value::Null) => String::new(),
        Some(key) => format!("[{key}]"),
    }
}

/// A serde error as `FILE:LINE:COLUMN: what: why`.
fn located(path: &Path, e: &serde_json::Error, what: &str) -> String {
    let message = e.to_string();
    let message = message.split(" at line ").next().unwrap_or(&message);
    format!(
        "{}:{}:{}: {what}: {message}",
        path.display(),
        e.line(),
        e.column()
    )
}

/// The 1-based line of the first occurrence of `needle` (1 if none).
fn line_of(text: &str, needle: &str) -> usize {
    text.find(needle)
        .map_or(1, |at| text[..at].matches('\n').count() + 1)
}

#[cfg(test)]
mod tests {
    use super::{index, line_of};
    use serde_json::json;

    #[test]
    fn indices_are_written_as_terraform_writes_them() {
        assert_eq!(index(None), "");
        assert_eq!(index(Some(&json!(0))), "[0]");
        assert_eq!(index(Some(&json!("eu"))), "[\"eu\"]");
    }

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("{\n  \"version\": 3\n}", "\"version\""), 2);
        assert_eq!(line_of("{}", "\"version\""), 1);
    }
}
