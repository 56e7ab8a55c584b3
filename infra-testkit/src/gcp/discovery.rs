//! Google's discovery documents as the schema of the REST APIs: which method a request
//! calls, and whether its query, its body and the answer are what the document says.
//!
//! A discovery document describes one API at one version: its methods (HTTP method,
//! path template, query parameters, the schema of the request body and of the answer)
//! and its schemas. Google publishes them, and `google-api-python-client` ships them;
//! a stand-in written here, and the client it serves, are held against them.
//!
//! ```
//! use infra_testkit::gcp::discovery::{Catalogue, Discovery};
//! use serde_json::json;
//!
//! let doc = Discovery::from_json(&json!({
//!     "name": "demo", "version": "v1", "revision": "1", "servicePath": "",
//!     "resources": {"things": {"methods": {"get": {
//!         "id": "demo.things.get", "httpMethod": "GET",
//!         "path": "v1/{+name}", "flatPath": "v1/things/{thingsId}",
//!         "response": {"$ref": "Thing"}
//!     }}}},
//!     "schemas": {"Thing": {"id": "Thing", "type": "object", "properties": {
//!         "name": {"type": "string"},
//!         "size": {"type": "string", "format": "int64"}
//!     }}}
//! }))
//! .unwrap();
//! let catalogue = Catalogue::new(vec![doc]);
//! let good = catalogue.check("GET", "/v1/things/a", &[], None, 200, Some(&json!({"name": "a", "size": "3"})));
//! assert_eq!(good.method.as_deref(), Some("demo.things.get"));
//! assert!(good.problems.is_empty());
//! let bad = catalogue.check("GET", "/v1/things/a", &[], None, 200, Some(&json!({"size": 3, "colour": "red"})));
//! assert_eq!(bad.problems.len(), 2); // an int64 must be a string; `colour` is no field
//! ```
//!
//! What is checked, for the method a request maps to (by HTTP method and path
//! template; the template with the most literal text wins):
//! - the query: every parameter is one of the method's, one of the document's
//!   standard ones (`alt`, `fields`, `prettyPrint`, …) or the system parameter `$alt`
//!   (`json` or `json;enum-encoding=int`); its value has the parameter's type, format
//!   and enumeration; the required ones are there;
//! - the request body and the answer, against the method's `request` and `response`
//!   schemas: no field the schema does not name; each value of the schema's `type` and
//!   `format` (an `int64` or `uint64` is a JSON string holding an integer, `byte` is
//!   base64, `date-time` and `google-datetime` are RFC 3339, `google-duration` is
//!   seconds with an `s`, `int32` a JSON number in range); an enumeration is one of
//!   the listed names or, when the request's `$alt` asked for
//!   `enum-encoding=int`, an integer (in a request, a listed name is accepted too);
//!   a field marked required for the method (`annotations.required`) is in the
//!   request; an answer holds no `null`;
//! - an `Any` (an object of `additionalProperties: any` carrying `@type`, as a
//!   long-running operation's `response` and `metadata`) against the schema
//!   [`Catalogue::any_type`] names for its type URL; a type URL named nowhere is a
//!   problem, so nothing is let through unchecked;
//! - an error answer (status 400 or more) against Google's error envelope:
//!   `{"error": {"code", "message", "status"?, "details"?, "errors"?}}`, `code` the
//!   HTTP status, `status` one of the canonical codes.
//!
//! No value of a string field is ever quoted in a problem but an enumeration's (a
//! secret's payload must not reach a test's output): a problem names the field's
//! path and what is wrong.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use serde_json::{Map, Value};

/// One part of a path template: literal text, or a variable (`{name}` matches one
/// path segment or more of one, `{+name}` anything).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Variable { slashes: bool },
}

/// A path template, as the document writes it, prefixed with the service path.
#[derive(Clone, Debug)]
struct Template {
    parts: Vec<Part>,
}

impl Template {
    fn parse(text: &str) -> Template {
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            match rest.find('{') {
                Some(0) => {
                    let end = rest.find('}').unwrap_or(rest.len() - 1);
                    parts.push(Part::Variable {
                        slashes: rest[1..end].starts_with('+'),
                    });
                    rest = &rest[end + 1..];
                }
                Some(i) => {
                    parts.push(Part::Literal(rest[..i].to_owned()));
                    rest = &rest[i..];
                }
                None => {
                    parts.push(Part::Literal(rest.to_owned()));
                    rest = "";
                }
            }
        }
        Template { parts }
    }

    /// How much literal text the template holds: the more, the more specific.
    fn weight(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Literal(l) => l.len(),
                Part::Variable { .. } => 0,
            })
            .sum()
    }

    fn matches(&self, path: &str) -> bool {
        matches_from(&self.parts, path)
    }
}

