//! Tests of [`super::redact`]: examples, the corpus in `tests/redaction_corpus`, and
//! the laws every output keeps.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

#[test]
fn the_vocabulary_is_sorted_lowercase_and_without_duplicates() {
    for pair in VOCABULARY.windows(2) {
        assert!(
            pair[0] < pair[1],
            "{:?} is not before {:?}",
            pair[0],
            pair[1]
        );
    }
    for word in VOCABULARY {
        assert_eq!(*word, word.to_ascii_lowercase(), "{word}");
        assert!(!word.is_empty() && word.is_ascii(), "{word:?}");
        // Every entry is a word as `redact` splits them: no whitespace, no separator,
        // no punctuation at either end.
        assert!(
            !word.contains(|c: char| is_space(c) || is_separator(c)),
            "{word:?}"
        );
        assert_eq!(word.trim_matches(|c: char| c.is_ascii_punctuation()), *word);
    }
    assert!(VOCABULARY.len() >= 300, "{}", VOCABULARY.len());
}

#[test]
fn short_unquoted_values_are_withheld() {
    assert_eq!(
        redact("invalid value for field token: abc123.def456"),
        "invalid value for field token: <withheld>"
    );
    assert_eq!(redact("machine.install.disk: /dev/sda"), CONFIG_MARK);
    assert_eq!(redact("  token: k8s7qx.z3l0a9nd"), CONFIG_MARK);
    assert_eq!(redact("password: hunter2"), CONFIG_MARK);
    assert_eq!(
        redact("bad password hunter2 for user"),
        "bad <withheld> for user"
    );
}

#[test]
fn quoted_values_and_long_tokens_are_withheld() {
    let text = "1 error occurred:\n\t* invalid value \"s3cret\" for token: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t\n";
    assert_eq!(
        redact(text),
        "1 error occurred: * invalid value \"<withheld>\" for token: <withheld>"
    );
    assert_eq!(redact("bad value 'abc def"), "bad value <withheld>");
    assert_eq!(redact("can't apply 'x'"), "can't apply <withheld>");
}

#[test]
fn message_words_numbers_and_endpoints_are_kept() {
    let refused = "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial tcp 10.5.0.2:50000: connect: connection refused\"";
    assert_eq!(redact(refused), refused);
    for kept in [
        "Applied configuration without a reboot",
        "Dry run summary: the configuration would be applied without a reboot",
        "node is not available",
        "node is shutting down",
        "resource doesn't exist",
        "the configuration is empty",
        "the configuration is not valid UTF-8 text",
        "the simulated node applies configuration in NO_REBOOT mode only",
        "error: dial tcp 192.168.1.10: i/o timeout",
        "3 errors occurred",
        "busy",
    ] {
        assert_eq!(redact(kept), kept);
    }
    // Too many digits, an octet out of range, a port that is not a small number.
    assert_eq!(redact("port 123456"), "port <withheld>");
    assert_eq!(redact("host 10.5.0.256"), "host <withheld>");
    assert_eq!(redact("dial 10.5.0.2:650000"), "dial <withheld>");
    // Non-ASCII letters never match the vocabulary.
    assert_eq!(redact("\u{212a}ey"), MARK);
}

#[test]
fn adjacent_markers_collapse() {
    assert_eq!(redact("alpha bravo, charlie"), MARK);
    assert_eq!(
        redact("apply failed: alpha (bravo) charlie"),
        "apply failed: <withheld> (<withheld>) <withheld>"
    );
    assert_eq!(
        redact("machine:\n  token: x\nversion: v1alpha1\nfailed"),
        "<config withheld> failed"
    );
}

#[test]
fn configuration_lines_are_withheld_whole() {
    let text = "unknown keys found during decoding:\nmachine:\n    tokne: abc\n    kubelet:\n        extraArgz:\n            node-ip: zq8v6c\n";
    assert_eq!(
        redact(text),
        "unknown keys found during decoding: <config withheld>"
    );
    // Deeper-indented lines belong to the configuration line above them, whatever
    // they hold; the next line at that indentation is read again.
    let block = "content: |\n    port 12345\n    refused\nnode is not ready";
    assert_eq!(redact(block), "<config withheld> node is not ready");
    let pem = "apply failed:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----\nrefused";
    assert_eq!(redact(pem), "apply failed: <config withheld> refused");
    // An indented list item is configuration, not a diff.
    assert_eq!(
        redact("invalid\n  - 10.5.0.0/24\nfailed"),
        "invalid <config withheld> failed"
    );
    // Message labels and addresses before a colon are read word by word.
    assert_eq!(redact("warning: token expired"), "warning: token expired");
    assert_eq!(
        redact("x509: certificate signed by unknown authority"),
        "x509: certificate signed by unknown authority"
    );
    // Any other key is configuration, even one that is a message word.
    assert_eq!(redact("failed: connection refused"), CONFIG_MARK);
    assert_eq!(
        redact("10.5.0.2: connection refused"),
        "10.5.0.2: connection refused"
    );
}

