//! The whole-configuration diff an approver reads before approving a plan: the
//! configuration the machine runs (its Applied) against the one the plan would
//! apply, key by key, with every value that is not positively known to be safe
//! withheld.
//!
//! Both sides are Talos machine configuration YAML, possibly several documents
//! separated by `---`. They are read by a small line parser of this module rather
//! than a YAML library, so that nothing it meets can make it fail: mappings
//! (`key: value`, nested by indentation), sequences (`- item`, numbered `[n]` in the
//! path) and block scalars (`|`, `>`; their whole content is one value) are
//! understood, and any other line becomes a value of its own at `<unparsed>` under
//! the mapping it sits in, always withheld.
//!
//! Every value is reduced to a *leaf*: a dotted key path (`machine.install.disk`,
//! `machine.network.interfaces[0].addresses[1]`) and its text. The diff is by path:
//! a path on one side only is added or removed, a path on both sides with different
//! text is removed and added, and equal paths are only counted. A change inside a
//! list item carries at most one context line, an unchanged shown sibling, so the
//! approver can tell which item it is (its `interface`, `name`, …).
//!
//! # What is shown
//!
//! Paths are always shown, except a key that itself looks like a secret (a long
//! base64 run, a bootstrap token, a PEM marker, control characters, over 100
//! characters), which appears as `<withheld key>`. A value is shown only when both
//! hold:
//!
//! - its key is on [`ALLOWED_KEYS`] (or is a label or taint under `nodeLabels` /
//!   `nodeTaints`, or matches a two-key rule of [`ALLOWED_PAIRS`]), and no key on its
//!   path names a secret container ([`SECRET_WORDS`], or `ca` / `…CA` / `…CAs`);
//! - the value looks harmless ([`harmless`]): at most 128 characters, one line, no
//!   PEM marker, no base64 run of 16 or more characters (a run of lowercase words
//!   joined by `/`, `-` or `_` is not base64), no bootstrap token shape
//!   (`[a-z0-9]{6}.[a-z0-9]{16}`), no `@` (credentials in a URL), no `: ` and no
//!   `#` (text that is YAML structure, not a value).
//!
//! Everything else is withheld: shown only as the first 8 hex digits of a keyed
//! SHA-256 (HMAC) of the value, so an approver sees that a value changed, and which
//! withheld values on the page are equal, without learning anything of it. The key is
//! a SHA-256 of both whole documents: the documents carry the cluster's own secrets,
//! so no one reading the page can recompute a digest for a guessed value (a plain
//! SHA-256 of a short password would be looked up in a dictionary). Digests are
//! therefore comparable within one diff, not across diffs.
//!
//! Comment lines and trailing ` # comments` are not configuration (Talos ignores
//! them) and are dropped: they never reach the output, and a change to a comment
//! alone shows no line.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use hmac::{KeyInit, Mac};
use sha2::{Digest as _, Sha256};

type HmacSha256 = hmac::Hmac<Sha256>;

/// How a line of the review relates the two configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Change {
    /// An unchanged value shown to say where a change is (a sibling in the same
    /// list item).
    Context,
    /// The value the machine runs now, which the plan would remove or replace.
    Removed,
    /// The value the plan would write.
    Added,
}

/// What the review shows of a value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Shown {
    /// The value itself: its key is on the allowlist and it looks harmless.
    Value(String),
    /// The value is withheld; only a digest of it is shown.
    Withheld {
        /// The first 8 hex digits of the value's keyed SHA-256.
        digest8: String,
    },
}

/// One line of the review: a key path and what is shown of its value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ReviewLine {
    /// Added, removed, or context.
    pub(crate) change: Change,
    /// The dotted key path, list items as `[n]`, a document other than the main one
    /// prefixed with its kind (and name).
    pub(crate) path: String,
    /// The value, or its digest.
    pub(crate) shown: Shown,
}

/// The redacted diff between a machine's Applied configuration and a plan's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReviewDiff {
    /// The lines, sorted by path; at one path a removal comes before an addition.
    pub(crate) lines: Vec<ReviewLine>,
    /// How many lines show a digest instead of a value.
    pub(crate) withheld: usize,
    /// How many paths hold the same value on both sides (and have no line).
    pub(crate) unchanged: usize,
}

