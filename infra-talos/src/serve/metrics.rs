//! The service's metrics in the Prometheus text exposition format, version 0.0.4.
//!
//! [`Snapshot`] holds what the service counts and what it read from the store;
//! [`render`] writes it, every metric with one `# HELP` and one `# TYPE` line. The
//! operation-state gauge lists every state of §4 even at zero, and the plan-state
//! gauge every state of §2, so a dashboard sees a state empty rather than missing.
//! [`METRICS`] gives each metric's meaning for an operator.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::contract::operation::OperationState;
use crate::contract::plan::PlanState;

/// The upper bounds (seconds) of the store-latency histogram's buckets.
pub(crate) const LATENCY_BUCKETS: [f64; 8] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0];

/// A latency histogram over [`LATENCY_BUCKETS`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LatencySummary {
    /// How many durations were observed.
    pub(crate) count: u64,
    /// Their sum, in seconds.
    pub(crate) sum_seconds: f64,
    /// Each bucket's upper bound and the cumulative count of durations at most it.
    pub(crate) buckets: Vec<(f64, u64)>,
}

impl Default for LatencySummary {
    fn default() -> Self {
        Self {
            count: 0,
            sum_seconds: 0.0,
            buckets: LATENCY_BUCKETS.iter().map(|&le| (le, 0)).collect(),
        }
    }
}

impl LatencySummary {
    /// Records one duration of `seconds`. A negative or non-finite duration is
    /// counted as zero, so the sum stays meaningful.
    pub(crate) fn observe(&mut self, seconds: f64) {
        let seconds = if seconds.is_finite() && seconds > 0.0 {
            seconds
        } else {
            0.0
        };
        self.count += 1;
        self.sum_seconds += seconds;
        for (le, n) in &mut self.buckets {
            if seconds <= *le {
                *n += 1;
            }
        }
    }
}

/// What the metrics endpoint reports at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Snapshot {
    /// Operations by state name (`committed`, `sending`, …).
    pub(crate) operations_by_state: BTreeMap<String, u64>,
    /// Attempts (sends) made by this service since it started.
    pub(crate) attempts_total: u64,
    /// Refused commitments and attempts by comparison number.
    pub(crate) refusals_by_comparison: BTreeMap<String, u64>,
    /// Machines with an open drift record.
    pub(crate) drift_records_open: u64,
    /// Frozen machines.
    pub(crate) frozen_machines: u64,
    /// Whether recovery mode is in effect.
    pub(crate) recovery_mode: bool,
    /// Machine scopes by recovery scope state.
    pub(crate) recovery_scopes_by_state: BTreeMap<String, u64>,
    /// Plans by state name.
    pub(crate) plans_by_state: BTreeMap<String, u64>,
    /// How long store reads took.
    pub(crate) store_latency: LatencySummary,
    /// Controller passes run since start.
    pub(crate) controller_passes_total: u64,
    /// Controller passes that ended in an error.
    pub(crate) controller_pass_failures_total: u64,
    /// When the last controller pass ended, in seconds since the Unix epoch.
    pub(crate) last_pass_unix_seconds: Option<f64>,
    /// HTTP answers by status code.
    pub(crate) http_requests_by_status: BTreeMap<u16, u64>,
}

/// Every metric [`render`] writes, with what it tells an operator.
pub(crate) const METRICS: &[(&str, &str)] = &[
    (
        "infra_talos_operations",
        "Operations by state; sending, verifying or unresolved ones hold their machine's scope.",
    ),
    (
        "infra_talos_attempts_total",
        "Configuration sends this service made since it started.",
    ),
    (
        "infra_talos_refusals_total",
        "Commitments and attempts refused, by the numbered comparison that refused.",
    ),
    (
        "infra_talos_drift_records_open",
        "Machines whose running configuration differs from Applied and awaits adoption or revert.",
    ),
    (
        "infra_talos_frozen_machines",
        "Machines frozen: no plan commits or sends on them until an approver lifts the freeze.",
    ),
    (
        "infra_talos_recovery_mode",
        "1 while recovery mode is in effect (the service then runs no plan), else 0.",
    ),
    (
        "infra_talos_recovery_scopes",
        "Machine scopes by recovery state; all normal outside recovery mode.",
    ),
    (
        "infra_talos_plans",
        "Plans by state; proposed ones wait for an approver.",
    ),
    (
        "infra_talos_store_latency_seconds",
        "How long the service's store reads took.",
    ),
    (
        "infra_talos_controller_passes_total",
        "Executor and drift passes run since the service started.",
    ),
    (
        "infra_talos_controller_pass_failures_total",
        "Passes that ended in an error; a rising count needs a look at the log.",
    ),
    (
        "infra_talos_last_pass_timestamp_seconds",
        "When the last pass ended (Unix seconds); a stale value means the controller is stuck.",
    ),
    (
        "infra_talos_http_requests_total",
        "HTTP answers of the service, by status code.",
    ),
];