fn matches_from(parts: &[Part], path: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return path.is_empty();
    };
    match first {
        Part::Literal(l) => path
            .strip_prefix(l.as_str())
            .is_some_and(|p| matches_from(rest, p)),
        Part::Variable { slashes } => {
            // A variable takes one character at least, and no `/` unless it may.
            for (i, c) in path.char_indices() {
                if c == '/' && !slashes {
                    break;
                }
                if matches_from(rest, &path[i + c.len_utf8()..]) {
                    return true;
                }
            }
            false
        }
    }
}

/// One method of an API.
#[derive(Clone, Debug)]
struct Method {
    id: String,
    http_method: String,
    template: Template,
    parameters: Map<String, Value>,
    request: Option<String>,
    response: Option<String>,
}

/// One API's discovery document, as far as the checks need it.
#[derive(Clone, Debug)]
pub struct Discovery {
    name: String,
    version: String,
    revision: String,
    parameters: Map<String, Value>,
    methods: Vec<Method>,
    schemas: Map<String, Value>,
}

impl Discovery {
    /// Reads a discovery document (the whole of one, or an extract of the same shape).
    ///
    /// # Errors
    /// When the document lacks its name, version or schemas, when a method lacks its
    /// id, HTTP method or path, or when a `$ref` names a schema it does not hold.
    pub fn from_json(doc: &Value) -> Result<Discovery, String> {
        let text = |key: &str| {
            doc.get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("the document has no {key}"))
        };
        let name = text("name")?;
        let version = text("version")?;
        let revision = text("revision").unwrap_or_default();
        let service_path = text("servicePath").unwrap_or_default();
        let schemas = doc
            .get("schemas")
            .and_then(Value::as_object)
            .cloned()
            .ok_or("the document has no schemas")?;
        let parameters = doc
            .get("parameters")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut methods = Vec::new();
        if let Some(resources) = doc.get("resources") {
            collect_methods(resources, &service_path, &mut methods)?;
        }
        let discovery = Discovery {
            name,
            version,
            revision,
            parameters,
            methods,
            schemas,
        };
        discovery.check_refs()?;
        Ok(discovery)
    }

    /// `name.version`, as the documents' file names spell it (`storage.v1`).
    pub fn id(&self) -> String {
        format!("{}.{}", self.name, self.version)
    }

    /// The document's revision (a date, `20261009`).
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// The ids of the methods it holds (`storage.buckets.insert`), sorted.
    pub fn method_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.methods.iter().map(|m| m.id.as_str()).collect();
        ids.sort_unstable();
        ids
    }

    /// Whether it holds the schema `id`.
    pub fn has_schema(&self, id: &str) -> bool {
        self.schemas.contains_key(id)
    }

    fn check_refs(&self) -> Result<(), String> {
        let mut missing = Vec::new();
        for (id, schema) in &self.schemas {
            refs_in(schema, &mut |r| {
                if !self.schemas.contains_key(r) {
                    missing.push(format!("{id} → {r}"));
                }
            });
        }
        for m in &self.methods {
            for r in m.request.iter().chain(m.response.iter()) {
                if !self.schemas.contains_key(r) {
                    missing.push(format!("{} → {r}", m.id));
                }
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{}: references to schemas it does not hold: {}",
                self.id(),
                missing.join(", ")
            ))
        }
    }
}

