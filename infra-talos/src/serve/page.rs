//! The approval page's HTML: whole documents rendered on the server, with a small
//! inline style sheet and no script at all.
//!
//! Every function here is pure: it takes the views the store returned and the signed
//! in principal ([`Who`]) and returns a complete HTML5 document. Every piece of text
//! that comes from outside this module (identifiers, reasons, details, values of the
//! redacted review) passes through [`escape`], and identifiers placed in a URL path
//! are percent-encoded first. Every form posts and carries the session's CSRF value
//! in a hidden `csrf` field; an act's form also names the role it is made in (`as`),
//! and a freeze or unfreeze its `reason`.
//!
//! Routes the pages link to: `/plans`, `/plans/{id}` (with `/approve`, `/revoke`,
//! `/cancel`), `/drift`, `/machines/{id}/timeline` (with `/freeze`, `/unfreeze`,
//! `/adopt`, `/revert`),
//! `/login`, `/logout`.

use std::fmt::Write as _;

use super::review::{Change, ReviewDiff, Shown};
use crate::contract::operation::OperationKind;
use crate::contract::plan::PlanState;
use crate::contract::recovery::ScopeState;
use crate::contract::{InstantMs, Role, SpanMs};
use crate::store::{MachineView, ObservationView, PlanView, TimelineEntry};

/// The signed-in principal a page is rendered for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Who {
    /// The principal's identifier.
    pub(crate) principal: String,
    /// The roles it holds.
    pub(crate) roles: Vec<Role>,
    /// The session's CSRF value, placed in every form.
    pub(crate) csrf: String,
}