/// The help text of `name` from [`METRICS`].
fn help(name: &str) -> &'static str {
    METRICS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, h)| h)
}

/// `s` in the text format: the label values of the snapshot, and its counters.
pub(crate) fn render(s: &Snapshot) -> String {
    let mut out = String::new();

    let mut operations: BTreeMap<String, u64> = OperationState::ALL
        .iter()
        .map(|st| (st.name().to_owned(), 0))
        .collect();
    for (state, n) in &s.operations_by_state {
        *operations.entry(state.clone()).or_default() += n;
    }
    labelled(
        &mut out,
        "infra_talos_operations",
        "gauge",
        "state",
        &operations,
    );
    single(
        &mut out,
        "infra_talos_attempts_total",
        "counter",
        &s.attempts_total.to_string(),
    );
    labelled(
        &mut out,
        "infra_talos_refusals_total",
        "counter",
        "comparison",
        &s.refusals_by_comparison,
    );
    single(
        &mut out,
        "infra_talos_drift_records_open",
        "gauge",
        &s.drift_records_open.to_string(),
    );
    single(
        &mut out,
        "infra_talos_frozen_machines",
        "gauge",
        &s.frozen_machines.to_string(),
    );
    single(
        &mut out,
        "infra_talos_recovery_mode",
        "gauge",
        if s.recovery_mode { "1" } else { "0" },
    );
    labelled(
        &mut out,
        "infra_talos_recovery_scopes",
        "gauge",
        "state",
        &s.recovery_scopes_by_state,
    );
    let mut plans: BTreeMap<String, u64> = PlanState::ALL
        .iter()
        .map(|st| (st.name().to_owned(), 0))
        .collect();
    for (state, n) in &s.plans_by_state {
        *plans.entry(state.clone()).or_default() += n;
    }
    labelled(&mut out, "infra_talos_plans", "gauge", "state", &plans);
    histogram(
        &mut out,
        "infra_talos_store_latency_seconds",
        &s.store_latency,
    );
    single(
        &mut out,
        "infra_talos_controller_passes_total",
        "counter",
        &s.controller_passes_total.to_string(),
    );
    single(
        &mut out,
        "infra_talos_controller_pass_failures_total",
        "counter",
        &s.controller_pass_failures_total.to_string(),
    );
    if let Some(at) = s.last_pass_unix_seconds {
        single(
            &mut out,
            "infra_talos_last_pass_timestamp_seconds",
            "gauge",
            &float(at),
        );
    }
    let statuses: BTreeMap<String, u64> = s
        .http_requests_by_status
        .iter()
        .map(|(code, n)| (code.to_string(), *n))
        .collect();
    labelled(
        &mut out,
        "infra_talos_http_requests_total",
        "counter",
        "status",
        &statuses,
    );
    out
}

fn header(out: &mut String, name: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help(name)));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A metric with one sample and no labels.
fn single(out: &mut String, name: &str, kind: &str, value: &str) {
    header(out, name, kind);
    let _ = writeln!(out, "{name} {value}");
}

/// A metric with one sample per value of one label.
fn labelled(out: &mut String, name: &str, kind: &str, label: &str, values: &BTreeMap<String, u64>) {
    header(out, name, kind);
    for (value, n) in values {
        let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {n}", escape_label(value));
    }
}