/// Keys whose values are shown, with why each is not secret. A value must also pass
/// [`harmless`], and no key above it may name a secret container.
pub(crate) const ALLOWED_KEYS: &[(&str, &str)] = &[
    (
        "apiVersion",
        "the schema version of a configuration document",
    ),
    ("kind", "the type name of a configuration document"),
    (
        "name",
        "the name of a document, manifest, module or volume: an identifier",
    ),
    ("version", "a schema or software version string"),
    ("type", "an enumeration: machine type, link or volume type"),
    ("disk", "the install disk's device path"),
    ("wipe", "a boolean: whether the install disk is wiped"),
    (
        "image",
        "a public container image reference (installer, kubelet, …)",
    ),
    (
        "hostname",
        "the machine's host name, visible on the network",
    ),
    ("interface", "a network link name"),
    ("dhcp", "a boolean: whether the link uses DHCP"),
    ("mtu", "a link's MTU, a number"),
    (
        "addresses",
        "addresses the machine holds, visible on the network",
    ),
    (
        "routes",
        "an inline list of routes (network, gateway, metric)",
    ),
    ("network", "a route's destination network"),
    ("gateway", "a route's gateway address"),
    ("metric", "a route's metric, a number"),
    ("nameservers", "DNS resolver addresses"),
    ("servers", "time server host names"),
    ("timezone", "a time zone name"),
    ("clusterName", "the cluster's name"),
    ("dnsDomain", "the cluster's DNS domain"),
    ("podSubnets", "the pod network ranges"),
    ("serviceSubnets", "the service network ranges"),
    (
        "allowSchedulingOnControlPlanes",
        "a boolean: whether workloads run on control-plane nodes",
    ),
];

/// Two-key rules: a value whose key is the second and whose parent key is the first
/// is shown, with why.
pub(crate) const ALLOWED_PAIRS: &[(&str, &str, &str)] = &[
    (
        "controlPlane",
        "endpoint",
        "the Kubernetes API URL every node and client dials",
    ),
    ("kubelet", "image", "the kubelet's public image reference"),
    ("vip", "ip", "the shared virtual IP of the control plane"),
];

/// Parent keys whose every entry is shown: node labels and taints are published on
/// the Kubernetes node object for anyone with read access to see.
pub(crate) const LABEL_PARENTS: &[&str] = &["nodeLabels", "nodeTaints"];

/// Words that, anywhere in a key on the path (compared without regard to case),
/// mark a value as secret even when its own key is allowlisted.
pub(crate) const SECRET_WORDS: &[&str] = &[
    "secret",
    "token",
    "key",
    "password",
    "passwd",
    "auth",
    "cert",
    "crt",
    "private",
    "bootstrap",
    "credential",
    "encryption",
];

/// Keys that name a list item, in order of preference for a context line.
const IDENTIFYING: &[&str] = &["interface", "name", "hostname", "network", "kind"];

/// The longest value shown, in characters.
const MAX_SHOWN_CHARS: usize = 128;

/// The longest key shown as itself, in characters.
const MAX_KEY_CHARS: usize = 100;

/// What replaces a key that looks like a secret.
const WITHHELD_KEY: &str = "<withheld key>";

/// What a line the parser does not understand is filed under.
const UNPARSED: &str = "<unparsed>";