#[test]
fn diffs_are_withheld() {
    let text =
        "this config change can't be applied in immediate mode\ndiff: -  token: abc\n+  token: def";
    assert_eq!(
        redact(text),
        "this config change can't be applied in immediate mode <diff withheld>"
    );
    let dry_run = "Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:\n\n+ secret: x";
    assert_eq!(
        redact(dry_run),
        "Dry run summary: Applied configuration without a reboot (skipped in dry-run). <diff withheld>"
    );
    assert_eq!(
        redact("failed\n--- a\n+++ b\n refused"),
        "failed <diff withheld>"
    );
    assert_eq!(redact("- token: abc"), DIFF_MARK);
    assert_eq!(
        redact("bad config\n@@ -1 +1 @@"),
        "bad config <diff withheld>"
    );
    assert_eq!(redact("bad config\ndiff"), "bad <diff withheld>");
}

#[test]
fn long_text_is_cut_at_a_word() {
    let long = "connection refused ".repeat(100);
    let redacted = redact(&long);
    assert!(redacted.chars().count() <= MAX_CHARS, "{redacted}");
    assert!(redacted.ends_with(" …"), "{redacted}");
    assert!(redacted.starts_with("connection refused connection"));
    let with_diff = format!("{long}\ndiff: + token: x");
    let redacted = redact(&with_diff);
    assert!(redacted.chars().count() <= MAX_CHARS, "{redacted}");
    assert!(redacted.ends_with(" … <diff withheld>"), "{redacted}");
    assert_eq!(redact(&redacted), redacted);
}

// ---------------------------------------------------------------------------------
// The corpus
// ---------------------------------------------------------------------------------

/// One fragment of the corpus.
#[derive(Debug)]
struct Case {
    file: String,
    name: String,
    secrets: Vec<String>,
    keep: Vec<String>,
    text: String,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/redaction_corpus")
}

/// Reads every `*.txt` file of the corpus. A case starts at `#> case: NAME`; its
/// `#> secrets:` line lists values (split at whitespace) that must not survive, and
/// `#> keep:` lines list texts (split at ` | `) that must; every other line is the
/// fragment.
fn corpus() -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("the corpus directory")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let content = std::fs::read_to_string(&path).expect("a corpus file");
        let mut current: Option<(Case, Vec<&str>)> = None;
        let mut finish = |current: Option<(Case, Vec<&str>)>| {
            if let Some((mut case, lines)) = current {
                case.text = lines.join("\n").trim_end_matches('\n').to_owned();
                assert!(!case.text.is_empty(), "{file}: {} has no text", case.name);
                cases.push(case);
            }
        };
        for line in content.lines() {
            if let Some(name) = line.strip_prefix("#> case:") {
                finish(current.take());
                current = Some((
                    Case {
                        file: file.clone(),
                        name: name.trim().to_owned(),
                        secrets: Vec::new(),
                        keep: Vec::new(),
                        text: String::new(),
                    },
                    Vec::new(),
                ));
                continue;
            }
            let (case, lines) = current
                .as_mut()
                .unwrap_or_else(|| panic!("{file}: text before the first case"));
            if let Some(secrets) = line.strip_prefix("#> secrets:") {
                case.secrets
                    .extend(secrets.split_whitespace().map(str::to_owned));
            } else if let Some(keep) = line.strip_prefix("#> keep:") {
                case.keep.extend(
                    keep.split(" | ")
                        .map(str::trim)
                        .filter(|k| !k.is_empty())
                        .map(str::to_owned),
                );
            } else {
                lines.push(line);
            }
        }
        finish(current.take());
    }
    cases
}

