//! Redaction of text that came from a node and may quote configuration.
//!
//! A node's error and detail messages can quote the configuration it was sent: a
//! validation error may name a value, a decoding error may echo a YAML fragment, and
//! the no-reboot refusal and the dry-run summary carry a diff of the whole document.
//! Such text is kept in a result (and so in errors, logs, `Debug` output and the
//! timeline) only after [`redact`], which fails closed: it keeps what it positively
//! recognises as safe and withholds everything else. It is an allowlist, not a
//! pattern mask, so a short unquoted value (`token: abc123.def456`, `/dev/sda`,
//! `hunter2`) is withheld like a long one.
//!
//! The text is read line by line:
//!
//! 1. **Configuration lines.** A line that looks like part of a configuration
//!    document is withheld entirely and replaced by [`CONFIG_MARK`]: a PEM block from
//!    its `-----BEGIN` line through its `-----END` line; a YAML `key:` line (`key` of
//!    letters, digits, `_`, `.` and `-`, followed by a colon and a space or the line's
//!    end); an indented YAML list item (`- ` or `+ ` after indentation); a line that
//!    holds `v1alpha1`, `machine:` or `cluster:`; and every line indented deeper than
//!    such a line (a block scalar, a nested mapping). A `key:` line whose key is a
//!    message label (an error prefix such as `error`, `warning`, `x509` or `yaml`) or
//!    an IPv4 address is a message, not configuration, and is read word by word.
//! 2. **Diffs.** From the first other line that starts a diff (`---`, `+++` or `@@`, a
//!    line that starts with `+` or `-` followed by a space, or a line that starts with
//!    `diff:`), and from the words `config diff` or `diff:` wherever they occur,
//!    everything is withheld as a whole and replaced by one [`DIFF_MARK`].
//! 3. **Words.** Every other line is split into words at whitespace and at quotes,
//!    brackets and angle brackets; other punctuation inside a word (a dot, a colon, a
//!    slash, `=`) keeps it one word, so `abc123.def456` is judged whole. Punctuation
//!    around a word is set aside, and the word is kept only if it is
//!    - in [`VOCABULARY`], the words of Talos, gRPC and Go error and status messages
//!      (compared without regard to ASCII case),
//!    - a small number: at most five digits (ports, counts, codes), or
//!    - an IPv4 address, or `address:port` with an IPv4 address: endpoints are not
//!      secret, and an operator needs them.
//!
//!    A word that is not recognised — a value, a key name, base64, hex, a path, a
//!    host name — is withheld with the punctuation around it and replaced by [`MARK`].
//!    Punctuation on its own is kept.
//!
//! Adjacent markers of one kind, with only whitespace between them, collapse into one.
//! Line breaks and runs of whitespace fold into single spaces, and the result is cut at
//! a word boundary to at most [`MAX_CHARS`] characters, ending in `…` when cut (a
//! diff marker is kept after the cut).
//!
//! The result is a fixed point: redacting redacted text changes nothing, since every
//! word it keeps is recognised again, a marker is read back as that marker, and no
//! line of it starts a diff or a configuration line. A secret made only of vocabulary
//! words and small numbers would pass, which is why the vocabulary holds message words
//! and no words such as `password` or `admin`.

/// What replaces a withheld word (and the punctuation around it).
pub(crate) const MARK: &str = "<withheld>";

/// What replaces withheld configuration lines.
const CONFIG_MARK: &str = "<config withheld>";

/// What replaces a withheld diff and everything after it.
const DIFF_MARK: &str = "<diff withheld>";

/// The longest redacted text, in characters.
const MAX_CHARS: usize = 512;

/// What ends a text that was cut to [`MAX_CHARS`].
const ELLIPSIS: &str = "…";

/// The most digits a number may have and still be kept.
const MAX_NUMBER_DIGITS: usize = 5;

/// Keys of `key:` lines that label a message rather than configuration: the prefixes
/// Go, gRPC and TLS put before their errors. None is a Talos configuration key.
const MESSAGE_LABELS: &[&str] = &[
    "connect",
    "dial",
    "error",
    "http2",
    "read",
    "rpc",
    "tls",
    "transport",
    "warning",
    "write",
    "x509",
    "yaml",
];

/// Substrings that make a line configuration wherever they occur (ASCII case ignored).
const CONFIG_SIGNS: &[&str] = &["v1alpha1", "machine:", "cluster:"];

