//! The shape a published machine configuration must have before it is sealed: the
//! YAML a Talos node accepts from `apply-config`.
//!
//! A configuration is one or more YAML documents (separated by `---`). Exactly one of
//! them is the `v1alpha1` machine configuration: a mapping whose `version` is
//! `v1alpha1`, whose `machine` is a mapping, and whose other top-level keys are among
//! those Talos's `v1alpha1` decoder knows (`debug`, `persist`, `cluster`, the last a
//! mapping too); Talos refuses a key it does not know. Every other document is a
//! typed document of a multi-document configuration: a mapping naming its
//! `apiVersion` and `kind`. Empty documents (a stray `---`) are skipped.
//!
//! This is a check of shape, not a validation of every field: it refuses an empty
//! file, bytes that are not YAML, and YAML that no node would take as a machine
//! configuration, before anything is recorded. A refusal never quotes the
//! configuration (it holds the cluster's secrets): it says which document and which
//! rule, and for a syntax error the line and column.

use serde::Deserialize as _;
use serde_norway::Value;

/// The top-level keys of the `v1alpha1` document.
const V1ALPHA1_KEYS: &[&str] = &["version", "debug", "persist", "machine", "cluster"];

/// Why bytes are not a Talos machine configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineConfigProblem {
    /// Nothing, or only whitespace and comments.
    #[error("it is empty")]
    Empty,
    /// Not UTF-8 text.
    #[error("it is not UTF-8 text")]
    NotText,
    /// Not YAML; where the parser stopped, if it said.
    #[error("it is not YAML: {}", at_line(*.at))]
    NotYaml {
        /// The line and column (from 1) where parsing failed.
        at: Option<(usize, usize)>,
    },
    /// A document that is not a mapping of keys to values.
    #[error("document {document} is not a mapping of keys to values")]
    NotMapping {
        /// Which document, from 1.
        document: usize,
    },
    /// A document that is neither the `v1alpha1` one nor a typed one.
    #[error(
        "document {document} is neither the v1alpha1 machine configuration (`version: \
         v1alpha1`) nor a typed document (`apiVersion` and `kind`)"
    )]
    Untyped {
        /// Which document, from 1.
        document: usize,
    },
    /// No `v1alpha1` document.
    #[error("it holds no v1alpha1 machine configuration (a document with `version: v1alpha1`)")]
    NoV1alpha1,
    /// More than one `v1alpha1` document.
    #[error("documents {first} and {second} are both v1alpha1 machine configurations")]
    TwoV1alpha1 {
        /// The first, from 1.
        first: usize,
        /// The second.
        second: usize,
    },
    /// The `v1alpha1` document has no `machine` mapping.
    #[error("the v1alpha1 machine configuration (document {document}) has no `machine` mapping")]
    NoMachine {
        /// Which document, from 1.
        document: usize,
    },
    /// A top-level key of the `v1alpha1` document is not a mapping where one is needed.
    #[error(
        "in the v1alpha1 machine configuration (document {document}), `{key}` is not a mapping"
    )]
    KeyNotMapping {
        /// Which document, from 1.
        document: usize,
        /// The key (`cluster`: `machine` missing or not a mapping is `NoMachine`).
        key: &'static str,
    },
    /// A top-level switch of the `v1alpha1` document is not `true` or `false`.
    #[error(
        "in the v1alpha1 machine configuration (document {document}), `{key}` is not true or false"
    )]
    NotBoolean {
        /// Which document, from 1.
        document: usize,
        /// The key (`debug` or `persist`).
        key: &'static str,
    },
    /// The `v1alpha1` document has top-level keys Talos does not know; they are
    /// counted, not named, since a configuration's text is never repeated.
    #[error(
        "the v1alpha1 machine configuration (document {document}) has {count} top-level \
         key(s) Talos does not know (it knows version, debug, persist, machine, cluster)"
    )]
    UnknownKeys {
        /// Which document, from 1.
        document: usize,
        /// How many.
        count: usize,
    },
}

fn at_line(at: Option<(usize, usize)>) -> String {
    match at {
        Some((line, column)) => format!("a syntax error at line {line}, column {column}"),
        None => "a syntax error".to_owned(),
    }
}

