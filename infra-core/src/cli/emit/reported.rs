//! The declaration of a resource from what its cloud reports: each field the cloud
//! reports is declared with the reported value, so that the next plan finds nothing to
//! change in it; a field it does not report is not compared by a plan, and is declared
//! as the fleet declares it already (for `import`), or left unsaid where it may be, or
//! given a value the code says is a stand-in.
//!
//! Each kind of this crate has its fields listed here with their Rust types ([`SCHEMAS`];
//! a test holds the list to each kind's own field table). A kind not listed (a custom
//! provider's) gets a comment instead of a declaration.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::{Need, declare, literal, owned, variable};
use crate::{Fleet, LedgerRow, Subject};

/// The Rust type of a field's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Bool,
    Int,
    OptInt,
    Str,
    /// A map of strings (tags, environment variables).
    Map,
    /// A set of strings.
    StrSet,
    Rules,
    Capacity,
    Image,
    InstanceType,
    Access,
    /// `Key<K>` of the kind with this id.
    Key(&'static str),
    /// `Option<Key<K>>`.
    OptKey(&'static str),
    /// `BTreeMap<String, Key<K>>`.
    KeyMap(&'static str),
    /// `SecretSource`.
    Source,
}

impl Ty {
    /// Whether the value sits in an `Expr` (a key or a secret's source does not).
    fn in_expr(self) -> bool {
        !matches!(
            self,
            Ty::Key(_) | Ty::OptKey(_) | Ty::KeyMap(_) | Ty::Source
        )
    }
}

/// One field: its serialised name, its type, and whether it must be said (a plain
/// `Expr` or key) or may be left unsaid (`Partial`).
struct Field {
    json: &'static str,
    ty: Ty,
    required: bool,
}

const fn req(json: &'static str, ty: Ty) -> Field {
    Field {
        json,
        ty,
        required: true,
    }
}

const fn opt(json: &'static str, ty: Ty) -> Field {
    Field {
        json,
        ty,
        required: false,
    }
}

/// A kind: its id, its Rust type, and its fields in declaration order.
struct Schema {
    id: &'static str,
    rust: &'static str,
    fields: &'static [Field],
}

const NAMESPACE: &[Field] = &[
    opt("description", Ty::Str),
    opt("environment", Ty::Map),
    opt("secretEnvironment", Ty::KeyMap("secrets")),
    opt("tags", Ty::StrSet),
];

/// Every kind of this crate.
const SCHEMAS: &[Schema] = &[
    Schema {
        id: "iam",
        rust: "Iam",
        fields: &[
            req("policies", Ty::StrSet),
            req("assumedBy", Ty::StrSet),
            opt("description", Ty::Str),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "objectStore",
        rust: "ObjectStore",
        fields: &[
            opt("versioning", Ty::Bool),
            opt("expireAfterDays", Ty::OptInt),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "compute",
        rust: "Compute",
        fields: &[
            req("runtime", Ty::Str),
            req("handler", Ty::Str),
            req("code", Ty::Str),
            opt("codeSha256", Ty::Str),
            opt("memoryMb", Ty::Int),
            opt("timeoutSeconds", Ty::Int),
            opt("environment", Ty::Map),
            opt("secretEnvironment", Ty::KeyMap("secrets")),
            req("role", Ty::OptKey("iam")),
            req("access", Ty::Access),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "queues",
        rust: "Queues",
        fields: &[
            req("fifo", Ty::Bool),
            opt("visibilityTimeoutSeconds", Ty::Int),
            opt("retentionSeconds", Ty::Int),
            opt("deadLetter", Ty::OptKey("queues")),
            opt("maxReceiveCount", Ty::Int),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "secrets",
        rust: "Secrets",
        fields: &[
            req("valueFrom", Ty::Source),
            opt("description", Ty::Str),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "imageRegistry",
        rust: "ImageRegistry",
        fields: &[
            opt("scanOnPush", Ty::Bool),
            opt("immutableTags", Ty::Bool),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "postgres",
        rust: "Postgres",
        fields: &[
            req("engineVersion", Ty::Str),
            req("capacity", Ty::Capacity),
            opt("storageGb", Ty::Int),
            req("masterUsername", Ty::Str),
            req("masterPassword", Ty::Key("secrets")),
            opt("backupRetentionDays", Ty::Int),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "s3Bucket",
        rust: "S3Bucket",
        fields: &[
            opt("versioning", Ty::Bool),
            opt("objectLock", Ty::Bool),
            opt("blockPublicAccess", Ty::Bool),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "securityGroup",
        rust: "SecurityGroup",
        fields: &[
            req("description", Ty::Str),
            opt("vpcId", Ty::Str),
            req("ingress", Ty::Rules),
            opt("egress", Ty::Rules),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "awsInstance",
        rust: "AwsInstance",
        fields: &[
            req("image", Ty::Image),
            req("instanceType", Ty::InstanceType),
            req("securityGroup", Ty::Key("securityGroup")),
            opt("subnetId", Ty::Str),
            opt("keyName", Ty::Str),
            opt("userData", Ty::Str),
            opt("tags", Ty::Map),
        ],
    },
    Schema {
        id: "functionNamespace",
        rust: "FunctionNamespace",
        fields: NAMESPACE,
    },
    Schema {
        id: "function",
        rust: "Function",
        fields: &[
            req("namespace", Ty::Key("functionNamespace")),
            req("runtime", Ty::Str),
            req("handler", Ty::Str),
            opt("memoryMb", Ty::Int),
            opt("minScale", Ty::Int),
            opt("maxScale", Ty::Int),
            opt("timeoutSeconds", Ty::Int),
            opt("sourceBucket", Ty::OptKey("s3Bucket")),
            opt("code", Ty::Str),
            opt("environment", Ty::Map),
            req("access", Ty::Access),
        ],
    },
    Schema {
        id: "containerNamespace",
        rust: "ContainerNamespace",
        fields: NAMESPACE,
    },
    Schema {
        id: "container",
        rust: "Container",
        fields: &[
            req("namespace", Ty::Key("containerNamespace")),
            req("image", Ty::Str),
            opt("port", Ty::Int),
            opt("cpuLimit", Ty::Int),
            opt("memoryLimitMb", Ty::Int),
            opt("minScale", Ty::Int),
            opt("maxScale", Ty::Int),
            opt("timeoutSeconds", Ty::Int),
            opt("environment", Ty::Map),
            opt("secretEnvironment", Ty::KeyMap("secrets")),
            req("access", Ty::Access),
        ],
    },
];

fn schema(kind: &str) -> Option<&'static Schema> {
    SCHEMAS.iter().find(|s| s.id == kind)
}

/// The Rust type of a kind (`SecurityGroup`), or the id itself for a kind not listed.
fn rust_type(kind: &str) -> &str {
    schema(kind).map_or(kind, |s| s.rust)
}

/// One resource taken in: where it is, what its cloud reports, and, when the fleet
/// declares it, the declaration's own values for what the cloud does not report.
pub(in crate::cli) struct Taken<'a> {
    pub(in crate::cli) row: &'a LedgerRow,
    /// The configuration the cloud reports (the marker stripped).
    pub(in crate::cli) reported: &'a Map<String, Value>,
    /// The declared spec settled as far as it can be (keys as handles), if declared.
    pub(in crate::cli) settled: Option<&'a Map<String, Value>>,
    /// The declared spec as it serialises (keys as `provider/kind/name`), if declared.
    pub(in crate::cli) declared: Option<&'a Map<String, Value>>,
}

/// Declarations, in an order where each variable is defined before it is used, and
/// the variables they use without defining them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::cli) struct Emitted {
    /// One declaration per resource taken in, in that order.
    pub(in crate::cli) declarations: Vec<(LedgerRow, String)>,
    pub(in crate::cli) needs: Vec<Need>,
}

impl Emitted {
    /// Every declaration, one after the other.
    pub(in crate::cli) fn code(&self) -> String {
        self.declarations
            .iter()
            .map(|(_, code)| format!("{code}\n"))
            .collect()
    }

    /// The lines that say what the code assumes, as Rust comments.
    pub(in crate::cli) fn preamble(&self) -> String {
        let mut out = String::from(
            "// with `use infra_core::{kinds::*, prelude::*};`, in the function that builds \
             the fleet (`fleet` is its FleetBuilder)\n",
        );
        for need in &self.needs {
            out.push_str(&format!("// `{}`: {} — {}\n", need.var, need.ty, need.what));
        }
        out
    }
}

/// What the fields of the resources taken in refer to, and the variables that name
/// them.
struct Names<'a> {
    fleet: &'a Fleet,
    /// Handles of resources this run knows (declared ones observed, those taken in).
    handles: &'a BTreeMap<String, Subject>,
    batch: BTreeSet<Subject>,
    vars: BTreeMap<Subject, String>,
    needs: BTreeMap<String, Need>,
    /// Batch members another one refers to (bound with `let`).
    used: BTreeSet<Subject>,
    /// Edges within the batch: who refers to whom.
    edges: BTreeMap<Subject, BTreeSet<Subject>>,
}

impl Names<'_> {
    /// The variable of `subject`, unique among those of this run.
    fn var(&mut self, subject: &Subject) -> String {
        if let Some(v) = self.vars.get(subject) {
            return v.clone();
        }
        let mut var = variable(&subject.name);
        if self.vars.values().any(|v| *v == var) {
            var = format!("{var}_{}", variable(&subject.kind));
        }
        self.vars.insert(subject.clone(), var.clone());
        var
    }

    /// The variable a reference `value` (a handle, or `provider/kind/name`) of
    /// `from` to a resource of `kind` is written with.
    fn reference(&mut self, from: &Subject, kind: &'static str, value: &str) -> String {
        let found = self.handles.get(value).cloned().or_else(|| {
            self.fleet.resources().find_map(|r| {
                let rf = r.reference();
                (rf.to_string() == value).then(|| Subject {
                    provider: rf.provider.to_owned(),
                    kind: rf.kind.to_owned(),
                    name: rf.name.clone(),
                    region: r.region().to_owned(),
                })
            })
        });
        let Some(to) = found else {
            let var = format!("{}_{}", variable(kind), variable(&from.name));
            self.needs.entry(var.clone()).or_insert_with(|| Need {
                var: var.clone(),
                ty: format!("Key<{}>", rust_type(kind)),
                what: format!(
                    "the key of the {kind} {from} refers to ({value}), which this fleet does \
                     not declare: declare or import it first"
                ),
            });
            return var;
        };
        let var = self.var(&to);
        if self.batch.contains(&to) {
            self.used.insert(to.clone());
            self.edges.entry(from.clone()).or_default().insert(to);
        } else {
            self.needs.entry(var.clone()).or_insert_with(|| Need {
                var: var.clone(),
                ty: format!("Key<{}>", rust_type(kind)),
                what: format!("the key of {to}, declared in the fleet"),
            });
        }
        var
    }
}

/// The declarations of `taken`, references resolved through `handles` and the fleet.
pub(in crate::cli) fn emit(
    fleet: &Fleet,
    taken: &[Taken<'_>],
    handles: &BTreeMap<String, Subject>,
) -> Emitted {
    let subject = |row: &LedgerRow| Subject {
        provider: row.provider.clone(),
        kind: row.kind.clone(),
        name: row.name.clone(),
        region: row.region.clone(),
    };
    let mut names = Names {
        fleet,
        handles,
        batch: taken.iter().map(|t| subject(t.row)).collect(),
        vars: BTreeMap::new(),
        needs: BTreeMap::new(),
        used: BTreeSet::new(),
        edges: BTreeMap::new(),
    };
    let specs: Vec<(Subject, String)> = taken
        .iter()
        .map(|t| {
            let s = subject(t.row);
            let spec = spec(&mut names, &s, t);
            (s, spec)
        })
        .collect();
    let mut declarations = Vec::new();
    for i in dependencies_first(&specs, &names.edges) {
        let (s, spec) = &specs[i];
        let row = taken[i].row;
        let code = if schema(&s.kind).is_some() {
            let binding = names.used.contains(s).then(|| names.var(s));
            declare(row, spec, binding.as_deref())
        } else {
            format!("// {s}: {spec}")
        };
        declarations.push((row.clone(), code));
    }
    Emitted {
        declarations,
        needs: names.needs.into_values().collect(),
    }
}

/// The order to declare in: each after what it refers to, else as given.
fn dependencies_first(
    specs: &[(Subject, String)],
    edges: &BTreeMap<Subject, BTreeSet<Subject>>,
) -> Vec<usize> {
    let mut done = vec![false; specs.len()];
    let mut order = Vec::new();
    while order.len() < specs.len() {
        let before = order.len();
        for (i, (s, _)) in specs.iter().enumerate() {
            if done[i] {
                continue;
            }
            let waits = edges.get(s).is_some_and(|to| {
                to.iter().any(|t| {
                    specs
                        .iter()
                        .zip(&done)
                        .any(|((o, _), d)| o == t && !d && o != s)
                })
            });
            if !waits {
                done[i] = true;
                order.push(i);
            }
        }
        if order.len() == before {
            // A cycle (which no fleet can declare): the rest as given.
            order.extend((0..specs.len()).filter(|&i| !done[i]));
        }
    }
    order
}

/// The spec of one resource, as a struct literal.
fn spec(names: &mut Names<'_>, subject: &Subject, taken: &Taken<'_>) -> String {
    let Some(schema) = schema(&subject.kind) else {
        return format!(
            "a {} of the {} provider: this tool cannot write its declaration",
            subject.kind, subject.provider
        );
    };
    let fields: Vec<(String, String)> = schema
        .fields
        .iter()
        .map(|f| {
            let value = taken
                .reported
                .get(f.json)
                .or_else(|| taken.settled.and_then(|s| s.get(f.json)))
                .or_else(|| {
                    // The declaration's own reference, where settling found no handle.
                    matches!(
                        f.ty,
                        Ty::Key(_) | Ty::OptKey(_) | Ty::KeyMap(_) | Ty::Source
                    )
                    .then(|| taken.declared.and_then(|d| d.get(f.json)))
                    .flatten()
                });
            (snake(f.json), field(names, subject, f, value))
        })
        .collect();
    let fields: Vec<(&str, String)> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    literal(schema.rust, &fields)
}

/// `camelCase` → `snake_case`.
fn snake(json: &str) -> String {
    let mut out = String::new();
    for c in json.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// One field's value: said with `value`, or unsaid, or a stand-in the code names.
fn field(names: &mut Names<'_>, subject: &Subject, f: &Field, value: Option<&Value>) -> String {
    let said = value.and_then(|v| rendered(names, subject, f, v));
    match (said, f.required) {
        (Some(v), true) if f.ty.in_expr() => format!("Expr::lit({v})"),
        (Some(v), true) => v,
        (Some(v), false) if f.ty.in_expr() => format!("Partial::Known(Expr::lit({v}))"),
        (Some(v), false) => format!("Partial::Known({v})"),
        (None, false) => "Partial::Unknown".to_owned(),
        (None, true) => stand_in(names, subject, f),
    }
}

/// A required field nothing says: the cloud does not report it and the fleet does not
/// declare the resource. A plan does not compare what the cloud does not report, so
/// the stand-in changes nothing now; the comment says to set it before a replace
/// would create the resource from it.
fn stand_in(names: &mut Names<'_>, subject: &Subject, f: &Field) -> String {
    let note = format!(
        "/* the cloud does not report `{}`: a stand-in, to set before anything recreates it */",
        f.json
    );
    let value = match f.ty {
        Ty::Access => "Expr::lit(Access::Private)".to_owned(),
        Ty::Image => "Expr::lit(Image::Latest)".to_owned(),
        Ty::OptKey(_) => "None".to_owned(),
        Ty::Source => format!(
            "SecretSource::FromEnv({})",
            owned(&super::env_var(&subject.name))
        ),
        Ty::Key(kind) => {
            let var = format!("{}_{}", variable(kind), variable(&subject.name));
            names.needs.entry(var.clone()).or_insert_with(|| Need {
                var: var.clone(),
                ty: format!("Key<{}>", rust_type(kind)),
                what: format!(
                    "the key of the {kind} {subject} refers to in `{}`, which its cloud does \
                     not report",
                    f.json
                ),
            });
            var
        }
        Ty::KeyMap(_) => "Default::default()".to_owned(),
        Ty::Capacity | Ty::InstanceType => "Expr::lit(todo!())".to_owned(),
        _ => "Expr::lit(Default::default())".to_owned(),
    };
    format!("{value} {note}")
}

/// A value in the field's Rust type, or `None` when it does not fit it.
fn rendered(names: &mut Names<'_>, subject: &Subject, f: &Field, value: &Value) -> Option<String> {
    Some(match f.ty {
        Ty::Bool => value.as_bool()?.to_string(),
        Ty::Int => value.as_u64()?.to_string(),
        Ty::OptInt => match value {
            Value::Null => "None".to_owned(),
            v => format!("Some({})", v.as_u64()?),
        },
        Ty::Str => owned(value.as_str()?),
        Ty::Map => strings_map(value.as_object()?)?,
        Ty::StrSet => {
            let items = value.as_array()?;
            if items.is_empty() {
                "Default::default()".to_owned()
            } else {
                let items: Option<Vec<String>> =
                    items.iter().map(|v| v.as_str().map(owned)).collect();
                format!("[{}].into()", items?.join(", "))
            }
        }
        Ty::Rules => rules(value.as_array()?)?,
        Ty::Capacity => capacity(value)?,
        Ty::Image => match value.as_str()? {
            "latest" => "Image::Latest".to_owned(),
            ami => format!("Image::Ami({})", owned(ami)),
        },
        Ty::InstanceType => format!(
            "{:?}.parse().expect(\"an EC2 instance type\")",
            value.as_str()?
        ),
        Ty::Access => match value.as_str()? {
            "private" => "Access::Private".to_owned(),
            "public" => "Access::Public".to_owned(),
            _ => return None,
        },
        Ty::Key(kind) => names.reference(subject, kind, value.as_str()?),
        Ty::OptKey(kind) => match value {
            Value::Null => "None".to_owned(),
            v => format!("Some({})", names.reference(subject, kind, v.as_str()?)),
        },
        Ty::KeyMap(kind) => {
            let entries = value.as_object()?;
            if entries.is_empty() {
                "Default::default()".to_owned()
            } else {
                let mut items = Vec::new();
                for (k, v) in entries {
                    let var = names.reference(subject, kind, v.as_str()?);
                    items.push(format!("({}, {var})", owned(k)));
                }
                format!("[{}].into()", items.join(", "))
            }
        }
        Ty::Source => source(names, subject, value)?,
    })
}

fn strings_map(map: &Map<String, Value>) -> Option<String> {
    if map.is_empty() {
        return Some("Default::default()".to_owned());
    }
    let items: Option<Vec<String>> = map
        .iter()
        .map(|(k, v)| Some(format!("({}, {})", owned(k), owned(v.as_str()?))))
        .collect();
    Some(format!("[{}].into()", items?.join(", ")))
}

fn rules(items: &[Value]) -> Option<String> {
    if items.is_empty() {
        return Some("Default::default()".to_owned());
    }
    let mut out = Vec::new();
    for rule in items {
        let protocol = match rule.get("protocol")?.as_str()? {
            "tcp" => "Tcp",
            "udp" => "Udp",
            "icmp" => "Icmp",
            "all" => "All",
            _ => return None,
        };
        out.push(format!(
            "Rule {{ protocol: Protocol::{protocol}, from_port: {}, to_port: {}, cidr: {} }}",
            rule.get("fromPort")?.as_u64()?,
            rule.get("toPort")?.as_u64()?,
            owned(rule.get("cidr")?.as_str()?)
        ));
    }
    Some(format!("[{}].into()", out.join(", ")))
}

fn capacity(value: &Value) -> Option<String> {
    match value.get("shape")?.as_str()? {
        "classic" => Some(format!(
            "Capacity::Classic {{ instance_class: {} }}",
            owned(value.get("instanceClass")?.as_str()?)
        )),
        "serverless" => {
            let halves = |v: &Value| {
                let units = v.as_f64()?;
                let halves = (units * 2.0).round();
                ((halves / 2.0 - units).abs() < f64::EPSILON && halves >= 0.0)
                    .then(|| format!("Acu::halves({halves})"))
            };
            Some(format!(
                "Capacity::Serverless {{ min_capacity: {}, max_capacity: {} }}",
                halves(value.get("minCapacity")?)?,
                halves(value.get("maxCapacity")?)?
            ))
        }
        _ => None,
    }
}

/// Where a secret's value comes from, as the declaration says (the cloud never does).
fn source(names: &mut Names<'_>, subject: &Subject, value: &Value) -> Option<String> {
    if let Some(var) = value.get("fromEnv").and_then(Value::as_str) {
        return Some(format!("SecretSource::FromEnv({})", owned(var)));
    }
    if let Some(length) = value.pointer("/generated/length").and_then(Value::as_u64) {
        return Some(format!("SecretSource::Generated {{ length: {length} }}"));
    }
    value.get("composed")?;
    let var = format!("{}_value_from", variable(&subject.name));
    names.needs.entry(var.clone()).or_insert_with(|| Need {
        var: var.clone(),
        ty: "SecretSource".to_owned(),
        what: format!(
            "where the value of {subject} comes from, composed as the fleet declares it now \
             (`SecretSource::Composed(compose_secret!(…))`)"
        ),
    });
    Some(var)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KindMeta;
    use crate::kinds::*;

    /// The list of each kind's fields is the kind's own table, in the same order: a
    /// field added to a kind and not here fails this test.
    #[test]
    fn every_kind_of_this_crate_is_listed_with_its_own_fields() {
        let kinds = [
            KindMeta::of::<Iam>(),
            KindMeta::of::<ObjectStore>(),
            KindMeta::of::<Compute>(),
            KindMeta::of::<Queues>(),
            KindMeta::of::<Secrets>(),
            KindMeta::of::<ImageRegistry>(),
            KindMeta::of::<Postgres>(),
            KindMeta::of::<S3Bucket>(),
            KindMeta::of::<SecurityGroup>(),
            KindMeta::of::<AwsInstance>(),
            KindMeta::of::<FunctionNamespace>(),
            KindMeta::of::<Function>(),
            KindMeta::of::<ContainerNamespace>(),
            KindMeta::of::<Container>(),
        ];
        assert_eq!(kinds.len(), SCHEMAS.len());
        for meta in kinds {
            let schema = schema(meta.id).unwrap_or_else(|| panic!("{} is not listed", meta.id));
            let ours: Vec<&str> = schema.fields.iter().map(|f| f.json).collect();
            let theirs: Vec<&str> = meta.fields.iter().map(|f| f.name).collect();
            assert_eq!(ours, theirs, "{}", meta.id);
        }
    }

    #[test]
    fn a_field_name_becomes_the_rust_name() {
        assert_eq!(snake("codeSha256"), "code_sha256");
        assert_eq!(snake("memoryLimitMb"), "memory_limit_mb");
        assert_eq!(snake("fifo"), "fifo");
    }

    #[test]
    fn a_serverless_capacity_is_counted_in_halves() {
        let value =
            serde_json::json!({"shape": "serverless", "minCapacity": 0.5, "maxCapacity": 2.0});
        assert_eq!(
            capacity(&value).unwrap(),
            "Capacity::Serverless { min_capacity: Acu::halves(1), max_capacity: Acu::halves(4) }"
        );
        let odd =
            serde_json::json!({"shape": "serverless", "minCapacity": 0.3, "maxCapacity": 2.0});
        assert_eq!(capacity(&odd), None);
    }
}