/// Compares `applied` (the configuration the machine runs; `None` when unknown) with
/// `desired` (what the plan would apply) and returns what an approver may read.
pub(crate) fn review_diff(applied: Option<&[u8]>, desired: &[u8]) -> ReviewDiff {
    let key = digest_key(applied, desired);
    let old = applied.map(|a| flatten(&String::from_utf8_lossy(a)));
    let new = flatten(&String::from_utf8_lossy(desired));
    let empty = BTreeMap::new();
    let old = old.as_ref().unwrap_or(&empty);

    let show = |leaf: &Leaf| -> Shown {
        if leaf.key_allowed && !leaf.forced_withheld && harmless(&leaf.value) {
            Shown::Value(leaf.value.clone())
        } else {
            Shown::Withheld {
                digest8: digest8(&key, &leaf.value),
            }
        }
    };

    let mut lines = Vec::new();
    let mut unchanged = 0;
    let mut changed_parents = BTreeSet::new();
    let paths: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for path in paths {
        match (old.get(path), new.get(path)) {
            (Some(a), Some(d)) if a.value == d.value => unchanged += 1,
            (a, d) => {
                for (leaf, change) in [(a, Change::Removed), (d, Change::Added)] {
                    if let Some(leaf) = leaf {
                        lines.push(ReviewLine {
                            change,
                            path: path.clone(),
                            shown: show(leaf),
                        });
                        if leaf.in_item {
                            changed_parents.insert(leaf.parent.clone());
                        }
                    }
                }
            }
        }
    }

    // One context line per changed list item: an unchanged shown value of the
    // item, an identifying key preferred.
    let mut best: BTreeMap<&String, (usize, &String, Shown)> = BTreeMap::new();
    for (path, leaf) in &new {
        if !changed_parents.contains(&leaf.parent)
            || old.get(path).is_none_or(|a| a.value != leaf.value)
        {
            continue;
        }
        let shown = show(leaf);
        if !matches!(shown, Shown::Value(_)) {
            continue;
        }
        let own = path
            .strip_prefix(leaf.parent.as_str())
            .and_then(|k| k.strip_prefix('.'))
            .unwrap_or("");
        let rank = IDENTIFYING
            .iter()
            .position(|k| *k == own)
            .unwrap_or(IDENTIFYING.len());
        if best.get(&leaf.parent).is_none_or(|(r, _, _)| rank < *r) {
            best.insert(&leaf.parent, (rank, path, shown));
        }
    }
    for (_, (_, path, shown)) in best {
        lines.push(ReviewLine {
            change: Change::Context,
            path: path.clone(),
            shown,
        });
    }
    lines.sort_by(|a, b| a.path.cmp(&b.path).then(a.change.cmp(&b.change)));

    let withheld = lines
        .iter()
        .filter(|l| matches!(l.shown, Shown::Withheld { .. }))
        .count();
    ReviewDiff {
        lines,
        withheld,
        unchanged,
    }
}

/// The HMAC key of the digests: a SHA-256 of both documents, each with its length.
fn digest_key(applied: Option<&[u8]>, desired: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"infra-talos review digest v1\n");
    match applied {
        Some(a) => {
            hasher.update(b"applied");
            hasher.update((a.len() as u64).to_be_bytes());
            hasher.update(a);
        }
        None => hasher.update(b"no applied"),
    }
    hasher.update((desired.len() as u64).to_be_bytes());
    hasher.update(desired);
    hasher.finalize().into()
}