/// The armour line that opens a PEM block (ASCII case ignored).
const PEM_BEGIN: &str = "-----begin";

/// The armour line that closes a PEM block (ASCII case ignored).
const PEM_END: &str = "-----end";

/// The words kept by [`redact`]: lowercase and sorted, compared without regard to
/// ASCII case. They are the words of Talos, gRPC and Go error and status messages,
/// including gRPC's code names as Go spells them (`Unavailable`, `DeadlineExceeded`).
#[rustfmt::skip]
const VOCABULARY: &[&str] = &[
    "a", "aborted", "about", "above", "accept", "accepted", "access", "accessible", "account",
    "action", "active", "add", "added", "address", "addresses", "after", "again", "against",
    "all", "allowed", "already", "alreadyexists", "also", "an", "and", "another", "any", "api",
    "apid", "apiserver", "applied", "applies", "apply", "applying", "are", "arg", "args",
    "argument", "arguments", "as", "at", "attempt", "attempts", "authentication", "authority",
    "authorization", "authorized", "auto", "available", "backoff", "bad", "be", "because",
    "been", "before", "being", "below", "between", "block", "body", "boolean", "boot", "booted",
    "booting", "bootstrap", "bootstrapped", "both", "broken", "busy", "but", "by", "byte",
    "bytes", "ca", "call", "called", "calls", "can", "can't", "cancel", "canceled", "cancelled",
    "cannot", "cause", "caused", "certificate", "certificates", "change", "changed", "changes",
    "character", "characters", "check", "checked", "checking", "checks", "client", "closed",
    "closing", "cluster", "code", "codes", "column", "command", "completed", "condition",
    "config", "configuration", "configured", "conflict", "conflicting", "conflicts", "connect",
    "connected", "connecting", "connection", "connections", "contain", "contained",
    "containerd", "containing", "contains", "content", "context", "controller", "could",
    "couldn't", "create", "created", "creating", "credentials", "cri", "current", "currently",
    "data", "dataloss", "deadline", "deadlineexceeded", "decode", "decoded", "decoding",
    "default", "delete", "deleted", "deleting", "denied", "deprecated", "desc", "description",
    "detail", "details", "device", "dial", "dialing", "did", "didn't", "different", "differs",
    "disable", "disabled", "disallowed", "disk", "disks", "dns", "document", "documents",
    "does", "doesn't", "done", "down", "dry", "dry-run", "due", "duplicate", "during", "each",
    "either", "empty", "enable", "enabled", "encode", "encoded", "encoding", "end", "endpoint",
    "endpoints", "entries", "entry", "eof", "equal", "error", "errors", "established", "etcd",
    "exceeded", "exhausted", "exist", "existing", "exists", "exit", "exited", "expected",
    "expired", "extra", "fail", "failed", "failedprecondition", "failing", "fails", "failure",
    "feature", "features", "few", "field", "fields", "file", "files", "find", "finished",
    "first", "flag", "flags", "for", "format", "found", "from", "full", "generate", "generated",
    "get", "given", "goaway", "got", "greater", "grpc", "had", "handshake", "has", "hasn't",
    "have", "header", "headers", "health", "healthy", "host", "hostname", "hosts", "http",
    "http2", "https", "i/o", "identity", "if", "ignored", "ignoring", "illegal", "image",
    "immediate", "immediately", "in", "incomplete", "incorrect", "initialized", "input",
    "inside", "install", "installed", "installer", "instead", "integer", "interface",
    "interfaces", "internal", "into", "invalid", "invalidargument", "io", "ipv4", "ipv6", "is",
    "isn't", "it", "it's", "item", "items", "its", "key", "keys", "killed", "kube-apiserver",
    "kubeconfig", "kubelet", "kubernetes", "large", "larger", "last", "leader", "least", "left",
    "length", "less", "limit", "limited", "line", "lines", "link", "list", "listen",
    "listening", "load", "loaded", "loading", "local", "localhost", "long", "lookup", "lost",
    "machine", "machined", "maintenance", "malformed", "many", "map", "mapping", "match",
    "matches", "max", "maximum", "may", "member", "members", "memory", "message", "messages",
    "method", "might", "min", "minimum", "minutes", "mirror", "missing", "mode", "modes",
    "more", "most", "mount", "mounted", "mtu", "multiple", "must", "name", "names", "network",
    "new", "no", "no-reboot", "no_reboot", "node", "nodes", "non-empty", "none", "nor", "not",
    "notfound", "nothing", "now", "object", "occurred", "of", "off", "ok", "on", "once", "one",
    "only", "open", "operation", "option", "options", "or", "os:admin", "os:operator",
    "os:reader", "other", "out", "outofrange", "outside", "over", "overlap", "overlaps",
    "parse", "parsed", "parsing", "partition", "passed", "peer", "pending", "permission",
    "permissiondenied", "pipe", "please", "pod", "port", "precondition", "previous", "prior",
    "private", "process", "protocol", "provided", "proxy", "public", "pull", "pulling",
    "quorum", "quota", "range", "rate", "read", "reader", "reading", "ready", "reason",
    "reboot", "rebooted", "rebooting", "received", "receiving", "refused", "registry", "remote",
    "remove", "removed", "request", "requested", "requests", "required", "requires", "reserved",
    "reset", "resolve", "resolver", "resource", "resourceexhausted", "resources", "response",
    "retries", "retry", "retrying", "revoked", "role", "roles", "route", "rpc", "run",
    "running", "same", "save", "saved", "scheduler", "schema", "second", "seconds", "selector",
    "send", "sending", "sent", "sequence", "server", "service", "services", "set", "short",
    "should", "shutdown", "shutting", "signal", "signed", "simulated", "single", "size",
    "skipped", "small", "smaller", "so", "some", "space", "specified", "specify", "staged",
    "start", "started", "starting", "state", "status", "still", "stopped", "stream", "string",
    "subnet", "succeeded", "success", "successfully", "such", "summary", "supported", "syntax",
    "talos", "talosconfig", "talosctl", "tcp", "terminated", "text", "than", "that", "the",
    "their", "them", "then", "there", "these", "this", "those", "through", "time", "timed",
    "timeout", "tls", "to", "token", "tokens", "too", "transient", "transport", "try", "two",
    "type", "unable", "unauthenticated", "unauthorized", "unavailable", "undefined", "under",
    "unexpected", "unhealthy", "unimplemented", "unique", "unknown", "unmarshal", "unreachable",
    "unrecognized", "unsupported", "until", "up", "update", "updated", "upgrade", "use", "used",
    "user", "using", "utf-8", "valid", "validate", "validated", "validating", "validation",
    "value", "values", "verify", "version", "via", "volume", "wait", "waiting", "warning",
    "warnings", "was", "wasn't", "were", "what", "when", "where", "whether", "which", "while",
    "will", "wireguard", "with", "within", "without", "won't", "would", "write", "x509", "yaml",
    "yet", "zero",
];

