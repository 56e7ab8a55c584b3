//! What the command-set tests share: redaction of the values that differ from run
//! to run (store times, recovery epochs, blanket approval identifiers) before a
//! transcript is compared with its snapshot.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "a module shared by test binaries, each using the parts it needs"
)]

/// Replaces store times (`YYYY-MM-DDTHH:MM:SS.mmmZ`) with `[time]`.
pub fn redact(text: &str) -> String {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd.dddZ";
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let fits = bytes.len() - i >= SHAPE.len()
            && SHAPE.iter().zip(&bytes[i..]).all(|(shape, b)| match shape {
                b'd' => b.is_ascii_digit(),
                other => other == b,
            });
        if fits {
            out.push_str("[time]");
            i += SHAPE.len();
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    // Recovery epochs are random: `epoch <32 hex>` becomes `epoch [epoch]`.
    let mut rest = out.as_str();
    let mut done = String::new();
    while let Some(at) = rest.find("epoch ") {
        let tail = &rest[at + 6..];
        let hex = tail.len() >= 32 && tail[..32].bytes().all(|b| b.is_ascii_hexdigit());
        done.push_str(&rest[..at + 6]);
        if hex {
            done.push_str("[epoch]");
            rest = &tail[32..];
        } else {
            rest = tail;
        }
    }
    done.push_str(rest);
    store_instants(&done)
}

/// Store instants in refusals (`t=<ms>ms`) become `t=[ms]`.
fn store_instants(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("t=") {
        let tail = &rest[at + 2..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        out.push_str(&rest[..at + 2]);
        if digits > 0 && tail[digits..].starts_with("ms") {
            out.push_str("[ms]");
            rest = &tail[digits + 2..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Replaces blanket approval identifiers (`blanket-<32 hex>`) with `blanket-[id]`.
pub fn redact_blankets(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("blanket-") {
        let tail = &rest[at + 8..];
        out.push_str(&rest[..at + 8]);
        if tail.len() >= 32 && tail[..32].bytes().all(|b| b.is_ascii_hexdigit()) {
            out.push_str("[id]");
            rest = &tail[32..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}