/// The first 8 hex digits of the value's HMAC-SHA-256 under `key`.
fn digest8(key: &[u8; 32], value: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(8);
    if let Ok(mut mac) = <HmacSha256 as KeyInit>::new_from_slice(key) {
        mac.update(value.as_bytes());
        for byte in mac.finalize().into_bytes().iter().take(4) {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    out
}

/// One segment of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    /// A mapping key.
    Key(String),
    /// A key that looks like a secret itself.
    WithheldKey,
    /// A sequence item, numbered from 0.
    Index(usize),
    /// Where lines the parser does not understand are filed.
    Unparsed,
}

/// A value as the parser read it, before the document's paths are rendered.
#[derive(Debug)]
struct RawLeaf {
    path: Vec<Seg>,
    value: String,
    /// Set when the value's text is not what its line alone said (a continuation
    /// line was joined to it): such a value is never shown.
    forced_withheld: bool,
}

/// A value with its rendered path and what was decided about its key.
#[derive(Debug)]
struct Leaf {
    value: String,
    /// The rendered path of the mapping or item holding it.
    parent: String,
    /// Whether the value sits directly in a list item.
    in_item: bool,
    /// Whether its key allows showing the value (before the value's own check).
    key_allowed: bool,
    forced_withheld: bool,
}

/// Every value of every document of `text`, by rendered path.
fn flatten(text: &str) -> BTreeMap<String, Leaf> {
    let mut out = BTreeMap::new();
    let mut prefixes: HashMap<String, usize> = HashMap::new();
    let mut kindless = 0usize;
    for (index, doc) in parse(text).into_iter().enumerate() {
        let top = |name: &str| {
            doc.iter()
                .find(|l| matches!(l.path.as_slice(), [Seg::Key(k)] if k == name))
                .map(|l| unquote(&l.value))
        };
        let kind = top("kind").filter(|k| {
            !k.is_empty()
                && k.len() <= 64
                && k.bytes().all(|b| b.is_ascii_alphanumeric())
                && !key_looks_secret(k)
        });
        let name = top("name").filter(|n| {
            !n.is_empty()
                && n.len() <= 63
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
                && harmless(n)
                && !key_looks_secret(n)
        });
        let mut prefix = match (&kind, &name) {
            (Some(k), Some(n)) => format!("{k}/{n}"),
            (Some(k), None) => k.clone(),
            _ => {
                kindless += 1;
                if kindless == 1 {
                    String::new()
                } else {
                    format!("document{index}")
                }
            }
        };
        let seen = prefixes.entry(prefix.clone()).or_insert(0);
        *seen += 1;
        if *seen > 1 {
            prefix = format!("{prefix}#{seen}");
        }
        let kind_allowed = kind.as_deref().is_none_or(|k| !names_secret(k));

        let mut counts: HashMap<String, usize> = HashMap::new();
        for leaf in doc {
            let (parent_segs, last) = leaf.path.split_at(leaf.path.len().saturating_sub(1));
            let parent = render(&prefix, parent_segs);
            let mut path = render(&prefix, &leaf.path);
            let n = counts.entry(path.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                path = format!("{path} #{n}");
            }
            let in_item =
                matches!(parent_segs.last(), Some(Seg::Index(_))) && matches!(last, [Seg::Key(_)]);
            out.insert(
                path,
                Leaf {
                    key_allowed: kind_allowed && key_allowed(&leaf.path),
                    value: leaf.value,
                    parent,
                    in_item,
                    forced_withheld: leaf.forced_withheld,
                },
            );
        }
    }
    out
}

/// `segs` as a dotted path under `prefix`.
fn render(prefix: &str, segs: &[Seg]) -> String {
    let mut out = prefix.to_owned();
    for seg in segs {
        match seg {
            Seg::Index(n) => {
                out.push('[');
                out.push_str(&n.to_string());
                out.push(']');
                continue;
            }
            Seg::Key(_) | Seg::WithheldKey | Seg::Unparsed if !out.is_empty() => out.push('.'),
            _ => {}
        }
        match seg {
            Seg::Key(k) => out.push_str(k),
            Seg::WithheldKey => out.push_str(WITHHELD_KEY),
            Seg::Unparsed => out.push_str(UNPARSED),
            Seg::Index(_) => {}
        }
    }
    out
}

/// Whether a value at `path` may be shown, judged by its keys alone.
fn key_allowed(path: &[Seg]) -> bool {
    let mut keys = Vec::with_capacity(path.len());
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if names_secret(k) {
                    return false;
                }
                keys.push(k.as_str());
            }
            Seg::WithheldKey | Seg::Unparsed => return false,
            Seg::Index(_) => {}
        }
    }
    // The value's own key: the last key segment, list indexes after it skipped.
    let Some(Seg::Key(own)) = path.iter().rev().find(|s| !matches!(s, Seg::Index(_))) else {
        return false;
    };
    let parent = keys.len().checked_sub(2).map(|i| keys[i]);
    // Only a direct child of a label parent (no index between them).
    let direct_parent = match path {
        [.., Seg::Key(p), Seg::Key(_)] => Some(p.as_str()),
        _ => None,
    };
    ALLOWED_KEYS.iter().any(|(k, _)| k == own)
        || direct_parent.is_some_and(|p| LABEL_PARENTS.contains(&p))
        || ALLOWED_PAIRS
            .iter()
            .any(|(p, k, _)| k == own && parent == Some(*p))
}

/// Whether a key names a secret or a container of secrets.
fn names_secret(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| lower.contains(w))
        || lower == "ca"
        || lower.ends_with("ca") && key.ends_with("CA")
        || lower.ends_with("cas") && key.ends_with("CAs")
}

/// Whether a value looks harmless enough to show (its key being allowlisted): see
/// the module documentation.
pub(crate) fn harmless(value: &str) -> bool {
    value.chars().count() <= MAX_SHOWN_CHARS
        && !value.chars().any(char::is_control)
        && !value.contains("-----")
        && !value.contains('@')
        && !value.contains(": ")
        && !value.contains('#')
        && !has_token(value)
        && !has_base64_run(value, false)
}

/// Whether a key looks like a secret itself.
fn key_looks_secret(key: &str) -> bool {
    key.chars().count() > MAX_KEY_CHARS
        || key.chars().any(char::is_control)
        || key.contains("-----")
        || has_token(key)
        || has_base64_run(key, true)
}