/// A marker that stands for withheld text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    /// A withheld word.
    Word,
    /// Withheld configuration lines.
    Config,
    /// A withheld diff and everything after it.
    Diff,
}

impl Marker {
    const ALL: [Marker; 3] = [Marker::Word, Marker::Config, Marker::Diff];

    fn text(self) -> &'static str {
        match self {
            Marker::Word => MARK,
            Marker::Config => CONFIG_MARK,
            Marker::Diff => DIFF_MARK,
        }
    }
}

/// A piece of the redacted text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item<'a> {
    /// A kept word or punctuation, verbatim.
    Text(&'a str),
    /// A marker.
    Mark(Marker),
    /// Folded whitespace.
    Space,
}

impl Item<'_> {
    fn chars(&self) -> usize {
        match self {
            Item::Text(text) => text.chars().count(),
            Item::Mark(marker) => marker.text().chars().count(),
            Item::Space => 1,
        }
    }
}

/// The redacted text being built: no leading space, no two spaces in a row, and no
/// marker right after the same marker (whitespace aside).
#[derive(Debug, Default)]
struct Items<'a>(Vec<Item<'a>>);

impl<'a> Items<'a> {
    fn text(&mut self, text: &'a str) {
        if !text.is_empty() {
            self.0.push(Item::Text(text));
        }
    }

    fn space(&mut self) {
        if matches!(self.0.last(), Some(Item::Text(_) | Item::Mark(_))) {
            self.0.push(Item::Space);
        }
    }

    fn mark(&mut self, marker: Marker) {
        if self.last_solid() != Some(Item::Mark(marker)) {
            self.0.push(Item::Mark(marker));
        }
    }