/// Runs of base64's alphabet at least 16 long that are not a vocabulary word.
fn base64_runs(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
        .filter(|run| run.len() >= 16 && !in_vocabulary(run))
        .collect()
}

#[test]
fn the_corpus_loses_no_secret_and_keeps_what_operators_read() {
    let cases = corpus();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    assert!(cases.iter().filter(|c| !c.secrets.is_empty()).count() >= 25);
    assert!(cases.iter().filter(|c| !c.keep.is_empty()).count() >= 15);
    let mut failures = Vec::new();
    for case in &cases {
        let out = redact(&case.text);
        let at = format!("{} / {}", case.file, case.name);
        for secret in &case.secrets {
            if out.contains(secret.as_str()) {
                failures.push(format!("{at}: the secret {secret:?} survives in {out:?}"));
            }
            let chars: Vec<char> = secret.chars().collect();
            for window in chars.windows(6) {
                let piece: String = window.iter().collect();
                if out.contains(&piece) {
                    failures.push(format!(
                        "{at}: {piece:?} of the secret {secret:?} survives in {out:?}"
                    ));
                    break;
                }
            }
        }
        for run in base64_runs(&out) {
            failures.push(format!("{at}: the base64 run {run:?} survives in {out:?}"));
        }
        for keep in &case.keep {
            if !out.contains(keep.as_str()) {
                failures.push(format!("{at}: {keep:?} is lost from {out:?}"));
            }
        }
        if redact(&out) != out {
            failures.push(format!("{at}: not a fixed point: {out:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_connection_refused_error_survives_whole() {
    let case = corpus()
        .into_iter()
        .find(|c| c.name == "a refused dial to the node's API")
        .expect("the case");
    let out = redact(&case.text);
    for kept in ["Unavailable", "connection refused", "10.5.0.2:50000"] {
        assert!(out.contains(kept), "{out}");
    }
    assert_eq!(out, case.text);
}

// ---------------------------------------------------------------------------------
// Laws
// ---------------------------------------------------------------------------------

/// The alphanumeric pieces of the vocabulary's words (`can't` gives `can` and `t`).
fn vocabulary_pieces() -> BTreeSet<String> {
    VOCABULARY
        .iter()
        .flat_map(|word| word.split(|c: char| !c.is_alphanumeric()))
        .filter(|piece| !piece.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The output with its markers blanked out.
fn without_markers(out: &str) -> String {
    Marker::ALL.iter().fold(out.to_owned(), |text, marker| {
        text.replace(marker.text(), " ")
    })
}

/// Checks the allowlist law on one output: every word in it is recognised. Returns
/// what broke it.
fn unrecognised_words(out: &str, pieces: &BTreeSet<String>) -> Vec<String> {
    let bare = without_markers(out);
    let mut found = Vec::new();
    // As `redact` reads words: each is in the vocabulary, a small number or an
    // endpoint.
    for word in bare.split(|c: char| is_space(c) || is_separator(c)) {
        let core = word.trim_matches(|c: char| c.is_ascii_punctuation());
        if !core.is_empty() && !is_safe_word(core) {
            found.push(format!("word {core:?}"));
        }
    }
    // Read independently, at every character that is not a letter or a digit: each
    // piece is a piece of a vocabulary word or at most five digits.
    for piece in bare.split(|c: char| !c.is_alphanumeric()) {
        let small_number =
            piece.len() <= MAX_NUMBER_DIGITS && piece.chars().all(|c| c.is_ascii_digit());
        let known =
            piece.is_empty() || small_number || pieces.contains(&piece.to_ascii_lowercase());
        if !known {
            found.push(format!("piece {piece:?}"));
        }
    }
    found
}

/// Text built from the pieces that steer `redact`: vocabulary words, numbers,
/// addresses, markers, punctuation, diff and configuration signs, line breaks, and
/// arbitrary characters and strings.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(VOCABULARY).prop_map(str::to_owned),
        1 => prop::sample::select(VOCABULARY).prop_map(str::to_ascii_uppercase),
        2 => (0u32..2_000_000).prop_map(|n| n.to_string()),
        1 => (any::<[u8; 4]>(), prop::option::of(0u32..200_000)).prop_map(|(ip, port)| {
            let address = format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3]);
            match port {
                Some(port) => format!("{address}:{port}"),
                None => address,
            }
        }),
        3 => "[a-zA-Z0-9]{1,12}",
        2 => "[a-zA-Z0-9._:/+=,;'@$!*&?~#%^|\\\\-]{1,24}",
        3 => prop::sample::select(vec![
            " ", " ", "  ", "\t", "\n", "\n", "\r\n", "\r", "\u{0}", "\u{2028}", "\u{a0}",
        ])
        .prop_map(str::to_owned),
        3 => prop::sample::select(vec![
            "\"", "'", "`", "(", ")", "[", "]", "{", "}", "<", ">", ":", ".", ",", ";",
            "-", "+", "=", "/", "…", "*", "!", "?",
        ])
        .prop_map(str::to_owned),
        2 => prop::sample::select(vec![
            MARK, CONFIG_MARK, DIFF_MARK, "<withheld", "withheld>", "<config ", "<diff ",
        ])
        .prop_map(str::to_owned),
        2 => prop::sample::select(vec![
            "diff", "diff:", "Diff:", "config", "Config diff", "---", "+++", "@@", "+ ",
            "- ", "\n- ", "\n+ ", "\n  - ", "\n--- a", "\n@@ -1 +1 @@", "key: ", "\nkey:",
            "\n  token: ", "machine:", "cluster:", "v1alpha1", "-----BEGIN", "-----END",
            "\n-----BEGIN X-----\n", "\n-----END X-----\n", "error: ", "\nwarning:",
            "\nyaml: ", "\n10.5.0.2: ", "-----", "—", "\u{212a}",
        ])
        .prop_map(str::to_owned),
        1 => any::<char>().prop_map(String::from),
        1 => any::<String>(),
    ]
}

/// Long message-like text: words, numbers, punctuation, markers and unknown words,
/// with no diff or configuration sign until an optional diff at the end, so that the
/// length cap is reached.
fn long_message() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        6 => prop::sample::select(VOCABULARY).prop_map(str::to_owned),
        4 => Just(" ".to_owned()),
        1 => Just("\n".to_owned()),
        1 => (0u32..200_000).prop_map(|n| n.to_string()),
        1 => "[a-z0-9]{1,10}",
        1 => prop::sample::select(vec!["\"", "(", ")", ",", ":", ".", "…", "--"])
            .prop_map(str::to_owned),
        1 => prop::sample::select(vec![MARK, CONFIG_MARK, DIFF_MARK]).prop_map(str::to_owned),
    ];
    (
        prop::collection::vec(piece, 100..500),
        prop::option::of(Just("\ndiff: + token: x")),
    )
        .prop_map(|(parts, diff)| parts.concat() + diff.unwrap_or(""))
}