/// Whether `text` holds a Kubernetes bootstrap token shape, `[a-z0-9]{6}.[a-z0-9]{16}`.
fn has_token(text: &str) -> bool {
    let b = text.as_bytes();
    let tok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (6..b.len()).any(|dot| {
        b[dot] == b'.'
            && b.len() >= dot + 17
            && b[dot - 6..dot].iter().all(|&c| tok(c))
            && b[dot + 1..dot + 17].iter().all(|&c| tok(c))
    })
}

/// Whether `text` holds a run of 16 or more base64 characters (`A-Za-z0-9+/=_-`)
/// that is not made of words: a run is words when it has no digit, `+` or `=`, and
/// no uppercase letter (keys, `camel_words`: at most one uppercase letter in four).
fn has_base64_run(text: &str, camel_words: bool) -> bool {
    let is_b64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-');
    text.split(|c: char| !is_b64(c)).any(|run| {
        if run.len() < 16 {
            return false;
        }
        let letters = run.bytes().filter(u8::is_ascii_alphabetic).count();
        let upper = run.bytes().filter(u8::is_ascii_uppercase).count();
        let wordy = !run
            .bytes()
            .any(|b| b.is_ascii_digit() || b == b'+' || b == b'=')
            && if camel_words {
                upper * 4 <= letters
            } else {
                upper == 0
            };
        !wordy
    })
}

/// `text` without one pair of surrounding quotes.
fn unquote(text: &str) -> String {
    for q in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(q).and_then(|t| t.strip_suffix(q)) {
            return inner.to_owned();
        }
    }
    text.to_owned()
}

/// An open mapping key or sequence item while parsing.
#[derive(Debug)]
struct Frame {
    /// The column of the key, or of the item's `-`.
    indent: usize,
    seg: Seg,
    /// Whether this is a sequence item (else a key awaiting nested content).
    item: bool,
    /// The next sequence index of items under it.
    next_index: usize,
    /// Whether anything was read under it.
    children: bool,
}

/// A block scalar being read.
#[derive(Debug)]
struct Block {
    /// The column of its key (or item); its content is indented deeper.
    indent: usize,
    path: Vec<Seg>,
    lines: Vec<String>,
}

/// The line parser's state within one document.
#[derive(Debug, Default)]
struct Parser {
    docs: Vec<Vec<RawLeaf>>,
    leaves: Vec<RawLeaf>,
    stack: Vec<Frame>,
    root_next_index: usize,
    block: Option<Block>,
    /// The column of the last inline scalar's key and its leaf, for continuation
    /// lines.
    last_scalar: Option<(usize, usize)>,
    /// The index of the last leaf if it holds unparsed lines.
    last_unparsed: Option<usize>,
}

/// Every document of `text` as its list of leaves, empty documents left out.
fn parse(text: &str) -> Vec<Vec<RawLeaf>> {
    let mut p = Parser::default();
    for raw in text.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        p.line(line);
    }
    p.end_document();
    p.docs
}

/// The width of the line's leading spaces and tabs, in bytes.
fn indent_of(line: &str) -> usize {
    line.bytes()
        .take_while(|&b| b == b' ' || b == b'\t')
        .count()
}

/// Whether `content` starts a sequence item.
fn is_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ") || content.starts_with("-\t")
}