    /// The last item that is not a space.
    fn last_solid(&self) -> Option<Item<'a>> {
        self.0
            .iter()
            .rev()
            .find(|item| **item != Item::Space)
            .copied()
    }

    fn trim_end(&mut self) {
        while self.0.last() == Some(&Item::Space) {
            self.0.pop();
        }
    }

    /// Ends the text at a diff: appends the diff marker.
    fn cut_at_diff(&mut self) {
        // Punctuation left just before the cut (the `-` of `-Config diff`) would read
        // as a diff line of its own if the result were redacted again: it goes with
        // the diff.
        loop {
            let lone = match self.0.last() {
                Some(Item::Space) => true,
                Some(Item::Text(t)) => t.chars().all(|c| matches!(c, '-' | '+' | '@')),
                _ => false,
            };
            if !lone {
                break;
            }
            self.0.pop();
        }
        self.space();
        self.mark(Marker::Diff);
    }

    /// Whether the last item (spaces aside) is the word `config`.
    fn ends_with_config(&self) -> bool {
        matches!(self.last_solid(), Some(Item::Text(word)) if word.eq_ignore_ascii_case("config"))
    }

    /// The text, cut at an item boundary to at most [`MAX_CHARS`] characters.
    fn render(mut self) -> String {
        self.trim_end();
        let total: usize = self.0.iter().map(Item::chars).sum();
        if total <= MAX_CHARS {
            return self.0.iter().map(render_item).collect();
        }
        let suffix = match self.0.last() {
            Some(Item::Mark(Marker::Diff)) => {
                self.0.pop();
                self.trim_end();
                Some(DIFF_MARK)
            }
            _ => None,
        };
        // Room for " …" and, after a cut diff, " <diff withheld>".
        let room = MAX_CHARS
            - ELLIPSIS.chars().count()
            - 1
            - suffix.map_or(0, |mark| mark.chars().count() + 1);
        let mut kept = Items::default();
        let mut used = 0;
        for item in self.0 {
            used += item.chars();
            if used > room {
                break;
            }
            kept.0.push(item);
        }
        kept.space();
        kept.text(ELLIPSIS);
        if suffix.is_some() {
            kept.space();
            kept.mark(Marker::Diff);
        }
        kept.0.iter().map(render_item).collect()
    }
}

fn render_item<'a>(item: &Item<'a>) -> &'a str {
    match item {
        Item::Text(text) => text,
        Item::Mark(marker) => marker.text(),
        Item::Space => " ",
    }
}

/// Redacts a message from a node (see the module documentation).
pub(crate) fn redact(text: &str) -> String {
    let mut out = Items::default();
    // Inside a PEM block: from a `-----BEGIN` line through its `-----END` line.
    let mut in_pem = false;
    // The indentation of the last configuration line, while the lines below it are
    // indented deeper (and so belong to it).
    let mut config_indent: Option<usize> = None;
    for line in text.split(is_line_break) {
        let trimmed = line.trim_start_matches(is_space);
        if trimmed.is_empty() {
            out.space();
            continue;
        }
        let indent = line.len() - trimmed.len();
        let lower = line.to_ascii_lowercase();
        let was_in_pem = in_pem;
        in_pem = match (lower.rfind(PEM_BEGIN), lower.rfind(PEM_END)) {
            (Some(begin), Some(end)) => begin > end,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => in_pem,
        };
        let pem = was_in_pem || lower.contains(PEM_BEGIN) || lower.contains(PEM_END);
        let deeper = config_indent.is_some_and(|above| indent > above);
        if !pem && !deeper && starts_diff(line, trimmed) {
            out.cut_at_diff();
            return out.render();
        }
        if pem || deeper || is_config_line(line, trimmed, &lower) {
            config_indent = Some(config_indent.map_or(indent, |above| above.min(indent)));
            out.space();
            out.mark(Marker::Config);
            out.space();
            continue;
        }
        config_indent = None;
        if scan_line(trimmed, &mut out) {
            out.cut_at_diff();
            return out.render();
        }
        out.space();
    }
    out.render()
}

