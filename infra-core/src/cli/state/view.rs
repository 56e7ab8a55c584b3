//! `state list` and `state show`: what the records hold, read-only.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::super::console::Io;
use super::error;
use super::rows::{cached, declared, pick, sensitive_fields, subject_of};
use crate::{CacheEntry, Fleet, Ledger, LedgerRow, RecordStore};

/// The version of the JSON `state list` and `state show` print.
const STATE_JSON: &str = "v1";

/// What a row is besides a row, in the words of the list.
fn flags(ledger: &Ledger, fleet: &Fleet, row: &LedgerRow) -> Vec<&'static str> {
    let mut flags = Vec::new();
    if ledger.is_discovered(row) {
        flags.push("discovered");
    }
    if ledger.is_intent(row) {
        flags.push("intent");
    }
    if ledger.is_deleting(row) {
        flags.push("deleting");
    }
    if declared(fleet, row).is_none() {
        flags.push("not declared");
    }
    flags
}

const LEGEND: [(&str, &str); 4] = [
    (
        "discovered",
        "adopted by `discover` on its ownership marker alone: deleting it needs --allow-delete",
    ),
    (
        "intent",
        "written before a create whose outcome is not known: it may not exist",
    ),
    (
        "deleting",
        "marked before a delete that may have been sent: it may be gone (found absent, the \
         delete is confirmed)",
    ),
    (
        "not declared",
        "the next apply deletes it (`forget` it to keep it without managing it)",
    ),
];

/// `state list`.
pub(in crate::cli) fn list(
    io: &mut Io<'_>,
    fleet: &Fleet,
    store: &dyn RecordStore,
    as_json: bool,
) -> u8 {
    let ledger = match store.load_ledger(fleet.name()) {
        Ok(l) => l,
        Err(e) => return error(io, &e),
    };
    let mut entries = Vec::new();
    for row in &ledger.rows {
        match cached(store, fleet.name(), row) {
            Ok(entry) => entries.push(entry.is_some()),
            Err(e) => return error(io, &e),
        }
    }
    if as_json {
        let resources: Vec<Value> = ledger
            .rows
            .iter()
            .zip(entries)
            .map(|(row, cached)| row_json(&ledger, fleet, row, json!(cached)))
            .collect();
        let doc = json!({"state": STATE_JSON, "fleet": fleet.name(), "resources": resources});
        io.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).expect("JSON")
        ));
    } else {
        io.out(&list_text(&ledger, fleet));
    }
    0
}

fn list_text(ledger: &Ledger, fleet: &Fleet) -> String {
    let mut out = String::new();
    let n = ledger.len();
    let _ = writeln!(
        out,
        "fleet `{}`: {n} resource{} in the records",
        fleet.name(),
        if n == 1 { "" } else { "s" }
    );
    let width = ledger
        .rows
        .iter()
        .map(|r| r.to_string().len())
        .max()
        .unwrap_or(0);
    let mut seen = BTreeSet::new();
    for row in &ledger.rows {
        let flags = flags(ledger, fleet, row);
        seen.extend(flags.iter().copied());
        let line = format!("  {:<width$}  {}", row.to_string(), flags.join(", "));
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for (flag, meaning) in LEGEND {
        if seen.contains(flag) {
            let _ = writeln!(out, "{flag}: {meaning}");
        }
    }
    out
}

/// One row as JSON, with what else is known of it under `cached`.
fn row_json(ledger: &Ledger, fleet: &Fleet, row: &LedgerRow, cached: Value) -> Value {
    json!({
        "address": row.to_string(),
        "provider": row.provider,
        "kind": row.kind,
        "name": row.name,
        "region": row.region,
        "declared": declared(fleet, row).is_some(),
        "discovered": ledger.is_discovered(row),
        "intent": ledger.is_intent(row),
        "deleting": ledger.is_deleting(row),
        "cached": cached,
    })
}

/// `state show ADDRESS`.
pub(in crate::cli) fn show(
    io: &mut Io<'_>,
    fleet: &Fleet,
    store: &dyn RecordStore,
    address: &str,
    as_json: bool,
) -> u8 {
    let ledger = match store.load_ledger(fleet.name()) {
        Ok(l) => l,
        Err(e) => return error(io, &e),
    };
    let row = match pick(&ledger, fleet.name(), address) {
        Ok(row) => row,
        Err(why) => return error(io, &why),
    };
    let entry = match cached(store, fleet.name(), &row) {
        Ok(entry) => entry.map(|e| masked(e, &sensitive_fields(fleet, &row.kind))),
        Err(e) => return error(io, &e),
    };
    if as_json {
        let observation = entry.as_ref().map_or(
            Value::Null,
            |e| json!({"handle": e.handle, "observed": e.observed, "written": e.written}),
        );
        let doc = json!({
            "state": STATE_JSON,
            "fleet": fleet.name(),
            "resource": row_json(&ledger, fleet, &row, observation),
        });
        io.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).expect("JSON")
        ));
    } else {
        io.out(&show_text(&ledger, fleet, &row, entry.as_ref()));
    }
    0
}