impl Parser {
    fn line(&mut self, line: &str) {
        let indent = indent_of(line);
        let content = line[indent..].trim_end();

        if let Some(block) = &mut self.block {
            if content.is_empty() {
                block.lines.push(String::new());
                return;
            }
            if indent > block.indent {
                block.lines.push(line.trim_end().to_owned());
                return;
            }
            self.end_block();
        }

        if indent == 0 && (is_marker(content, "---") || is_marker(content, "...")) {
            self.end_document();
            let rest = content[3..].trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                self.unparsed(0, rest);
            }
            return;
        }
        if content.is_empty() || content.starts_with('#') {
            return;
        }
        if let Some((col, leaf)) = self.last_scalar
            && indent > col
        {
            if let Some(l) = self.leaves.get_mut(leaf) {
                l.value.push(' ');
                l.value.push_str(content);
                l.forced_withheld = true;
            }
            return;
        }
        self.last_scalar = None;
        self.structure(indent, content);
    }

    /// A line that is not a continuation: an item, a key, or something unparsed.
    fn structure(&mut self, mut col: usize, mut content: &str) {
        loop {
            if is_item(content) {
                self.pop_for_item(col);
                let index = self.take_index();
                self.stack.push(Frame {
                    indent: col,
                    seg: Seg::Index(index),
                    item: true,
                    next_index: 0,
                    children: false,
                });
                let rest = &content[1..];
                let trimmed = rest.trim_start_matches([' ', '\t']);
                let dash = col;
                col += 1 + rest.len() - trimmed.len();
                content = trimmed;
                if content.is_empty() || content.starts_with('#') {
                    return;
                }
                if is_item(content) {
                    continue;
                }
                if let Some((key, value)) = split_key(content) {
                    self.key_line(col, key, value);
                } else {
                    // A scalar item: the item frame holds nothing else.
                    self.stack.pop();
                    let path = self.path_with(Seg::Index(index));
                    self.value(dash, path, content);
                }
                return;
            }
            if let Some((key, value)) = split_key(content) {
                self.pop_while(|f| f.indent >= col);
                self.key_line(col, key, value);
            } else {
                self.unparsed(col, content);
            }
            return;
        }
    }

    /// A `key: value` (or `key:`) line whose key starts at `col`.
    fn key_line(&mut self, col: usize, key: &str, value: &str) {
        let seg = if key_looks_secret(key) {
            Seg::WithheldKey
        } else {
            Seg::Key(key.to_owned())
        };
        let value = strip_comment(value);
        if value.is_empty() {
            self.mark_children();
            self.stack.push(Frame {
                indent: col,
                seg,
                item: false,
                next_index: 0,
                children: false,
            });
            return;
        }
        let path = self.path_with(seg);
        self.value(col, path, value);
    }

    /// An inline value or the start of a block scalar at `path`, its key at `col`.
    fn value(&mut self, col: usize, path: Vec<Seg>, value: &str) {
        self.mark_children();
        if is_block_indicator(value) {
            self.block = Some(Block {
                indent: col,
                path,
                lines: Vec::new(),
            });
            return;
        }
        self.last_scalar = Some((col, self.leaves.len()));
        self.push_leaf(path, value.to_owned(), false);
    }

    /// A line the parser does not understand, at column `col`: filed, withheld,
    /// under the mapping it sits in; consecutive ones there are one value.
    fn unparsed(&mut self, col: usize, content: &str) {
        self.pop_while(|f| f.indent >= col);
        let path = self.path_with(Seg::Unparsed);
        if let Some(leaf) = self.last_unparsed.and_then(|i| self.leaves.get_mut(i))
            && leaf.path == path
        {
            leaf.value.push('\n');
            leaf.value.push_str(content);
            return;
        }
        self.mark_children();
        self.push_leaf(path, content.to_owned(), true);
        self.last_unparsed = Some(self.leaves.len() - 1);
    }

    fn push_leaf(&mut self, path: Vec<Seg>, value: String, forced_withheld: bool) {
        self.last_unparsed = None;
        self.leaves.push(RawLeaf {
            path,
            value,
            forced_withheld,
        });
    }

    /// Closes frames until an item at `col` belongs to the top one: a key at a
    /// smaller column, a key at the same column (a sequence written flush with its
    /// key), or an item at a smaller column.
    fn pop_for_item(&mut self, col: usize) {
        self.pop_while(|f| {
            if f.item {
                f.indent >= col
            } else {
                f.indent > col
            }
        });
    }

    /// Closes frames while `close` says so; a key closed with nothing under it is a
    /// null value.
    fn pop_while(&mut self, close: impl Fn(&Frame) -> bool) {
        while self.stack.last().is_some_and(&close) {
            self.close_frame();
        }
    }

    fn close_frame(&mut self) {
        let Some(frame) = self.stack.last() else {
            return;
        };
        if !frame.item && !frame.children {
            let path = self.path();
            self.push_leaf(path, String::new(), false);
        }
        self.stack.pop();
    }

    /// The next sequence index under the top frame (or the document root).
    fn take_index(&mut self) -> usize {
        match self.stack.last_mut() {
            Some(f) => {
                f.children = true;
                f.next_index += 1;
                f.next_index - 1
            }
            None => {
                self.root_next_index += 1;
                self.root_next_index - 1
            }
        }
    }

    fn mark_children(&mut self) {
        if let Some(f) = self.stack.last_mut() {
            f.children = true;
        }
    }

    fn path(&self) -> Vec<Seg> {
        self.stack.iter().map(|f| f.seg.clone()).collect()
    }

    fn path_with(&self, seg: Seg) -> Vec<Seg> {
        let mut path = self.path();
        path.push(seg);
        path
    }

    /// Ends a block scalar: its lines, with their common indentation removed and
    /// trailing blank lines dropped, are one value.
    fn end_block(&mut self) {
        let Some(mut block) = self.block.take() else {
            return;
        };
        while block.lines.last().is_some_and(String::is_empty) {
            block.lines.pop();
        }
        let common = block
            .lines
            .iter()
            .filter(|l| !l.is_empty())
            .map(|l| indent_of(l))
            .min()
            .unwrap_or(0);
        let value = block
            .lines
            .iter()
            .map(|l| l.get(common..).unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        self.push_leaf(block.path, value, false);
    }

    fn end_document(&mut self) {
        self.end_block();
        while !self.stack.is_empty() {
            self.close_frame();
        }
        self.last_scalar = None;
        self.last_unparsed = None;
        self.root_next_index = 0;
        let leaves = std::mem::take(&mut self.leaves);
        if !leaves.is_empty() {
            self.docs.push(leaves);
        }
    }
}