/// Reads one line (without its indentation) word by word into `out`; true if it
/// reached a diff (`config diff`, `diff:`), where reading stops.
fn scan_line<'a>(line: &'a str, out: &mut Items<'a>) -> bool {
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        if is_space(c) {
            out.space();
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if let Some(marker) = Marker::ALL
            .into_iter()
            .find(|marker| c == '<' && rest.starts_with(marker.text()))
        {
            out.mark(marker);
            rest = &rest[marker.text().len()..];
            continue;
        }
        if is_separator(c) {
            out.text(&rest[..c.len_utf8()]);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let end = rest
            .find(|c: char| is_space(c) || is_separator(c))
            .unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        rest = after;
        if word.chars().all(|c| c.is_ascii_punctuation()) {
            out.text(word);
            continue;
        }
        let core = word.trim_matches(|c: char| c.is_ascii_punctuation());
        let (lead, trail) = word.split_at(
            word.len()
                - word
                    .trim_start_matches(|c: char| c.is_ascii_punctuation())
                    .len(),
        );
        let trail = &trail[core.len()..];
        if core.eq_ignore_ascii_case("diff") && lead.is_empty() {
            if out.ends_with_config() {
                // `config diff`: the diff starts at `config`.
                out.trim_end();
                out.0.pop();
                return true;
            }
            if trail.starts_with(':') {
                return true;
            }
        }
        if is_safe_word(core) {
            out.text(lead);
            out.text(core);
            out.text(trail);
        } else {
            out.mark(Marker::Word);
        }
    }
    false
}

/// Whether a line starts a diff. `trimmed` is the line without its indentation.
fn starts_diff(line: &str, trimmed: &str) -> bool {
    let sign_and_space = |sign: char| {
        line.strip_prefix(sign)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(is_space))
    };
    ["---", "+++", "@@"]
        .iter()
        .any(|start| trimmed.starts_with(start))
        || starts_with_ignore_case(trimmed, "diff:")
        || sign_and_space('+')
        || sign_and_space('-')
}

/// Whether a line is configuration (see the module documentation). `trimmed` is the
/// line without its indentation.
fn is_config_line(line: &str, trimmed: &str, lower: &str) -> bool {
    let indented_item = trimmed.len() < line.len()
        && ['+', '-'].iter().any(|sign| {
            trimmed
                .strip_prefix(*sign)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(is_space))
        });
    indented_item || CONFIG_SIGNS.iter().any(|sign| lower.contains(sign)) || is_key_line(trimmed)
}

/// Whether a line (without its indentation) is a YAML `key:` line that is not a
/// message label.
fn is_key_line(trimmed: &str) -> bool {
    let key_end = trimmed
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
        .unwrap_or(trimmed.len());
    let (key, rest) = trimmed.split_at(key_end);
    let Some(value) = rest.strip_prefix(':') else {
        return false;
    };
    !key.is_empty()
        && (value.is_empty() || value.starts_with(is_space))
        && !MESSAGE_LABELS
            .iter()
            .any(|label| key.eq_ignore_ascii_case(label))
        && !is_ipv4(key)
}

/// Whether a word (without the punctuation around it) is kept.
fn is_safe_word(word: &str) -> bool {
    in_vocabulary(word) || is_small_number(word) || is_endpoint(word)
}

/// Whether a word is in [`VOCABULARY`] (ASCII case ignored).
fn in_vocabulary(word: &str) -> bool {
    word.is_ascii()
        && VOCABULARY
            .binary_search(&word.to_ascii_lowercase().as_str())
            .is_ok()
}

/// Digits only, at most [`MAX_NUMBER_DIGITS`] of them.
fn is_small_number(word: &str) -> bool {
    !word.is_empty() && word.len() <= MAX_NUMBER_DIGITS && word.bytes().all(|b| b.is_ascii_digit())
}

/// An IPv4 address, or `address:port` with an IPv4 address.
fn is_endpoint(word: &str) -> bool {
    match word.split_once(':') {
        Some((address, port)) => is_ipv4(address) && is_small_number(port),
        None => is_ipv4(word),
    }
}

/// Four decimal octets, each at most 255.
fn is_ipv4(word: &str) -> bool {
    let octets: Vec<&str> = word.split('.').collect();
    octets.len() == 4
        && octets.iter().all(|octet| {
            (1..=3).contains(&octet.len())
                && octet.bytes().all(|b| b.is_ascii_digit())
                && octet.parse::<u16>().is_ok_and(|value| value <= 255)
        })
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
}

/// Whitespace and control characters: both fold into a space.
fn is_space(c: char) -> bool {
    c.is_whitespace() || c.is_control()
}

/// Characters that end a line.
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// Punctuation that splits words and is kept on its own. Other ASCII punctuation
/// joins the characters around it into one word.
fn is_separator(c: char) -> bool {
    matches!(
        c,
        '"' | '`' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '…'
    )
}

#[cfg(test)]
mod tests;