fn text(max_fragments: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..max_fragments).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Every word of an output is recognised: in the vocabulary, a small number or an
    /// IPv4 endpoint; everything else in it is a marker, punctuation or a space.
    #[test]
    fn every_kept_word_is_recognised(input in text(60)) {
        let out = redact(&input);
        let found = unrecognised_words(&out, &vocabulary_pieces());
        prop_assert!(found.is_empty(), "{found:?} in {out:?} from {input:?}");
    }

    /// Redacting redacted text changes nothing.
    #[test]
    fn redaction_is_idempotent(input in text(60)) {
        let once = redact(&input);
        prop_assert_eq!(redact(&once), once.clone(), "from {:?}", input);
    }

    /// Arbitrary strings: one line, no control characters, no leading or trailing
    /// space, and the law and idempotence hold.
    #[test]
    fn arbitrary_strings_keep_the_laws(input in any::<String>()) {
        let once = redact(&input);
        prop_assert!(!once.contains(|c: char| c.is_control() || (c != ' ' && c.is_whitespace())));
        prop_assert_eq!(once.trim(), once.as_str());
        prop_assert_eq!(redact(&once), once.clone());
        let found = unrecognised_words(&once, &vocabulary_pieces());
        prop_assert!(found.is_empty(), "{found:?} in {once:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Long inputs: the length cap, the law and idempotence hold after a cut.
    #[test]
    fn long_outputs_are_capped(input in prop_oneof![text(400), long_message()]) {
        let once = redact(&input);
        prop_assert!(once.chars().count() <= MAX_CHARS, "{} chars", once.chars().count());
        prop_assert_eq!(redact(&once), once.clone(), "from {:?}", input);
        let found = unrecognised_words(&once, &vocabulary_pieces());
        prop_assert!(found.is_empty(), "{found:?} in {once:?}");
    }

}