fn refs_in(schema: &Value, found: &mut impl FnMut(&str)) {
    match schema {
        Value::Object(map) => {
            if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                found(r);
            }
            for v in map.values() {
                refs_in(v, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs_in(v, found)),
        _ => {}
    }
}

fn collect_methods(
    resources: &Value,
    service_path: &str,
    out: &mut Vec<Method>,
) -> Result<(), String> {
    let Some(resources) = resources.as_object() else {
        return Ok(());
    };
    for resource in resources.values() {
        if let Some(methods) = resource.get("methods").and_then(Value::as_object) {
            for (name, m) in methods {
                let field = |key: &str| {
                    m.get(key)
                        .and_then(Value::as_str)
                        .ok_or_else(|| format!("the method {name} has no {key}"))
                };
                let path = m
                    .get("flatPath")
                    .and_then(Value::as_str)
                    .map_or_else(|| field("path"), Ok)?;
                let schema_of = |key: &str| {
                    m.pointer(&format!("/{key}/$ref"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                out.push(Method {
                    id: field("id")?.to_owned(),
                    http_method: field("httpMethod")?.to_owned(),
                    template: Template::parse(&format!("/{service_path}{path}")),
                    parameters: m
                        .get("parameters")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default(),
                    request: schema_of("request"),
                    response: schema_of("response"),
                });
            }
        }
        if let Some(nested) = resource.get("resources") {
            collect_methods(nested, service_path, out)?;
        }
    }
    Ok(())
}

/// Something a request or an answer holds that the document does not allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where: `query`, `request`, `response`, then the field's path
    /// (`response.settings.tier`, `request.labels[team]`, `response.items[2]`).
    pub at: String,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.what)
    }
}

/// What [`Catalogue::check`] found of one exchange.
#[derive(Clone, Debug, Default)]
pub struct Checked {
    /// The method the request maps to (`storage.buckets.insert`), `None` when none.
    pub method: Option<String>,
    /// What does not agree with the document (empty: everything does).
    pub problems: Vec<Problem>,
}

/// The documents of several APIs, and the schemas their `Any` payloads are read with.
#[derive(Clone, Debug)]
pub struct Catalogue {
    apis: Vec<Discovery>,
    any_types: BTreeMap<String, (String, String)>,
}

/// Google's canonical error codes, as an error envelope's `status` spells them.
const CANONICAL_CODES: &[&str] = &[
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl Catalogue {
    /// A catalogue of `apis`.
    pub fn new(apis: Vec<Discovery>) -> Self {
        Catalogue {
            apis,
            any_types: BTreeMap::new(),
        }
    }

    /// Reads an `Any` whose `@type` is `type_url`
    /// (`type.googleapis.com/google.cloud.run.v2.Service`) with the schema `schema`
    /// of the API `api` (`run.v2`).
    ///
    /// # Panics
    /// When the catalogue has no such API, or the API no such schema.
    #[must_use]
    pub fn any_type(mut self, type_url: &str, api: &str, schema: &str) -> Self {
        let doc = self
            .api(api)
            .unwrap_or_else(|| panic!("the catalogue has no API {api}"));
        assert!(doc.has_schema(schema), "{api} has no schema {schema}");
        self.any_types
            .insert(type_url.to_owned(), (api.to_owned(), schema.to_owned()));
        self
    }

    /// The document of `api` (`storage.v1`).
    pub fn api(&self, api: &str) -> Option<&Discovery> {
        self.apis.iter().find(|d| d.id() == api)
    }

    /// The documents held.
    pub fn apis(&self) -> &[Discovery] {
        &self.apis
    }

    fn method(&self, http_method: &str, path: &str) -> Option<(&Discovery, &Method)> {
        self.apis
            .iter()
            .flat_map(|d| d.methods.iter().map(move |m| (d, m)))
            .filter(|(_, m)| m.http_method == http_method && m.template.matches(path))
            .max_by_key(|(_, m)| m.template.weight())
    }

    /// The id of the method `http_method` on `path` (decoded, `/v1/projects/p/secrets`)
    /// maps to.
    pub fn method_id(&self, http_method: &str, path: &str) -> Option<&str> {
        self.method(http_method, path).map(|(_, m)| m.id.as_str())
    }

    /// Checks one exchange: the request (`query` decoded, `request` its body, `None`
    /// when it had none) and the answer (`status`, `response` its body, `None` when
    /// it had none).
    pub fn check(
        &self,
        http_method: &str,
        path: &str,
        query: &[(String, String)],
        request: Option<&Value>,
        status: u16,
        response: Option<&Value>,
    ) -> Checked {
        let Some((api, method)) = self.method(http_method, path) else {
            return Checked {
                method: None,
                problems: vec![Problem {
                    at: "request".to_owned(),
                    what: format!("{http_method} {path} is no method of the documents held"),
                }],
            };
        };
        let int_enums = query
            .iter()
            .any(|(k, v)| k == "$alt" && v.contains("enum-encoding=int"));
        let mut check = Check {
            catalogue: self,
            api,
            method: &method.id,
            int_enums,
            answer: false,
            problems: Vec::new(),
        };
        check.query(method, query);
        match (&method.request, request) {
            (Some(schema), Some(body)) => {
                check.value(&Value::from(json_ref(schema)), body, "request");
            }
            (Some(schema), None) => check.problem("request", format!("no body ({schema} due)")),
            (None, Some(Value::Object(m))) if m.is_empty() => {}
            (None, Some(_)) => check.problem("request", "a body, where the method takes none"),
            (None, None) => {}
        }
        check.answer = true;
        if status >= 400 {
            check.error_envelope(status, response);
        } else {
            match (&method.response, response) {
                (Some(schema), Some(body)) => {
                    check.value(&Value::from(json_ref(schema)), body, "response");
                }
                (Some(schema), None) => {
                    check.problem("response", format!("no body ({schema} due)"));
                }
                (None, Some(Value::Object(m))) if m.is_empty() => {}
                (None, Some(_)) => {
                    check.problem("response", "a body, where the method answers none")
                }
                (None, None) => {}
            }
        }
        Checked {
            method: Some(method.id.clone()),
            problems: check.problems,
        }
    }
}

fn json_ref(schema: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("$ref".to_owned(), Value::String(schema.to_owned()));
    m
}

/// The state of one check.
struct Check<'a> {
    catalogue: &'a Catalogue,
    api: &'a Discovery,
    method: &'a str,
    int_enums: bool,
    /// Checking the answer (`true`) or the request.
    answer: bool,
    problems: Vec<Problem>,
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Check<'_> {
    fn problem(&mut self, at: &str, what: impl Into<String>) {
        self.problems.push(Problem {
            at: at.to_owned(),
            what: what.into(),
        });
    }

    fn query(&mut self, method: &Method, query: &[(String, String)]) {
        let api = self.api;
        for (name, value) in query {
            let at = format!("query.{name}");
            if name == "$alt" {
                if value != "json" && value != "json;enum-encoding=int" {
                    self.problem(
                        &at,
                        format!("{value:?} is not json nor json;enum-encoding=int"),
                    );
                }
                continue;
            }
            let declared = method
                .parameters
                .get(name)
                .filter(|p| p.get("location").and_then(Value::as_str) == Some("query"))
                .or_else(|| api.parameters.get(name));
            match declared {
                Some(param) => {
                    let param = param.clone();
                    self.parameter(&param, value, &at);
                }
                None => self.problem(&at, "no such query parameter"),
            }
        }
        for (name, param) in &method.parameters {
            let required = param.get("required").and_then(Value::as_bool) == Some(true);
            let in_query = param.get("location").and_then(Value::as_str) == Some("query");
            if required && in_query && !query.iter().any(|(k, _)| k == name) {
                self.problems.push(Problem {
                    at: format!("query.{name}"),
                    what: "a required parameter is missing".to_owned(),
                });
            }
        }
    }

    /// A query parameter's value (always text on the wire).
    fn parameter(&mut self, param: &Value, value: &str, at: &str) {
        let ty = param
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        let as_json = match ty {
            "integer" => match value.parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => return self.problem(at, "not an integer"),
            },
            "boolean" => match value {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return self.problem(at, "not true nor false"),
            },
            _ => Value::String(value.to_owned()),
        };
        // Query enums are always names (no `enum-encoding` applies to them).
        let int_enums = std::mem::replace(&mut self.int_enums, false);
        self.value(param, &as_json, at);
        self.int_enums = int_enums;
    }

    fn resolve(&mut self, schema: &Value, at: &str) -> Option<Value> {
        let mut schema = schema.clone();
        for _ in 0..8 {
            let Some(r) = schema.get("$ref").and_then(Value::as_str) else {
                return Some(schema);
            };
            let api = self.api;
            match api.schemas.get(r) {
                Some(s) => schema = s.clone(),
                None => {
                    self.problem(at, format!("the schema {r} is not in {}", self.api.id()));
                    return None;
                }
            }
        }
        Some(schema)
    }

    fn value(&mut self, schema: &Value, value: &Value, at: &str) {
        let Some(schema) = self.resolve(schema, at) else {
            return;
        };
        if value.is_null() {
            // A request may send null for any field (the default, or, in a patch, a
            // value removed); an answer never does.
            if self.answer {
                self.problem(at, "null");
            }
            return;
        }
        let ty = schema.get("type").and_then(Value::as_str).unwrap_or(
            if schema.get("properties").is_some() || schema.get("additionalProperties").is_some() {
                "object"
            } else {
                "any"
            },
        );
        match ty {
            "any" => {}
            "object" => self.object(&schema, value, at),
            "array" => match value.as_array() {
                Some(items) => {
                    let item = schema.get("items").cloned().unwrap_or(Value::Null);
                    for (i, v) in items.iter().enumerate() {
                        self.value(&item, v, &format!("{at}[{i}]"));
                    }
                }
                None => self.problem(at, format!("{}, not an array", kind_of(value))),
            },
            "string" => self.string(&schema, value, at),
            "integer" => self.integer(&schema, value, at),
            "number" => {
                if !value.is_number() {
                    self.problem(at, format!("{}, not a number", kind_of(value)));
                }
            }
            "boolean" => {
                if !value.is_boolean() {
                    self.problem(at, format!("{}, not a boolean", kind_of(value)));
                }
            }
            other => self.problem(
                at,
                format!("the document's type {other:?} is not understood"),
            ),
        }
    }

    fn object(&mut self, schema: &Value, value: &Value, at: &str) {
        let Some(fields) = value.as_object() else {
            return self.problem(at, format!("{}, not an object", kind_of(value)));
        };
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        let any_map = additional
            .and_then(|a| a.get("type"))
            .and_then(Value::as_str)
            == Some("any")
            && properties.is_none();
        if any_map && let Some(type_url) = fields.get("@type") {
            return self.any(type_url, fields, at);
        }
        for (key, v) in fields {
            let here = if properties.is_some() {
                format!("{at}.{key}")
            } else {
                format!("{at}[{key}]")
            };
            match properties.and_then(|p| p.get(key)) {
                Some(field) => {
                    let field = field.clone();
                    self.value(&field, v, &here);
                }
                None => match additional {
                    Some(a) if a.is_object() => {
                        let a = a.clone();
                        self.value(&a, v, &here);
                    }
                    _ => self.problem(&here, "no such field"),
                },
            }
        }
        if !self.answer
            && let Some(properties) = properties
        {
            for (key, field) in properties {
                let required = field
                    .pointer("/annotations/required")
                    .and_then(Value::as_array)
                    .is_some_and(|ids| ids.iter().any(|id| id.as_str() == Some(self.method)));
                if required && fields.get(key).is_none_or(Value::is_null) {
                    self.problems.push(Problem {
                        at: format!("{at}.{key}"),
                        what: format!("required by {}, and missing", self.method),
                    });
                }
            }
        }
    }

    /// An `Any`: its fields, less `@type`, against the schema named for its type.
    fn any(&mut self, type_url: &Value, fields: &Map<String, Value>, at: &str) {
        let Some(url) = type_url.as_str() else {
            return self.problem(&format!("{at}.@type"), "not a string");
        };
        let Some((api, schema)) = self.catalogue.any_types.get(url) else {
            return self.problem(
                &format!("{at}.@type"),
                format!("{url}: no schema is named for this type"),
            );
        };
        let Some(doc) = self.catalogue.api(api) else {
            return self.problem(at, format!("the catalogue has no API {api}"));
        };
        let mut rest = fields.clone();
        rest.remove("@type");
        let mut inner = Check {
            catalogue: self.catalogue,
            api: doc,
            method: self.method,
            int_enums: self.int_enums,
            answer: self.answer,
            problems: Vec::new(),
        };
        inner.value(&Value::from(json_ref(schema)), &Value::Object(rest), at);
        self.problems.append(&mut inner.problems);
    }

    fn string(&mut self, schema: &Value, value: &Value, at: &str) {
        if let Some(names) = schema.get("enum").and_then(Value::as_array) {
            return self.enumeration(names, value, at);
        }
        let Some(text) = value.as_str() else {
            return self.problem(at, format!("{}, not a string", kind_of(value)));
        };
        let format = schema.get("format").and_then(Value::as_str).unwrap_or("");
        let ok = match format {
            "int64" => text.parse::<i64>().is_ok(),
            "uint64" => text.parse::<u64>().is_ok(),
            "byte" => is_base64(text),
            "date-time" | "google-datetime" => is_rfc3339(text),
            "google-duration" => is_duration(text),
            "date" => is_date(text),
            "google-fieldmask" => text.split(',').all(|p| {
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            }),
            _ => true,
        };
        if !ok {
            self.problem(at, format!("a string that is not of the format {format}"));
        }
    }

    fn enumeration(&mut self, names: &[Value], value: &Value, at: &str) {
        match value {
            Value::String(s) => {
                if !names.iter().any(|n| n.as_str() == Some(s)) {
                    self.problem(at, format!("{s:?} is not one of the enumeration's names"));
                } else if self.answer && self.int_enums {
                    self.problem(
                        at,
                        format!("{s:?}: a name, where the request asked for enum-encoding=int"),
                    );
                }
            }
            Value::Number(n) if n.is_i64() => {
                if !self.int_enums {
                    self.problem(
                        at,
                        format!(
                            "{n}: an integer, where the request did not ask for enum-encoding=int"
                        ),
                    );
                }
            }
            other => self.problem(at, format!("{}, not an enumeration's name", kind_of(other))),
        }
    }

    fn integer(&mut self, schema: &Value, value: &Value, at: &str) {
        let format = schema
            .get("format")
            .and_then(Value::as_str)
            .unwrap_or("int32");
        let Some(n) = value
            .as_i64()
            .or_else(|| value.as_u64().map(|n| i64::try_from(n).unwrap_or(i64::MAX)))
        else {
            return self.problem(at, format!("{}, not an integer", kind_of(value)));
        };
        let ok = match format {
            "uint32" => u32::try_from(n).is_ok(),
            _ => i32::try_from(n).is_ok(),
        };
        if !ok {
            self.problem(at, format!("{n} is outside {format}"));
        }
    }

    fn error_envelope(&mut self, status: u16, body: Option<&Value>) {
        let Some(error) = body.and_then(|b| b.get("error")).and_then(Value::as_object) else {
            return self.problem("response", "an error answer without an `error` object");
        };
        if error.get("code").and_then(Value::as_u64) != Some(u64::from(status)) {
            self.problem(
                "response.error.code",
                format!("not the HTTP status {status}"),
            );
        }
        if !error.get("message").is_some_and(Value::is_string) {
            self.problem("response.error.message", "missing, or not a string");
        }
        if let Some(s) = error.get("status") {
            match s.as_str() {
                Some(s) if CANONICAL_CODES.contains(&s) => {}
                _ => self.problem("response.error.status", "not a canonical code"),
            }
        }
        for (key, v) in error {
            match key.as_str() {
                "code" | "message" | "status" => {}
                "details" | "errors" => {
                    let ok = v
                        .as_array()
                        .is_some_and(|items| items.iter().all(Value::is_object));
                    if !ok {
                        self.problem(&format!("response.error.{key}"), "not an array of objects");
                    }
                }
                other => self.problem(&format!("response.error.{other}"), "no such field"),
            }
        }
        if let Some(extra) = body.and_then(Value::as_object).filter(|b| b.len() > 1) {
            for key in extra.keys().filter(|k| *k != "error") {
                self.problem(&format!("response.{key}"), "no such field beside `error`");
            }
        }
    }
}

