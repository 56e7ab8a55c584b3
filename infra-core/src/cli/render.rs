//! Text for people: apply results, discoveries, and colour by a line's leading mark.

use std::fmt::Write as _;

use crate::engine::Discovery;
use crate::{ApplyResult, Change, Subject};

/// The result as text for people.
pub fn render_result(result: &ApplyResult) -> String {
    render_result_titled(result, "Apply")
}

pub(super) fn render_result_titled(result: &ApplyResult, verb: &str) -> String {
    let width = result
        .subjects()
        .map(|(s, _)| s.to_string().len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let mut line = |mark: char, subject: &Subject, what: String| {
        let _ = writeln!(out, "  {mark} {:<width$}  {what}", subject.to_string());
    };
    for a in &result.applied {
        let mark = match a.change {
            Change::Created => '+',
            Change::Updated => '~',
            Change::Replaced => '±',
            Change::Unchanged => ' ',
        };
        line(mark, &a.resource, format!("{:?}", a.change).to_lowercase());
    }
    for p in &result.pruned {
        let how = if p.already_absent {
            "pruned (already gone)"
        } else {
            "pruned"
        };
        line('-', &p.resource, how.to_owned());
    }
    for n in &result.not_attempted {
        let detail = n
            .detail
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        line(
            '·',
            &n.resource,
            format!("not attempted: {}{detail}", n.reason),
        );
    }
    for f in &result.failed {
        let step = format!("{:?}", f.step).to_lowercase();
        line('!', &f.resource, format!("failed to {step}: {}", f.error));
    }
    let count = |c: Change| result.applied.iter().filter(|a| a.change == c).count();
    let _ = writeln!(
        out,
        "{} {}: {} created, {} updated, {} replaced, {} unchanged, {} pruned, {} not attempted, {} failed.",
        verb,
        if result.is_success() {
            "complete"
        } else {
            "incomplete"
        },
        count(Change::Created),
        count(Change::Updated),
        count(Change::Replaced),
        count(Change::Unchanged),
        result.pruned.len(),
        result.not_attempted.len(),
        result.failed.len(),
    );
    out
}

/// What `discover` did, for people.
pub(super) fn render_discovery(fleet: &str, d: &Discovery) -> String {
    let mut out = String::new();
    let rows = d.ledger.len();
    let _ = writeln!(
        out,
        "the ledger of fleet `{fleet}` lists {rows} resource{}; {} added by this run:",
        if rows == 1 { "" } else { "s" },
        d.added.len()
    );
    for row in &d.added {
        let note = if d.ledger.is_discovered(row) {
            "  (adopted on its marker alone: deleting it will need --allow-delete)"
        } else {
            ""
        };
        let _ = writeln!(out, "  + {row}{note}");
    }
    for kind in &d.unreadable {
        let _ = writeln!(
            out,
            "  · {kind}: its tags cannot be read, so its resources cannot be told apart by \
             marker; not looked for, its rows kept as they were"
        );
    }
    for blind in &d.blind {
        let _ = writeln!(out, "  ! could not look: {blind}");
    }
    if !d.is_complete() {
        let _ = writeln!(
            out,
            "Incomplete: {} place{} could not be looked at; their rows were kept as they were.",
            d.blind.len(),
            if d.blind.len() == 1 { "" } else { "s" }
        );
    }
    out
}

const RED: &str = "31";
const GREEN: &str = "32";
const YELLOW: &str = "33";
const MAGENTA: &str = "35";

/// Text in an SGR colour, when `colour` allows.
/// Prints `error: …` on the error stream (in colour where allowed) and answers exit
/// code 1.
pub(super) fn error(io: &mut super::console::Io<'_>, error: &dyn std::fmt::Display) -> u8 {
    let text = paint(io.colour(), &format!("error: {error}"));
    io.err(&text);
    1
}

pub(super) fn paint(colour: bool, text: &str) -> String {
    if colour {
        format!("\x1b[{RED}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// Colours each line of a rendered plan or result by its leading mark.
pub(super) fn colour_lines(colour: bool, text: &str) -> String {
    if !colour {
        return text.to_owned();
    }
    text.lines()
        .map(|line| {
            let code = match line.trim_start().chars().next() {
                Some('+') => Some(GREEN),
                Some('~') => Some(YELLOW),
                Some('±') => Some(MAGENTA),
                Some('-') | Some('!') => Some(RED),
                _ => None,
            };
            match code {
                Some(code) => format!("\x1b[{code}m{line}\x1b[0m"),
                None => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}