/// Checks that `bytes` have the shape of a Talos machine configuration (see the
/// module's documentation).
///
/// # Errors
///
/// The first rule they break.
pub fn check_machine_config(bytes: &[u8]) -> Result<(), MachineConfigProblem> {
    let text = std::str::from_utf8(bytes).map_err(|_| MachineConfigProblem::NotText)?;
    let mut v1alpha1 = None;
    let mut documents = 0;
    for (n, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let number = n + 1;
        let value = Value::deserialize(document).map_err(|e| MachineConfigProblem::NotYaml {
            at: e.location().map(|l| (l.line(), l.column())),
        })?;
        if value.is_null() {
            continue;
        }
        documents += 1;
        let Value::Mapping(map) = value else {
            return Err(MachineConfigProblem::NotMapping { document: number });
        };
        if map.get("version").and_then(Value::as_str) == Some("v1alpha1") {
            if let Some(first) = v1alpha1 {
                return Err(MachineConfigProblem::TwoV1alpha1 {
                    first,
                    second: number,
                });
            }
            v1alpha1 = Some(number);
            check_v1alpha1(&map, number)?;
        } else if !(map.get("apiVersion").is_some_and(Value::is_string)
            && map.get("kind").is_some_and(Value::is_string))
        {
            return Err(MachineConfigProblem::Untyped { document: number });
        }
    }
    if documents == 0 {
        return Err(MachineConfigProblem::Empty);
    }
    v1alpha1.map(|_| ()).ok_or(MachineConfigProblem::NoV1alpha1)
}

fn check_v1alpha1(
    map: &serde_norway::Mapping,
    document: usize,
) -> Result<(), MachineConfigProblem> {
    if !map.get("machine").is_some_and(Value::is_mapping) {
        return Err(MachineConfigProblem::NoMachine { document });
    }
    for key in ["debug", "persist"] {
        if map.get(key).is_some_and(|v| !v.is_bool() && !v.is_null()) {
            return Err(MachineConfigProblem::NotBoolean { document, key });
        }
    }
    if map
        .get("cluster")
        .is_some_and(|v| !v.is_mapping() && !v.is_null())
    {
        return Err(MachineConfigProblem::KeyNotMapping {
            document,
            key: "cluster",
        });
    }
    let unknown = map
        .keys()
        .filter(|k| !k.as_str().is_some_and(|k| V1ALPHA1_KEYS.contains(&k)))
        .count();
    if unknown > 0 {
        return Err(MachineConfigProblem::UnknownKeys {
            document,
            count: unknown,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{MachineConfigProblem as P, check_machine_config as check};

    #[test]
    fn shapes_talos_takes_pass() {
        check(b"version: v1alpha1\nmachine:\n  type: worker\n").unwrap();
        check(b"version: v1alpha1\ndebug: false\nmachine:\n  type: worker\ncluster:\n  id: x\n")
            .unwrap();
        check(
            b"version: v1alpha1\nmachine: {}\n---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: x\n---\n",
        )
        .unwrap();
    }

    #[test]
    fn each_rule_refuses_and_never_quotes() {
        let secret = "tok-5e3f-never-echoed";
        let cases: Vec<(String, P)> = vec![
            (String::new(), P::Empty),
            ("# only a comment\n\n".into(), P::Empty),
            (
                format!("machine: [{secret}\n"),
                P::NotYaml { at: Some((2, 1)) },
            ),
            (format!("- {secret}\n"), P::NotMapping { document: 1 }),
            (
                format!("machine:\n  token: {secret}\n"),
                P::Untyped { document: 1 },
            ),
            ("apiVersion: v1alpha1\nkind: Foo\n".into(), P::NoV1alpha1),
            (
                "version: v1alpha1\nmachine: {}\n---\nversion: v1alpha1\nmachine: {}\n".into(),
                P::TwoV1alpha1 {
                    first: 1,
                    second: 2,
                },
            ),
            (
                format!("version: v1alpha1\nmachine: {secret}\n"),
                P::NoMachine { document: 1 },
            ),
            (
                format!("version: v1alpha1\nmachine: {{}}\ncluster: {secret}\n"),
                P::KeyNotMapping {
                    document: 1,
                    key: "cluster",
                },
            ),
            (
                format!("version: v1alpha1\nmachine: {{}}\n{secret}: 1\n"),
                P::UnknownKeys {
                    document: 1,
                    count: 1,
                },
            ),
        ];
        for (text, expected) in cases {
            let got = check(text.as_bytes()).unwrap_err();
            assert_eq!(got, expected, "{text:?}");
            assert!(!got.to_string().contains(secret), "{got}");
        }
        assert_eq!(check(&[0xff, 0xfe]).unwrap_err(), P::NotText);
    }
}