/// Whether `content` is the document marker `marker`, alone or followed by a space.
fn is_marker(content: &str, marker: &str) -> bool {
    content == marker
        || content
            .strip_prefix(marker)
            .is_some_and(|r| r.starts_with([' ', '\t']))
}

/// Whether a value starts a block scalar: `|` or `>` with optional chomping and
/// indentation indicators, after optional tags and anchors.
fn is_block_indicator(value: &str) -> bool {
    let Some(last) = value.split_whitespace().last() else {
        return false;
    };
    let head_ok = value
        .split_whitespace()
        .rev()
        .skip(1)
        .all(|t| t.starts_with('!') || t.starts_with('&'));
    let mut chars = last.chars();
    head_ok
        && matches!(chars.next(), Some('|' | '>'))
        && chars.all(|c| matches!(c, '-' | '+') || c.is_ascii_digit())
}

/// Splits a `key: value` line into its key (unquoted) and its value text; `None` if
/// the line is not one.
fn split_key(content: &str) -> Option<(&str, &str)> {
    fn after_colon(rest: &str) -> Option<&str> {
        let rest = rest.strip_prefix(':')?;
        (rest.is_empty() || rest.starts_with([' ', '\t'])).then_some(rest)
    }
    for q in ['"', '\''] {
        if let Some(inner) = content.strip_prefix(q) {
            let end = inner.find(q)?;
            let key = &inner[..end];
            let rest = inner[end + 1..].trim_start_matches([' ', '\t']);
            return after_colon(rest).map(|v| (key, v.trim()));
        }
    }
    if content.starts_with([
        '[', '{', '#', '&', '*', '!', '|', '>', '%', '@', '`', '?', ',',
    ]) {
        return None;
    }
    let bytes = content.as_bytes();
    let colon = (0..bytes.len()).find(|&i| {
        bytes[i] == b':' && (i + 1 == bytes.len() || matches!(bytes[i + 1], b' ' | b'\t'))
    })?;
    let key = content[..colon].trim_end();
    if key.is_empty() || key.contains(" #") {
        return None;
    }
    Some((key, content[colon + 1..].trim()))
}

/// A value without a trailing ` # comment`, trimmed. A `#` inside a leading quoted
/// string is kept.
fn strip_comment(value: &str) -> &str {
    let value = value.trim();
    if value.starts_with('#') {
        return "";
    }
    let start = match value.chars().next() {
        Some(q @ ('"' | '\'')) => value[1..].find(q).map_or(value.len(), |i| i + 2),
        _ => 0,
    };
    let bytes = value.as_bytes();
    let cut = (start.max(1)..bytes.len())
        .find(|&i| bytes[i] == b'#' && matches!(bytes[i - 1], b' ' | b'\t'))
        .unwrap_or(bytes.len());
    value[..cut].trim_end()
}

#[cfg(test)]
pub(super) mod tests;
