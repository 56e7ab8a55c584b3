//! What a run of the suite found: one outcome per check (and per kind), printed for
//! people, and asserted on.

use std::fmt::{self, Write as _};

use crate::evidence::{Evidence, Record};

/// The outcome of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The behaviour holds.
    Pass,
    /// The behaviour does not hold: what was seen instead.
    Fail(String),
    /// The check did not run: why. A skip proves nothing.
    Skip(String),
}

impl Verdict {
    /// A failure, from anything printable.
    pub fn fail(why: impl fmt::Display) -> Self {
        Verdict::Fail(why.to_string())
    }

    /// A skip, from anything printable.
    pub fn skip(why: impl fmt::Display) -> Self {
        Verdict::Skip(why.to_string())
    }

    /// Whether the check passed.
    pub fn is_pass(&self) -> bool {
        matches!(self, Verdict::Pass)
    }

    /// Whether the check failed.
    pub fn is_fail(&self) -> bool {
        matches!(self, Verdict::Fail(_))
    }

    /// Whether the check was skipped.
    pub fn is_skip(&self) -> bool {
        matches!(self, Verdict::Skip(_))
    }
}

impl From<Result<(), String>> for Verdict {
    fn from(result: Result<(), String>) -> Self {
        match result {
            Ok(()) => Verdict::Pass,
            Err(why) => Verdict::Fail(why),
        }
    }
}

/// One line of a report: a check, the kind it ran on (none for checks of the backend
/// as a whole), and its verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckOutcome {
    /// The check's name: the function that ran it.
    pub check: &'static str,
    /// The kind, for checks that run per kind.
    pub kind: Option<&'static str>,
    /// What it found.
    pub verdict: Verdict,
}

impl fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            Some(kind) => format!("{} [{kind}]", self.check),
            None => self.check.to_owned(),
        };
        match &self.verdict {
            Verdict::Pass => write!(f, "PASS {what}"),
            Verdict::Fail(why) => write!(f, "FAIL {what}: {why}"),
            Verdict::Skip(why) => write!(f, "SKIP {what} ({why})"),
        }
    }
}

/// Everything a run found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The provider of the backend under test.
    pub provider: String,
    /// The name prefix of the run.
    pub prefix: String,
    /// One outcome per check run (or skipped), in the order they ran.
    pub outcomes: Vec<CheckOutcome>,
}

impl Report {
    /// The outcomes that passed.
    pub fn passed(&self) -> impl Iterator<Item = &CheckOutcome> {
        self.outcomes.iter().filter(|o| o.verdict.is_pass())
    }

    /// The outcomes that failed.
    pub fn failed(&self) -> impl Iterator<Item = &CheckOutcome> {
        self.outcomes.iter().filter(|o| o.verdict.is_fail())
    }

    /// The outcomes that were skipped.
    pub fn skipped(&self) -> impl Iterator<Item = &CheckOutcome> {
        self.outcomes.iter().filter(|o| o.verdict.is_skip())
    }

    /// The outcome of `check` on `kind` (`None` for checks of the backend as a whole).
    pub fn outcome(&self, check: &str, kind: Option<&str>) -> Option<&CheckOutcome> {
        self.outcomes
            .iter()
            .find(|o| o.check == check && o.kind == kind)
    }

    /// Whether `check` failed on some kind (or as a whole).
    pub fn check_failed(&self, check: &str) -> bool {
        self.failed().any(|o| o.check == check)
    }

    /// The (kind, act) pairs the passed checks held against `record`, as evidence of
    /// `provider`'s suite `suite`, for the kinds `kinds` keeps (a backend whose kinds
    /// run against different stand-ins counts each record's kinds apart). A check is
    /// counted for the act it exercises (`create`, `read`, `list`, `update`, `replace`,
    /// `delete`, `mark`); the checks of a backend as a whole are not counted.
    pub fn evidence(
        &self,
        provider: &str,
        record: Record,
        suite: &str,
        kinds: impl Fn(&str) -> bool,
    ) -> Evidence {
        let mut evidence = Evidence::new(provider, record, suite);
        for outcome in self.passed() {
            if let (Some(kind), Some(act)) = (outcome.kind, act_of(outcome.check))
                && kinds(kind)
            {
                evidence.checked(kind, act);
            }
        }
        evidence
    }

