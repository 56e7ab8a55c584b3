//! Redaction of text that came from a node and may quote configuration.
//!
//! A node's error and detail messages can quote the configuration it was sent: a
//! validation error may quote a value, and the no-reboot refusal and the dry-run
//! summary carry a diff of the whole document. Before such text is kept in a result
//! (and so in errors, logs and `Debug` output), [`redact`] cuts it at the first diff,
//! replaces every quoted span and every long token (keys, certificates, tokens) with a
//! marker, folds line breaks and caps the length.

/// What replaces a quoted span or a long token.
pub(crate) const MARK: &str = "<redacted>";

/// What replaces a withheld diff.
const DIFF_MARK: &str = "<diff withheld>";

/// The longest redacted text, in characters.
const MAX_CHARS: usize = 512;

/// Tokens at least this long are redacted.
const LONG_TOKEN: usize = 24;

/// Redacts a message from a node (see the module documentation).
pub(crate) fn redact(text: &str) -> String {
    let (text, diff_cut) = cut_at_diff(text);
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    let mut token = String::new();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        let apostrophe = c == '\'' && prev.is_alphanumeric();
        prev = c;
        if apostrophe {
            // Inside a word ("can't"), not a quote.
            token.push(c);
        } else if matches!(c, '"' | '\'' | '`') {
            flush_token(&mut out, &mut token);
            // Skip to the matching close; an unclosed quote runs to the end.
            for inner in chars.by_ref() {
                if inner == c {
                    break;
                }
            }
            out.push_str(MARK);
        } else if c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-') {
            token.push(c);
        } else {
            flush_token(&mut out, &mut token);
            if c.is_whitespace() {
                if !out.ends_with(' ') && !out.is_empty() {
                    out.push(' ');
                }
            } else if !c.is_control() {
                out.push(c);
            }
        }
    }
    flush_token(&mut out, &mut token);
    let mut out = out.trim_end().to_owned();
    if diff_cut {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(DIFF_MARK);
    }
    if out.chars().count() > MAX_CHARS {
        out = out.chars().take(MAX_CHARS).collect();
        out.push('…');
    }
    out
}

fn flush_token(out: &mut String, token: &mut String) {
    if token.chars().count() >= LONG_TOKEN {
        out.push_str(MARK);
    } else {
        out.push_str(token);
    }
    token.clear();
}

/// The text before the first diff it carries, and whether one was cut.
fn cut_at_diff(text: &str) -> (&str, bool) {
    let lower = text.to_ascii_lowercase();
    let cut = ["config diff", "diff:"]
        .iter()
        .filter_map(|marker| lower.find(marker))
        .min();
    match cut {
        Some(at) => (&text[..at], true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_and_long_tokens_are_replaced() {
        let text = "1 error occurred:\n\t* invalid value \"s3cret\" for token: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t\n";
        let redacted = redact(text);
        assert_eq!(
            redacted,
            "1 error occurred: * invalid value <redacted> for token: <redacted>"
        );
    }

    #[test]
    fn diffs_are_withheld() {
        let text = "this config change can't be applied in immediate mode\ndiff: -  token: abc\n+  token: def";
        let redacted = redact(text);
        assert!(
            !redacted.contains("abc") && !redacted.contains("def"),
            "{redacted}"
        );
        assert!(redacted.ends_with(DIFF_MARK), "{redacted}");
        let dry_run = "Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:\n\n+ secret: x";
        let redacted = redact(dry_run);
        assert_eq!(
            redacted,
            "Dry run summary: Applied configuration without a reboot (skipped in dry-run). <diff withheld>"
        );
    }

    #[test]
    fn unclosed_quotes_run_to_the_end_and_length_is_capped() {
        assert_eq!(redact("bad value 'abc def"), "bad value <redacted>");
        assert_eq!(redact("can't apply 'x'"), "can't apply <redacted>");
        let long = "word ".repeat(400);
        assert!(redact(&long).chars().count() <= MAX_CHARS + 1);
    }
}