/// The entry with every sensitive field's value replaced by `(sensitive)`. The cache
/// never holds one (observed types have no value field, and what is kept of what was
/// written leaves sensitive fields out); this keeps it so should that ever change.
fn masked(mut entry: CacheEntry, sensitive: &BTreeSet<&str>) -> CacheEntry {
    let hide = |map: &mut Map<String, Value>| {
        for (k, v) in map.iter_mut() {
            if sensitive.contains(k.as_str()) {
                *v = Value::String("(sensitive)".into());
            }
        }
    };
    if let Value::Object(map) = &mut entry.observed {
        hide(map);
    }
    hide(&mut entry.written);
    entry
}

fn show_text(
    ledger: &Ledger,
    fleet: &Fleet,
    row: &LedgerRow,
    entry: Option<&CacheEntry>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", subject_of(row));
    let declared = match declared(fleet, row) {
        Some("present") => "declared".to_owned(),
        Some(status) => format!("declared {status}"),
        None => "not declared: the next apply deletes it".to_owned(),
    };
    let mut notes = vec![declared];
    if ledger.is_discovered(row) {
        notes.push("discovered: adopted on its ownership marker alone".into());
    }
    if ledger.is_intent(row) {
        notes.push("intent: written before a create whose outcome is not known".into());
    }
    if ledger.is_deleting(row) {
        notes.push("deleting: marked before a delete that may have been sent".into());
    }
    let _ = writeln!(out, "  records: in the ledger; {}", notes.join("; "));
    let Some(entry) = entry else {
        let _ = writeln!(
            out,
            "  no observation cached (`refresh` or `apply` records one)"
        );
        return out;
    };
    let _ = writeln!(out, "  handle: {}", entry.handle);
    let _ = writeln!(out, "  observed:");
    fields(&mut out, &entry.observed);
    if !entry.written.is_empty() {
        let _ = writeln!(out, "  last written (fields the cloud does not report):");
        fields(&mut out, &Value::Object(entry.written.clone()));
    }
    out
}

/// One line per field of an object (compact JSON values); anything else on one line.
fn fields(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                match v.as_str() {
                    Some(hidden @ "(sensitive)") => {
                        let _ = writeln!(out, "    {k}: {hidden}");
                    }
                    _ => {
                        let _ = writeln!(out, "    {k}: {v}");
                    }
                }
            }
        }
        other => {
            let _ = writeln!(out, "    {other}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::masked;
    use crate::CacheEntry;

    #[test]
    fn a_sensitive_field_is_shown_as_sensitive_wherever_it_appears() {
        let entry = CacheEntry {
            name: "db-url".into(),
            region: "eu-west-3".into(),
            handle: "arn:secret".into(),
            observed: json!({"arn": "arn:secret", "valueFrom": "postgres://app:hunter2@db"}),
            written: json!({"valueFrom": "hunter2", "description": "the URL"})
                .as_object()
                .unwrap()
                .clone(),
        };
        let shown = masked(entry, &BTreeSet::from(["valueFrom"]));
        assert_eq!(shown.observed["valueFrom"], "(sensitive)");
        assert_eq!(shown.observed["arn"], "arn:secret");
        assert_eq!(shown.written["valueFrom"], "(sensitive)");
        assert_eq!(shown.written["description"], "the URL");
        assert!(!serde_json::to_string(&shown).unwrap().contains("hunter2"));
    }

    #[test]
    fn the_secrets_kind_marks_its_value_sensitive() {
        let fleet = crate::Fleet::builder("t").build().unwrap();
        let fields = super::sensitive_fields(&fleet, "secrets");
        assert!(fields.contains("valueFrom"), "{fields:?}");
        assert!(super::sensitive_fields(&fleet, "objectStore").is_empty());
    }
}