    /// Whether nothing failed.
    pub fn is_success(&self) -> bool {
        self.failed().next().is_none()
    }

    /// Whether nothing ran at all: every outcome is a skip (or there is none).
    pub fn nothing_ran(&self) -> bool {
        self.outcomes.iter().all(|o| o.verdict.is_skip())
    }

    /// The report as text: a header, one line per outcome, the skips again under a
    /// banner, and a summary line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "backend conformance of `{}` (run prefix `{}`)",
            self.provider, self.prefix
        );
        for o in &self.outcomes {
            let _ = writeln!(out, "  {o}");
        }
        let skipped: Vec<_> = self.skipped().collect();
        if !skipped.is_empty() {
            let _ = writeln!(
                out,
                "!!!!!!!! {} CHECK{} SKIPPED: they did not run and prove nothing !!!!!!!!",
                skipped.len(),
                if skipped.len() == 1 { "" } else { "S" }
            );
            for o in skipped {
                let _ = writeln!(out, "  {o}");
            }
        }
        let (p, f, s) = (
            self.passed().count(),
            self.failed().count(),
            self.skipped().count(),
        );
        let _ = writeln!(out, "{p} passed, {f} failed, {s} skipped");
        out
    }

    /// Prints the report, then panics if a check failed, or if nothing ran and the
    /// environment variable `CI` is `true`.
    pub fn assert_passed(&self) {
        let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
        self.assert_passed_with(ci);
    }

    /// Prints the report, then panics if a check failed, or if nothing ran and `ci`
    /// is set: on CI, a suite that only skipped is a suite that was not configured.
    pub fn assert_passed_with(&self, ci: bool) {
        print!("{}", self.render());
        if let Some(problem) = self.verdict(ci) {
            panic!("{problem}");
        }
    }

    /// Why the report does not pass (failures, or nothing ran on CI), or `None` when it
    /// does. [`assert_passed_with`](Self::assert_passed_with) panics with this.
    pub fn verdict(&self, ci: bool) -> Option<String> {
        let failed: Vec<String> = self.failed().map(|o| o.to_string()).collect();
        if !failed.is_empty() {
            return Some(format!(
                "the backend `{}` fails {} conformance check{}:\n  {}",
                self.provider,
                failed.len(),
                if failed.len() == 1 { "" } else { "s" },
                failed.join("\n  ")
            ));
        }
        if ci && self.nothing_ran() {
            return Some(format!(
                "every conformance check of the backend `{}` was skipped, on CI: the suite \
                 proved nothing (no capabilities, no samples, or no region given?)",
                self.provider
            ));
        }
        None
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// The act of a kind a conformance check exercises, for evidence counts.
fn act_of(check: &str) -> Option<&'static str> {
    Some(match check {
        "create_writes_the_marker" | "a_taken_name_is_conflict" => "create",
        "read_after_create_eventually_sees_it"
        | "read_reports_the_marker_and_the_engine_strips_it"
        | "reported_fields_round_trip_without_sentinels"
        | "observation_tells_present_from_absent" => "read",
        "list_answers_only_its_region"
        | "list_shows_resources_whatever_their_owner"
        | "list_readings_equal_reads" => "list",
        "update_changes_only_mutable_fields" => "update",
        "a_forces_replace_change_is_a_replace" => "replace",
        "delete_of_an_absent_resource_is_not_found" | "prune_deletes_only_owned_orphans" => {
            "delete"
        }
        "mark_keeps_ours_and_refuses_anothers" => "mark",
        _ => return None,
    })
}