fn histogram(out: &mut String, name: &str, h: &LatencySummary) {
    header(out, name, "histogram");
    for (le, n) in &h.buckets {
        let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {n}", float(*le));
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum {}", float(h.sum_seconds));
    let _ = writeln!(out, "{name}_count {}", h.count);
}

/// A float as the format writes it, infinities and NaN included.
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{v}")
    }
}

/// A label value escaped: backslash, double quote and line feed.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text escaped: backslash and line feed.
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::{LATENCY_BUCKETS, LatencySummary, METRICS, Snapshot, escape_label, render};

    fn sample() -> Snapshot {
        let mut s = Snapshot {
            attempts_total: 12,
            drift_records_open: 1,
            frozen_machines: 2,
            recovery_mode: false,
            controller_passes_total: 340,
            controller_pass_failures_total: 3,
            last_pass_unix_seconds: Some(1_767_225_600.25),
            ..Snapshot::default()
        };
        s.operations_by_state.insert("completed".into(), 9);
        s.operations_by_state.insert("unresolved".into(), 1);
        s.refusals_by_comparison.insert("3".into(), 4);
        s.refusals_by_comparison.insert("6".into(), 1);
        s.recovery_scopes_by_state.insert("normal".into(), 5);
        s.recovery_scopes_by_state
            .insert("blocked \"on\" a\\b\nc".into(), 1);
        s.plans_by_state.insert("proposed".into(), 2);
        s.plans_by_state.insert("committed".into(), 10);
        s.http_requests_by_status.insert(200, 1000);
        s.http_requests_by_status.insert(403, 7);
        for secs in [0.0004, 0.002, 0.002, 0.03, 0.7, 2.0, 9.0] {
            s.store_latency.observe(secs);
        }
        s
    }

    #[test]
    fn a_sample_renders_as_recorded() {
        insta::assert_snapshot!(render(&sample()));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        let text = render(&sample());
        assert!(text.contains(r#"infra_talos_recovery_scopes{state="blocked \"on\" a\\b\nc"} 1"#));
    }

    /// Splits a sample line into its name, its labels (raw) and its value.
    fn sample_line(line: &str) -> Option<(&str, Option<&str>, &str)> {
        let name_end = line.find(['{', ' '])?;
        let name = &line[..name_end];
        let valid_name = name.chars().enumerate().all(|(i, c)| {
            c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
        });
        if name.is_empty() || !valid_name {
            return None;
        }
        let rest = &line[name_end..];
        let (labels, value) = if let Some(after) = rest.strip_prefix('{') {
            // Scan for the closing brace outside quoted values.
            let mut quoted = false;
            let mut escaped = false;
            let mut close = None;
            for (i, c) in after.char_indices() {
                match (quoted, escaped, c) {
                    (true, true, _) => escaped = false,
                    (true, false, '\\') => escaped = true,
                    (_, false, '"') => quoted = !quoted,
                    (false, _, '}') => {
                        close = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let close = close?;
            let labels = &after[..close];
            (Some(labels), after[close + 1..].strip_prefix(' ')?)
        } else {
            (None, rest.strip_prefix(' ')?)
        };
        if let Some(labels) = labels {
            // `name="value"` pairs separated by commas.
            let ok = labels.split("\",").all(|pair| {
                pair.split_once("=\"").is_some_and(|(k, _)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            });
            if !ok || !labels.ends_with('"') {
                return None;
            }
        }
        let numeric = value.parse::<f64>().is_ok() || matches!(value, "+Inf" | "-Inf" | "NaN");
        numeric.then_some((name, labels, value))
    }

    #[test]
    fn every_line_parses_and_every_metric_has_help_and_type_once() {
        for snapshot in [sample(), Snapshot::default()] {
            let text = render(&snapshot);
            assert!(text.ends_with('\n'));
            let mut helps: BTreeMap<&str, usize> = BTreeMap::new();
            let mut types: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
            let mut sampled = BTreeSet::new();
            for line in text.lines() {
                if let Some(rest) = line.strip_prefix("# HELP ") {
                    let (name, _) = rest.split_once(' ').expect("help text");
                    *helps.entry(name).or_default() += 1;
                } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                    let (name, kind) = rest.split_once(' ').expect("type");
                    assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                    let e = types.entry(name).or_insert((0, kind));
                    e.0 += 1;
                } else {
                    assert!(!line.starts_with('#'), "{line}");
                    let (name, _, _) =
                        sample_line(line).unwrap_or_else(|| panic!("not a sample: {line:?}"));
                    // A histogram's samples belong to its base name.
                    let base = ["_bucket", "_sum", "_count"]
                        .iter()
                        .find_map(|suffix| {
                            name.strip_suffix(suffix)
                                .filter(|b| types.get(b).is_some_and(|t| t.1 == "histogram"))
                        })
                        .unwrap_or(name);
                    assert!(types.contains_key(base), "{base} sampled before its TYPE");
                    sampled.insert(base);
                }
            }
            assert!(helps.values().all(|n| *n == 1), "{helps:?}");
            assert!(types.values().all(|(n, _)| *n == 1), "{types:?}");
            assert_eq!(
                helps.keys().collect::<Vec<_>>(),
                types.keys().collect::<Vec<_>>()
            );
            // Every documented metric is rendered, but the last-pass time only when
            // a pass has ended.
            for (name, meaning) in METRICS {
                assert!(!meaning.is_empty());
                let expected = *name != "infra_talos_last_pass_timestamp_seconds"
                    || snapshot.last_pass_unix_seconds.is_some();
                assert_eq!(helps.contains_key(name), expected, "{name}");
            }
            assert_eq!(helps.len(), types.len());
            for name in helps.keys() {
                assert!(
                    METRICS.iter().any(|(n, _)| n == name),
                    "{name} undocumented"
                );
            }
        }
    }

    #[test]
    fn every_operation_state_is_present_even_at_zero() {
        let text = render(&Snapshot::default());
        for state in [
            "committed",
            "sending",
            "verifying",
            "completed",
            "rejected",
            "failed",
            "cancelled",
            "unresolved",
        ] {
            assert!(
                text.contains(&format!("infra_talos_operations{{state=\"{state}\"}} 0\n")),
                "{state}"
            );
        }
        assert!(text.contains("infra_talos_recovery_mode 0\n"));
        assert!(!text.contains("infra_talos_last_pass_timestamp_seconds"));
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_with_the_count() {
        let text = render(&sample());
        let buckets: Vec<(String, u64)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("infra_talos_store_latency_seconds_bucket{le=\""))
            .map(|rest| {
                let (le, n) = rest.split_once("\"} ").expect("bucket");
                (le.to_owned(), n.parse().expect("count"))
            })
            .collect();
        assert_eq!(buckets.len(), LATENCY_BUCKETS.len() + 1);
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
        let les: Vec<f64> = buckets[..LATENCY_BUCKETS.len()]
            .iter()
            .map(|(le, _)| le.parse().expect("le"))
            .collect();
        assert_eq!(les, LATENCY_BUCKETS);
        let (last_le, last_n) = buckets.last().expect("+Inf");
        assert_eq!(last_le, "+Inf");
        assert!(text.contains(&format!(
            "infra_talos_store_latency_seconds_count {last_n}\n"
        )));
        assert_eq!(*last_n, 7);
        // 0.0004 and the two 0.002 fall at or under 0.005; 9 s only under +Inf.
        assert_eq!(buckets[1].1, 3);
        assert_eq!(buckets[LATENCY_BUCKETS.len() - 1].1, 6);
    }

    #[test]
    fn observing_is_cumulative_and_clamps_odd_durations() {
        let mut h = LatencySummary::default();
        for secs in [f64::NAN, -1.0, 0.001, 0.0011, f64::INFINITY] {
            h.observe(secs);
        }
        assert_eq!(h.count, 5);
        assert!((h.sum_seconds - 0.0021).abs() < 1e-12);
        assert_eq!(h.buckets[0], (0.001, 4));
        assert_eq!(h.buckets[1], (0.005, 5));
        assert!(h.buckets.iter().all(|(_, n)| *n <= h.count));
    }
}