impl Who {
    fn holds(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// Whether it may read the configuration a plan applies (its redacted diff): only
    /// a principal who may approve a plan, that is one holding the approver role. No
    /// principal dispatches (the controller does), and every other role sees the
    /// artifact's digest only.
    pub(crate) fn reads_configuration(&self) -> bool {
        self.holds(Role::Approver)
    }

    /// The roles it holds among `allowed`, in `allowed`'s order.
    fn among(&self, allowed: &[Role]) -> Vec<Role> {
        allowed.iter().copied().filter(|r| self.holds(*r)).collect()
    }
}

/// How many observations the plan page lists.
const MAX_OBSERVATIONS: usize = 10;

/// `text` with `&`, `<`, `>`, `"` and `'` replaced by character references, safe in
/// element content and in quoted attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as one URL path segment: every byte but `A–Z a–z 0–9 - . _ ~`
/// percent-encoded.
pub(crate) fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A store time as `YYYY-MM-DD HH:MM:SS UTC`.
pub(crate) fn utc(at: InstantMs) -> String {
    let ms = at.0;
    let days = i64::try_from(ms / 86_400_000).unwrap_or(0);
    let secs = ms % 86_400_000 / 1000;
    let (y, m, d) = crate::civil::date_of_day(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// A span for people: `250 ms`, `45 s`, `5 min`, `1 h 30 min`.
fn span(s: SpanMs) -> String {
    if !s.0.is_multiple_of(1000) || s.0 == 0 {
        return format!("{} ms", s.0);
    }
    let secs = s.0 / 1000;
    let (h, m, sec) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut parts = Vec::new();
    if h > 0 {
        parts.push(format!("{h} h"));
    }
    if m > 0 {
        parts.push(format!("{m} min"));
    }
    if sec > 0 {
        parts.push(format!("{sec} s"));
    }
    parts.join(" ")
}

/// The pages' one style sheet, inline; the content security policy allows it by its
/// digest ([`super::headers`]), so it must be placed in `<style>` exactly as it is.
pub(crate) const STYLE: &str = "
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fafafa}
header{display:flex;justify-content:space-between;align-items:center;gap:1em;padding:.6em 1.2em;background:#24292f;color:#fff}
header a{color:#fff;margin-right:1em}
header form{display:inline;margin-left:.6em}
main{max-width:72em;margin:0 auto;padding:1em 1.2em 3em}
h1{font-size:1.5em}
h2{font-size:1.2em;margin-top:1.6em}
table{border-collapse:collapse;width:100%;margin:.4em 0}
th,td{border-bottom:1px solid #d0d7de;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f0f2f4}
code,.mono{font-family:ui-monospace,monospace;font-size:.92em;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em}
dt{font-weight:600}
dd{margin:0}
.added{background:#e6ffec}
.removed{background:#ffebe9}
.context{color:#57606a}
.withheld{color:#8250df;font-style:italic}
.warn{border-left:4px solid #bf8700;background:#fff8c5;padding:.5em .8em;margin:.6em 0}
.error{border-left:4px solid #cf222e;background:#ffebe9;padding:.5em .8em;margin:.6em 0}
.why{color:#57606a}
.state{font-weight:600}
form.act{margin:.6em 0;padding:.6em .8em;border:1px solid #d0d7de;background:#fff}
button{font:inherit;padding:.25em .9em}
textarea{width:100%;min-height:6em;font-family:ui-monospace,monospace}
details{margin-top:1.6em}
summary{cursor:pointer;font-weight:600}
";

/// A complete document: `title`, the header for `who`, and `body`.
fn document(title: &str, who: Option<&Who>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + STYLE.len() + 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<meta name=\"referrer\" content=\"no-referrer\">\n");
    let _ = writeln!(out, "<title>{} · infra-talos</title>", escape(title));
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>");
    out.push_str("<header>\n<nav><strong>infra-talos</strong> ");
    if who.is_some() {
        out.push_str("<a href=\"/plans\">Plans</a><a href=\"/drift\">Drift</a>");
    }
    out.push_str("</nav>\n");
    match who {
        Some(w) => {
            let _ = writeln!(
                out,
                "<div>Signed in as <strong>{}</strong> ({})\
                 <form method=\"post\" action=\"/logout\">{}<button type=\"submit\">Sign out</button></form></div>",
                escape(&w.principal),
                escape(&roles_text(&w.roles)),
                csrf_field(&w.csrf),
            );
        }
        None => out.push_str("<div>Not signed in</div>\n"),
    }
    out.push_str("</header>\n<main>\n");
    let _ = writeln!(out, "<h1>{}</h1>", escape(title));
    out.push_str(body);
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

fn roles_text(roles: &[Role]) -> String {
    if roles.is_empty() {
        "no role".to_owned()
    } else {
        roles
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn csrf_field(csrf: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(csrf)
    )
}

/// The role an act is made in: fixed when only one is possible, else a choice.
fn role_field(roles: &[Role]) -> String {
    match roles {
        [one] => format!(
            "<input type=\"hidden\" name=\"as\" value=\"{}\">",
            escape(&one.to_string())
        ),
        _ => {
            let mut out = String::from("<label>acting as <select name=\"as\">");
            for r in roles {
                let r = escape(&r.to_string());
                let _ = write!(out, "<option value=\"{r}\">{r}</option>");
            }
            out.push_str("</select></label> ");
            out
        }
    }
}

fn plan_href(id: &str) -> String {
    format!("/plans/{}", segment(id))
}

fn timeline_href(machine: &str) -> String {
    format!("/machines/{}/timeline", segment(machine))
}

fn kind_text(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::ApplyConfig => "apply",
        OperationKind::Adopt => "adopt",
    }
}

fn short_digest(hex: &str) -> String {
    hex.chars().take(12).collect()
}

/// The sign-in page: a form that posts a token the service issued to a
/// certificate-authenticated principal.
pub(crate) fn login_page(error: Option<&str>, csrf: &str) -> String {
    let mut body = String::new();
    if let Some(e) = error {
        let _ = writeln!(body, "<p class=\"error\">{}</p>", escape(e));
    }
    body.push_str(
        "<p>A browser that presents a client certificate issued by this installation's \
         authority is signed in by it and never sees this page.</p>\n\
         <p>Without one, paste a sign-in token here. A principal authenticated by its \
         certificate obtains one from the service (<code>POST /api/v1/tokens</code>); \
         it names that principal, holds its roles, and expires shortly.</p>\n",
    );
    let _ = writeln!(
        body,
        "<form class=\"act\" method=\"post\" action=\"/login\">{}\n\
         <label for=\"token\">Sign-in token</label>\n\
         <textarea id=\"token\" name=\"token\" required autocomplete=\"off\" spellcheck=\"false\"></textarea>\n\
         <p><button type=\"submit\">Sign in</button></p>\n</form>",
        csrf_field(csrf)
    );
    document("Sign in", None, &body)
}

/// What a reader should know about a plan before opening it.
fn plan_notes(plan: &PlanView, machine: Option<&MachineView>) -> Vec<String> {
    let mut notes = Vec::new();
    if plan.unseen_overwrite() {
        notes.push(
            "reverts a drifted configuration no reviewer has seen: approving overwrites it"
                .to_owned(),
        );
    }
    if let Some(m) = machine
        && !plan.state.is_terminal()
    {
        if m.baseline_revision != plan.baseline_revision {
            notes.push(format!(
                "the machine's Applied moved since the plan was made (baseline {} now, {} bound): commitment will refuse it",
                m.baseline_revision, plan.baseline_revision
            ));
        }
        if m.frozen {
            notes.push("the machine is frozen".to_owned());
        }
        if m.open_drift.is_some() && plan.bound_drift != m.open_drift {
            notes.push("the machine has an open drift record this plan does not bind".to_owned());
        }
        if m.scope != ScopeState::Normal {
            notes.push(format!("the machine's recovery scope is {}", m.scope));
        }
    }
    notes
}

fn plans_table(plans: &[&PlanView], machines: &[MachineView]) -> String {
    let mut out = String::from(
        "<table>\n<tr><th>Plan</th><th>Machine</th><th>Kind</th><th>State</th>\
         <th>Artifact digest</th><th>Baseline</th><th>Notes</th></tr>\n",
    );
    for p in plans {
        let machine = machines.iter().find(|m| m.id == p.machine);
        let digest = p.artifact_digest.to_hex();
        let notes = plan_notes(p, machine)
            .iter()
            .map(|n| escape(n))
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = writeln!(
            out,
            "<tr><td><a href=\"{}\">{}</a></td><td><a href=\"{}\">{}</a></td><td>{}</td>\
             <td class=\"state\">{}</td><td class=\"mono\" title=\"{}\">{}…</td><td>{}</td><td>{}</td></tr>",
            escape(&plan_href(&p.id)),
            escape(&p.id),
            escape(&timeline_href(&p.machine)),
            escape(&p.machine),
            kind_text(p.kind),
            p.state,
            digest,
            short_digest(&digest),
            p.baseline_revision,
            notes
        );
    }
    out.push_str("</table>\n");
    out
}

/// The plans: those awaiting approval first, then approved ones, then the rest
/// collapsed.
pub(crate) fn plans_page(who: &Who, plans: &[PlanView], machines: &[MachineView]) -> String {
    let of = |state: PlanState| -> Vec<&PlanView> {
        plans.iter().filter(|p| p.state == state).collect()
    };
    let proposed = of(PlanState::Proposed);
    let approved = of(PlanState::Approved);
    let others: Vec<&PlanView> = plans
        .iter()
        .filter(|p| !matches!(p.state, PlanState::Proposed | PlanState::Approved))
        .collect();

    let mut body = String::new();
    body.push_str("<h2>Awaiting approval</h2>\n");
    if proposed.is_empty() {
        body.push_str("<p>No plan awaits approval.</p>\n");
    } else {
        if !who.holds(Role::Approver) {
            body.push_str(
                "<p class=\"why\">You can read these plans; approving needs the approver role.</p>\n",
            );
        }
        body.push_str(&plans_table(&proposed, machines));
    }
    body.push_str("<h2>Approved, waiting for the controller to commit</h2>\n");
    if approved.is_empty() {
        body.push_str("<p>None.</p>\n");
    } else {
        body.push_str(&plans_table(&approved, machines));
    }
    let _ = writeln!(
        body,
        "<details><summary>Committed, revoked, cancelled and expired plans ({})</summary>",
        others.len()
    );
    if others.is_empty() {
        body.push_str("<p>None.</p>\n");
    } else {
        body.push_str(&plans_table(&others, machines));
    }
    body.push_str("</details>\n");
    body.push_str(&entry_form(who));
    document("Plans", Some(who), &body)
}

/// recovery-admin's form to enter recovery mode after a restore (§7.2); nothing for
/// anyone else.
fn entry_form(who: &Who) -> String {
    if !who.holds(Role::RecoveryAdmin) {
        return String::new();
    }
    let fields = "<p>Only after every controller instance that ran against the store was \
         stopped and the store restored: a new epoch; every scope becomes pre-restore \
         unaccounted and nothing is sent to a machine until its scope is released.</p>\n\
         <p><label>Every pre-restore instance stopped at (UTC) <input type=\"text\" \
         name=\"stopped_at\" required placeholder=\"2026-12-02T15:04:05Z\"></label></p>\n\
         <p><label>Backups restored, one FAMILY=ID@TIME a line<textarea name=\"backups\" \
         required placeholder=\"database=store-0412.dump@2026-12-02T04:12:00Z\"></textarea>\
         </label></p>\n";
    format!(
        "<details><summary>Enter recovery mode</summary>\n{}</details>\n",
        act_form(
            who,
            "/recovery/enter",
            &[Role::RecoveryAdmin],
            fields,
            "Enter recovery mode"
        )
    )
}

/// The page in recovery mode (§7): each scope's state, and the acts §7.5 always
/// allows — revoking an approval and cancelling a plan still open, freezing a
/// machine. Everything else waits until recovery mode is left.
pub(crate) fn recovery_page(
    who: &Who,
    epoch: &str,
    machines: &[MachineView],
    plans: &[PlanView],
) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<p class=\"warn\">Recovery mode is in effect (epoch <code>{}</code>): no plan is \
         run and nothing is sent to a machine until its scope is released. recovery-admin \
         works the scopes through with the recovery commands; revoking, cancelling and \
         freezing stay open to everyone whose role allows them.</p>",
        escape(epoch)
    );
    body.push_str("<h2>Scopes</h2>\n<table>\n<tr><th>Machine</th><th>Scope</th><th>Frozen</th><th></th></tr>\n");
    let freezers = who.among(&[
        Role::Author,
        Role::Publisher,
        Role::Approver,
        Role::RecoveryAdmin,
    ]);
    let reason =
        "<label>Reason <input type=\"text\" name=\"reason\" required maxlength=\"1024\"></label> ";
    for m in machines {
        let freeze = if m.frozen || freezers.is_empty() {
            String::new()
        } else {
            act_form(
                who,
                &format!("/machines/{}/freeze", segment(&m.id)),
                &freezers,
                reason,
                "Freeze",
            )
        };
        let _ = writeln!(
            body,
            "<tr><td>{}</td><td class=\"state\">{}</td><td>{}</td><td>{freeze}</td></tr>",
            escape(&m.id),
            escape(&m.scope.to_string()),
            if m.frozen { "yes" } else { "no" },
        );
    }
    body.push_str("</table>\n<h2>Open plans</h2>\n");
    let open: Vec<&PlanView> = plans
        .iter()
        .filter(|p| {
            matches!(
                p.state,
                PlanState::Proposed | PlanState::Approved | PlanState::Committed
            )
        })
        .collect();
    if open.is_empty() {
        body.push_str("<p>None.</p>\n");
    }
    let revokers = who.among(&[Role::Approver, Role::RecoveryAdmin]);
    for p in open {
        let _ = writeln!(
            body,
            "<h3>{} <span class=\"why\">({} on {}, {})</span></h3>",
            escape(&p.id),
            kind_text(p.kind),
            escape(&p.machine),
            p.state
        );
        let base = plan_href(&p.id);
        if p.state != PlanState::Proposed && !revokers.is_empty() {
            body.push_str(&act_form(
                who,
                &format!("{base}/revoke"),
                &revokers,
                "",
                "Revoke the approval",
            ));
        }
        if !who.roles.is_empty() {
            body.push_str(&act_form(
                who,
                &format!("{base}/cancel"),
                &who.roles,
                "",
                "Cancel the plan",
            ));
        }
    }
    document("Recovery mode", Some(who), &body)
}

fn diff_table(diff: &ReviewDiff) -> String {
    let changes = diff
        .lines
        .iter()
        .filter(|l| l.change != Change::Context)
        .count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<p>{changes} changed {}, {} withheld, {} unchanged {}.</p>",
        if changes == 1 { "line" } else { "lines" },
        diff.withheld,
        diff.unchanged,
        if diff.unchanged == 1 {
            "value"
        } else {
            "values"
        },
    );
    if diff.withheld > 0 {
        let _ = writeln!(
            out,
            "<p class=\"why\">{} {} withheld: only keys known to hold no secret show their \
             value. A withheld value shows a digest instead, equal for equal values within \
             this page, so you can see that it changes.</p>",
            diff.withheld,
            if diff.withheld == 1 {
                "value is"
            } else {
                "values are"
            },
        );
    }
    if diff.lines.is_empty() {
        out.push_str("<p>The configuration the plan applies is the one the machine runs.</p>\n");
        return out;
    }
    out.push_str("<table>\n<tr><th></th><th>Key</th><th>Value</th></tr>\n");
    for line in &diff.lines {
        let (class, mark) = match line.change {
            Change::Added => ("added", "+ added"),
            Change::Removed => ("removed", "− removed"),
            Change::Context => ("context", "unchanged"),
        };
        let value = match &line.shown {
            Shown::Value(v) if v.is_empty() => "<span class=\"why\">(empty)</span>".to_owned(),
            Shown::Value(v) => format!("<code>{}</code>", escape(v)),
            Shown::Withheld { digest8 } => format!(
                "<span class=\"withheld\">withheld · digest <code>{}</code></span>",
                escape(digest8)
            ),
        };
        let _ = writeln!(
            out,
            "<tr class=\"{class}\"><td>{mark}</td><td class=\"mono\">{}</td><td>{value}</td></tr>",
            escape(&line.path)
        );
    }
    out.push_str("</table>\n");
    out
}

fn observations_table(
    plan: &PlanView,
    machine: &MachineView,
    evidence: &[ObservationView],
) -> String {
    if evidence.is_empty() {
        return "<p>No observation of the machine is recorded.</p>\n".to_owned();
    }
    let mut latest: Vec<&ObservationView> = evidence.iter().collect();
    latest.sort_by_key(|o| std::cmp::Reverse(o.basis));
    let mut out = String::from(
        "<table>\n<tr><th>Basis</th><th>Purpose</th><th>Plan</th><th>Started</th><th>Recorded</th>\
         <th>Digest read</th><th>Config version</th><th>Talos</th></tr>\n",
    );
    for o in latest.iter().take(MAX_OBSERVATIONS) {
        let recorded = o.recorded_at.map_or_else(|| "not yet".to_owned(), utc);
        let digest = match o.digest() {
            None if o.recorded_at.is_none() => "—".to_owned(),
            None => "not read".to_owned(),
            Some(d) => {
                let relation = if d == plan.artifact_digest {
                    "the plan's artifact"
                } else if Some(d) == machine.applied_digest {
                    "Applied"
                } else {
                    "neither the artifact nor Applied"
                };
                let hex = d.to_hex();
                format!(
                    "<span class=\"mono\" title=\"{hex}\">{}…</span> ({relation})",
                    short_digest(&hex)
                )
            }
        };
        let version = o
            .config_version()
            .map_or_else(|| "—".to_owned(), |v| v.to_string());
        let talos = o
            .read
            .as_ref()
            .and_then(|r| r.talos_version.as_deref())
            .map_or_else(|| "—".to_owned(), escape);
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{digest}</td><td>{version}</td><td>{talos}</td></tr>",
            o.basis,
            purpose_text(o.purpose),
            escape(o.plan.as_deref().unwrap_or("—")),
            utc(o.started_at),
            recorded,
        );
    }
    out.push_str("</table>\n");
    if latest.len() > MAX_OBSERVATIONS {
        let _ = writeln!(
            out,
            "<p class=\"why\">{} earlier observations are not listed.</p>",
            latest.len() - MAX_OBSERVATIONS
        );
    }
    out
}

fn purpose_text(p: crate::contract::evidence::ObservationPurpose) -> &'static str {
    use crate::contract::evidence::ObservationPurpose as P;
    match p {
        P::Evidence => "dispatch evidence",
        P::Completion => "completion",
        P::Recovery => "recovery",
        P::Drift => "drift",
        P::Restoration => "restoration",
        P::Publication => "publication",
    }
}

fn timeline_table(entries: &[TimelineEntry]) -> String {
    if entries.is_empty() {
        return "<p>No entry.</p>\n".to_owned();
    }
    let mut out = String::from(
        "<table>\n<tr><th>Revision</th><th>Time</th><th>What</th><th>Who</th>\
         <th>Plan</th><th>Operation</th><th>Comparison</th><th>Detail</th></tr>\n",
    );
    for e in entries {
        let mut who = format!("{} ({})", escape(&e.actor), escape(&e.actor_role));
        if let Some(r) = &e.requested_by {
            let _ = write!(who, ", at the request of {}", escape(r));
        }
        let plan = e.plan.as_deref().map_or_else(
            || "—".to_owned(),
            |p| format!("<a href=\"{}\">{}</a>", escape(&plan_href(p)), escape(p)),
        );
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{who}</td><td>{plan}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e.revision,
            utc(e.at),
            escape(&e.kind),
            escape(e.operation.as_deref().unwrap_or("—")),
            e.comparison
                .map_or_else(|| "—".to_owned(), |c| c.number().to_string()),
            escape(&e.detail),
        );
    }
    out.push_str("</table>\n");
    out
}

/// An act's form: posts to `action` with the CSRF value, the role, and a button.
fn act_form(who: &Who, action: &str, roles: &[Role], extra: &str, button: &str) -> String {
    format!(
        "<form class=\"act\" method=\"post\" action=\"{}\">{}{}{extra}<button type=\"submit\">{}</button></form>\n",
        escape(action),
        csrf_field(&who.csrf),
        role_field(roles),
        escape(button),
    )
}

fn why_not(text: &str) -> String {
    format!("<p class=\"why\">{}</p>\n", escape(text))
}

/// One plan: what approving it binds, the redacted diff it would apply (`None` for a
/// reader who may not see it: see [`Who::reads_configuration`]), the latest
/// observations, its timeline, and the acts open to the reader.
pub(crate) fn plan_page(
    who: &Who,
    plan: &PlanView,
    machine: &MachineView,
    diff: Option<&ReviewDiff>,
    evidence: &[ObservationView],
    history: &[TimelineEntry],
) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<p>State: <span class=\"state\">{}</span></p>",
        plan.state
    );
    for note in plan_notes(plan, Some(machine)) {
        let _ = writeln!(body, "<p class=\"warn\">{}</p>", escape(&note));
    }

    body.push_str("<h2>What approving binds</h2>\n<dl>\n");
    let mut fact = |name: &str, value: String| {
        let _ = writeln!(body, "<dt>{}</dt><dd>{value}</dd>", escape(name));
    };
    fact(
        "Machine",
        format!(
            "<a href=\"{}\">{}</a> at <code>{}</code>, cluster <code>{}</code>",
            escape(&timeline_href(&machine.id)),
            escape(&machine.id),
            escape(&machine.endpoint),
            escape(&machine.cluster_id)
        ),
    );
    fact(
        "Kind",
        match plan.kind {
            OperationKind::ApplyConfig => {
                "apply: send the release's configuration with apply-config, no reboot".to_owned()
            }
            OperationKind::Adopt => {
                "adopt: record the running configuration as Applied; nothing is sent".to_owned()
            }
        },
    );
    fact(
        "Release",
        format!(
            "the machine's Desired release now: <code>{}</code> (Applied: <code>{}</code>)",
            escape(machine.desired_release.as_deref().unwrap_or("none")),
            escape(machine.applied_release.as_deref().unwrap_or("none")),
        ),
    );
    fact(
        "Artifact digest",
        format!("<code>{}</code>", plan.artifact_digest.to_hex()),
    );
    fact(
        "Baseline",
        format!(
            "{} (the machine's baseline now: {})",
            plan.baseline_revision, machine.baseline_revision
        ),
    );
    fact(
        "Deadlines",
        format!(
            "{} per request; {} to verify",
            span(plan.transport_deadline),
            span(plan.verification_deadline)
        ),
    );
    fact(
        "Drift record bound",
        plan.bound_drift
            .map_or_else(|| "none".to_owned(), |r| format!("opened at {r}")),
    );
    if let Some(op) = &plan.operation {
        fact("Operation", format!("<code>{}</code>", escape(op)));
    }
    body.push_str("</dl>\n");

    body.push_str("<h2>Configuration changes</h2>\n");
    if plan.kind == OperationKind::Adopt {
        body.push_str(
            "<p class=\"why\">An adopt plan sends nothing: the changes below are between \
             Applied and the release Applied is to name.</p>\n",
        );
    }
    match diff {
        Some(diff) => body.push_str(&diff_table(diff)),
        None => {
            let _ = writeln!(
                body,
                "<p class=\"withheld\">The configuration is shown only to a principal who may \
                 approve this plan (the approver role); you hold {}. The artifact's digest \
                 is <code>{}</code>.</p>",
                escape(&roles_text(&who.roles)),
                plan.artifact_digest.to_hex()
            );
        }
    }

    body.push_str("<h2>Latest observations</h2>\n");
    body.push_str(&observations_table(plan, machine, evidence));

    body.push_str("<h2>Timeline of this plan</h2>\n");
    body.push_str(&timeline_table(history));

    body.push_str("<h2>Decide</h2>\n");
    let base = plan_href(&plan.id);
    // Approve.
    if plan.state != PlanState::Proposed {
        body.push_str(&why_not(&format!(
            "Approving is not offered: the plan is {}, and only a proposed plan is approved.",
            plan.state
        )));
    } else if !who.holds(Role::Approver) {
        body.push_str(&why_not(&format!(
            "Approving is not offered: approving needs the approver role, and you hold {}.",
            roles_text(&who.roles)
        )));
    } else {
        let _ = writeln!(
            body,
            "<p>Approving authorizes exactly this plan: artifact <code>{}</code> on machine \
             <code>{}</code> at baseline {}, as long as it stays unexpired and unrevoked.</p>",
            short_digest(&plan.artifact_digest.to_hex()),
            escape(&plan.machine),
            plan.baseline_revision
        );
        body.push_str(&act_form(
            who,
            &format!("{base}/approve"),
            &[Role::Approver],
            "",
            "Approve",
        ));
    }
    // Revoke.
    let revokers = who.among(&[Role::Approver, Role::RecoveryAdmin]);
    if !matches!(plan.state, PlanState::Approved | PlanState::Committed) {
        body.push_str(&why_not(&format!(
            "Revoking is not offered: the plan is {}, so no approval stands.",
            plan.state
        )));
    } else if revokers.is_empty() {
        body.push_str(&why_not(
            "Revoking is not offered: revoking an approval needs the approver or recovery-admin role.",
        ));
    } else {
        if plan.state == PlanState::Committed {
            body.push_str(&why_not(
                "The plan is committed: a revocation is recorded against it and stops its \
                 operation's next attempt.",
            ));
        }
        body.push_str(&act_form(
            who,
            &format!("{base}/revoke"),
            &revokers,
            "",
            "Revoke the approval",
        ));
    }
    // Cancel.
    if !matches!(
        plan.state,
        PlanState::Proposed | PlanState::Approved | PlanState::Committed
    ) {
        body.push_str(&why_not(&format!(
            "Cancelling is not offered: the plan is {}.",
            plan.state
        )));
    } else if who.roles.is_empty() {
        body.push_str(&why_not("Cancelling is not offered: you hold no role."));
    } else {
        body.push_str(&why_not(
            "The plan's creator may cancel it in any role; anyone else needs the approver or \
             recovery-admin role.",
        ));
        body.push_str(&act_form(
            who,
            &format!("{base}/cancel"),
            &who.roles,
            "",
            "Cancel the plan",
        ));
    }
    document(&format!("Plan {}", plan.id), Some(who), &body)
}

fn machine_facts(machine: &MachineView) -> String {
    let mut out = String::from("<dl>\n");
    let mut fact = |name: &str, value: String| {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{value}</dd>");
    };
    fact(
        "Endpoint",
        format!(
            "<code>{}</code>, cluster <code>{}</code>",
            escape(&machine.endpoint),
            escape(&machine.cluster_id)
        ),
    );
    fact(
        "Desired",
        format!(
            "<code>{}</code>",
            escape(machine.desired_release.as_deref().unwrap_or("none"))
        ),
    );
    fact(
        "Applied",
        format!(
            "<code>{}</code>{}",
            escape(machine.applied_release.as_deref().unwrap_or("none")),
            machine.applied_digest.map_or_else(String::new, |d| format!(
                ", digest <span class=\"mono\" title=\"{0}\">{1}…</span>",
                d.to_hex(),
                short_digest(&d.to_hex())
            ))
        ),
    );
    fact(
        "Baseline",
        format!(
            "{} (latest revision {})",
            machine.baseline_revision, machine.revision
        ),
    );
    fact(
        "Frozen",
        if machine.frozen { "yes" } else { "no" }.to_owned(),
    );
    fact(
        "Drift",
        machine.open_drift.map_or_else(
            || "no open drift record".to_owned(),
            |r| format!("a drift record is open since {r}"),
        ),
    );
    fact("Recovery scope", escape(&machine.scope.to_string()));
    out.push_str("</dl>\n");
    out
}

/// A machine's timeline.
pub(crate) fn timeline_page(who: &Who, machine: &MachineView, entries: &[TimelineEntry]) -> String {
    let mut body = machine_facts(machine);
    body.push_str("<h2>Timeline</h2>\n");
    body.push_str(&timeline_table(entries));
    document(&format!("Machine {}", machine.id), Some(who), &body)
}

/// The machines with an open drift record, with freeze and unfreeze forms and, for
/// a publisher, the adopt and revert plans that settle the record.
pub(crate) fn drift_page(who: &Who, machines: &[MachineView]) -> String {
    let drifted: Vec<&MachineView> = machines.iter().filter(|m| m.open_drift.is_some()).collect();
    let mut body = String::new();
    if drifted.is_empty() {
        body.push_str("<p>No machine has an open drift record.</p>\n");
        return document("Drift", Some(who), &body);
    }
    body.push_str(
        "<p>These machines run a configuration other than their Applied one. Until the \
         record is settled, only a plan that binds it may commit. A publisher settles it \
         with a plan: an adoption keeps what the machine runs, a revert puts Applied \
         back; either then waits for an approver here.</p>\n",
    );
    let freezers = who.among(&[
        Role::Author,
        Role::Publisher,
        Role::Approver,
        Role::RecoveryAdmin,
    ]);
    let reason =
        "<label>Reason <input type=\"text\" name=\"reason\" required maxlength=\"1024\"></label> ";
    for m in drifted {
        let _ = writeln!(
            body,
            "<h2><a href=\"{}\">{}</a></h2>",
            escape(&timeline_href(&m.id)),
            escape(&m.id)
        );
        body.push_str(&machine_facts(m));
        let base = format!("/machines/{}", segment(&m.id));
        if freezers.is_empty() {
            body.push_str(&why_not(
                "Freezing is not offered: it needs the author, publisher, approver or recovery-admin role.",
            ));
        } else {
            body.push_str(&act_form(
                who,
                &format!("{base}/freeze"),
                &freezers,
                reason,
                "Freeze",
            ));
        }
        if who.holds(Role::Publisher) {
            for (act, label) in [
                ("adopt", "Plan an adoption (keep what it runs)"),
                ("revert", "Plan a revert (put Applied back)"),
            ] {
                body.push_str(&act_form(
                    who,
                    &format!("{base}/{act}"),
                    &[Role::Publisher],
                    "",
                    label,
                ));
            }
        } else {
            body.push_str(&why_not(
                "Planning an adoption or a revert is not offered: a publisher makes plans.",
            ));
        }
        if who.holds(Role::Approver) {
            body.push_str(&act_form(
                who,
                &format!("{base}/unfreeze"),
                &[Role::Approver],
                reason,
                "Lift the freeze",
            ));
        } else {
            body.push_str(&why_not(
                "Lifting a freeze is not offered: only an approver lifts one.",
            ));
        }
    }
    document("Drift", Some(who), &body)
}

/// A refusal or an error: `title`, an explanation, and the HTTP status it answers
/// with (`status_hint`, e.g. `403 Forbidden`).
pub(crate) fn message_page(
    who: Option<&Who>,
    title: &str,
    text: &str,
    status_hint: &str,
) -> String {
    let mut body = String::new();
    let _ = writeln!(body, "<p class=\"error\">{}</p>", escape(text));
    if !status_hint.is_empty() {
        let _ = writeln!(body, "<p class=\"why\">HTTP {}</p>", escape(status_hint));
    }
    body.push_str(if who.is_some() {
        "<p><a href=\"/plans\">Back to the plans</a></p>\n"
    } else {
        "<p><a href=\"/login\">Sign in</a></p>\n"
    });
    document(title, who, &body)
}

#[cfg(test)]
mod tests;