fn is_base64(text: &str) -> bool {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    let padded = match text.len() % 4 {
        2 => format!("{text}=="),
        3 => format!("{text}="),
        _ => text.to_owned(),
    };
    STANDARD.decode(&padded).is_ok() || URL_SAFE.decode(&padded).is_ok()
}

fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// RFC 3339: `2026-12-01T10:00:00Z`, with a fraction and an offset allowed.
fn is_rfc3339(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    let (clock, zone) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
        (c, "")
    } else {
        match time.rfind(['+', '-']) {
            Some(i) => (&time[..i], &time[i + 1..]),
            None => return false,
        }
    };
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, "0"));
    let two = |s: &str| s.len() == 2 && s.chars().all(|c| c.is_ascii_digit());
    let parts: Vec<&str> = hms.split(':').collect();
    is_date(date)
        && parts.len() == 3
        && parts.iter().all(|p| two(p))
        && !fraction.is_empty()
        && fraction.chars().all(|c| c.is_ascii_digit())
        && (zone.is_empty() || zone.split(':').all(two))
}

/// A duration as Google's JSON writes it: seconds, a fraction, then `s`.
fn is_duration(text: &str) -> bool {
    let Some(number) = text.strip_suffix('s') else {
        return false;
    };
    let number = number.strip_prefix('-').unwrap_or(number);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, "0"));
    !whole.is_empty()
        && whole.chars().all(|c| c.is_ascii_digit())
        && (1..=9).contains(&fraction.len())
        && fraction.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn demo() -> Catalogue {
        let doc = json!({
            "name": "demo", "version": "v1", "revision": "20261201", "servicePath": "",
            "parameters": {
                "alt": {"type": "string", "location": "query", "enum": ["json", "media"]}
            },
            "resources": {"projects": {"resources": {"things": {"methods": {
                "get": {"id": "demo.projects.things.get", "httpMethod": "GET",
                        "path": "v1/{+name}", "flatPath": "v1/projects/{projectsId}/things/{thingsId}",
                        "response": {"$ref": "Thing"}},
                "create": {"id": "demo.projects.things.create", "httpMethod": "POST",
                        "path": "v1/{+parent}/things", "flatPath": "v1/projects/{projectsId}/things",
                        "parameters": {
                            "thingId": {"type": "string", "location": "query", "required": true},
                            "size": {"type": "integer", "location": "query", "format": "int32"}
                        },
                        "request": {"$ref": "Thing"}, "response": {"$ref": "Operation"}},
                "poke": {"id": "demo.projects.things.poke", "httpMethod": "GET",
                        "path": "v1/{+name}:poke", "flatPath": "v1/projects/{projectsId}/things/{thingsId}:poke",
                        "response": {"$ref": "Empty"}}
            }}}}},
            "schemas": {
                "Thing": {"id": "Thing", "type": "object", "properties": {
                    "name": {"type": "string", "annotations": {"required": ["demo.projects.things.create"]}},
                    "size": {"type": "string", "format": "int64"},
                    "count": {"type": "integer", "format": "int32"},
                    "data": {"type": "string", "format": "byte"},
                    "when": {"type": "string", "format": "google-datetime"},
                    "ttl": {"type": "string", "format": "google-duration"},
                    "colour": {"type": "string", "enum": ["COLOUR_UNSPECIFIED", "RED"]},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "parts": {"type": "array", "items": {"$ref": "Part"}}
                }},
                "Part": {"id": "Part", "type": "object", "properties": {"on": {"type": "boolean"}}},
                "Operation": {"id": "Operation", "type": "object", "properties": {
                    "name": {"type": "string"}, "done": {"type": "boolean"},
                    "response": {"type": "object", "additionalProperties": {"type": "any"}}
                }},
                "Empty": {"id": "Empty", "type": "object", "properties": {}}
            }
        });
        Catalogue::new(vec![Discovery::from_json(&doc).unwrap()]).any_type(
            "type.googleapis.com/demo.Thing",
            "demo.v1",
            "Thing",
        )
    }

    fn problems(checked: &Checked) -> Vec<String> {
        checked.problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_request_maps_to_the_most_specific_template() {
        let c = demo();
        assert_eq!(
            c.method_id("GET", "/v1/projects/p/things/t"),
            Some("demo.projects.things.get")
        );
        assert_eq!(
            c.method_id("GET", "/v1/projects/p/things/t:poke"),
            Some("demo.projects.things.poke")
        );
        assert_eq!(c.method_id("GET", "/v1/projects/p/things/t/more"), None);
        assert_eq!(c.method_id("DELETE", "/v1/projects/p/things/t"), None);
        let unmapped = c.check("GET", "/v2/else", &[], None, 200, None);
        assert_eq!(unmapped.method, None);
        assert_eq!(unmapped.problems.len(), 1);
    }

    #[test]
    fn types_formats_and_unknown_fields_are_checked() {
        let c = demo();
        let good = json!({
            "name": "projects/p/things/t", "size": "12", "count": 3, "data": "czNjcmV0",
            "when": "2026-12-01T10:00:00.123456Z", "ttl": "3.5s", "colour": "RED",
            "labels": {"team": "web"}, "parts": [{"on": true}]
        });
        let ok = c.check(
            "GET",
            "/v1/projects/p/things/t",
            &[],
            None,
            200,
            Some(&good),
        );
        assert_eq!(problems(&ok), Vec::<String>::new());
        let bad = json!({
            "name": 1, "size": 12, "count": "3", "data": "not base64!", "when": "yesterday",
            "ttl": "300", "colour": "BLUE", "labels": {"team": 1}, "parts": [{"on": "yes"}],
            "extra": {}, "nothing": null
        });
        let found =
            problems(&c.check("GET", "/v1/projects/p/things/t", &[], None, 200, Some(&bad)));
        for at in [
            "response.name:",
            "response.size:",
            "response.count:",
            "response.data:",
            "response.when:",
            "response.ttl:",
            "response.colour:",
            "response.labels[team]:",
            "response.parts[0].on:",
            "response.extra: no such field",
            "response.nothing: no such field",
        ] {
            assert!(
                found.iter().any(|p| p.starts_with(at)),
                "{at} in {found:#?}"
            );
        }
        assert!(
            !found.iter().any(|p| p.contains("not base64!")),
            "a string's value is never quoted: {found:#?}"
        );
    }

    #[test]
    fn enums_are_names_unless_the_request_asked_for_integers() {
        let c = demo();
        let path = "/v1/projects/p/things/t";
        let int = [("$alt".to_owned(), "json;enum-encoding=int".to_owned())];
        let as_int = json!({"colour": 1});
        let as_name = json!({"colour": "RED"});
        assert!(
            c.check("GET", path, &int, None, 200, Some(&as_int))
                .problems
                .is_empty()
        );
        assert_eq!(
            c.check("GET", path, &int, None, 200, Some(&as_name))
                .problems
                .len(),
            1
        );
        assert_eq!(
            c.check("GET", path, &[], None, 200, Some(&as_int))
                .problems
                .len(),
            1
        );
        assert!(
            c.check("GET", path, &[], None, 200, Some(&as_name))
                .problems
                .is_empty()
        );
    }

    #[test]
    fn requests_need_their_required_fields_and_known_parameters() {
        let c = demo();
        let path = "/v1/projects/p/things";
        let op = json!({"name": "op", "done": false});
        let query = [("thingId".to_owned(), "t".to_owned())];
        let ok = c.check(
            "POST",
            path,
            &query,
            Some(&json!({"name": "t"})),
            200,
            Some(&op),
        );
        assert_eq!(problems(&ok), Vec::<String>::new());
        let found = problems(&c.check(
            "POST",
            path,
            &[
                ("size".to_owned(), "big".to_owned()),
                ("colour".to_owned(), "x".to_owned()),
            ],
            Some(&json!({"size": null})),
            200,
            Some(&op),
        ));
        for at in [
            "query.size:",
            "query.colour: no such",
            "query.thingId: a required",
            "request.name: required",
        ] {
            assert!(
                found.iter().any(|p| p.starts_with(at)),
                "{at} in {found:#?}"
            );
        }
        assert!(
            !found.iter().any(|p| p.starts_with("request.size")),
            "a request may send null"
        );
        let alt = [
            ("thingId".to_owned(), "t".to_owned()),
            ("alt".to_owned(), "json".to_owned()),
            ("$alt".to_owned(), "json;enum-encoding=int".to_owned()),
        ];
        let ok = c.check(
            "POST",
            path,
            &alt,
            Some(&json!({"name": "t"})),
            200,
            Some(&op),
        );
        assert_eq!(problems(&ok), Vec::<String>::new());
    }

    #[test]
    fn an_any_is_read_with_the_schema_named_for_its_type() {
        let c = demo();
        let path = "/v1/projects/p/things";
        let query = [("thingId".to_owned(), "t".to_owned())];
        let body = json!({"name": "t"});
        let done = |response: Value| json!({"name": "op", "done": true, "response": response});
        let good =
            done(json!({"@type": "type.googleapis.com/demo.Thing", "name": "t", "size": "1"}));
        assert!(
            c.check("POST", path, &query, Some(&body), 200, Some(&good))
                .problems
                .is_empty()
        );
        let wrong = done(json!({"@type": "type.googleapis.com/demo.Thing", "size": 1}));
        assert_eq!(
            c.check("POST", path, &query, Some(&body), 200, Some(&wrong))
                .problems
                .len(),
            1
        );
        let unnamed = done(json!({"@type": "type.googleapis.com/demo.Other"}));
        let found = problems(&c.check("POST", path, &query, Some(&body), 200, Some(&unnamed)));
        assert!(found[0].contains("no schema is named"), "{found:?}");
    }

    #[test]
    fn error_answers_are_held_against_googles_envelope() {
        let c = demo();
        let path = "/v1/projects/p/things/t";
        let good = json!({"error": {"code": 404, "message": "gone", "status": "NOT_FOUND"}});
        assert!(
            c.check("GET", path, &[], None, 404, Some(&good))
                .problems
                .is_empty()
        );
        let gcs =
            json!({"error": {"code": 404, "message": "gone", "errors": [{"reason": "notFound"}]}});
        assert!(
            c.check("GET", path, &[], None, 404, Some(&gcs))
                .problems
                .is_empty()
        );
        let bad = json!({"error": {"code": 500, "status": "BROKEN", "why": 1}});
        assert_eq!(
            c.check("GET", path, &[], None, 404, Some(&bad))
                .problems
                .len(),
            4
        );
        assert_eq!(c.check("GET", path, &[], None, 404, None).problems.len(), 1);
    }

    #[test]
    fn formats_read_as_google_writes_them() {
        assert!(is_rfc3339("2026-12-01T00:00:00Z"));
        assert!(is_rfc3339("2026-12-01T00:00:00.5+01:00"));
        assert!(!is_rfc3339("2026-12-01 00:00:00Z"));
        assert!(is_duration("300s") && is_duration("0.000000001s") && !is_duration("5m"));
        assert!(is_base64("czNjcmV0") && is_base64("CAE") && !is_base64("a b"));
        assert!(is_date("2026-12-01") && !is_date("2026-1-01"));
    }

    #[test]
    fn a_reference_to_a_schema_not_held_is_refused_at_load() {
        let doc = json!({
            "name": "demo", "version": "v1", "schemas": {"A": {"type": "object", "properties": {"b": {"$ref": "B"}}}}
        });
        let e = Discovery::from_json(&doc).unwrap_err();
        assert!(e.contains("A → B"), "{e}");
    }
}
