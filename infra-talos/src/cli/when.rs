//! Store times for people: milliseconds since the Unix epoch written as
//! `YYYY-MM-DDTHH:MM:SS.mmmZ`, and read back from that form (UTC, the fraction
//! optional) where an operator gives a time on the command line.

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
#[must_use]
pub fn iso(ms: u64) -> String {
    crate::civil::iso(ms)
}

/// `YYYY-MM-DDTHH:MM:SS[.mmm]Z` as milliseconds since the Unix epoch; `Err` says
/// what is wrong with the text.
///
/// # Errors
///
/// Text that is not such a time, saying so.
pub fn parse_iso(text: &str) -> Result<u64, String> {
    crate::civil::parse_iso(text)
}

/// The wall clock now, read through the injected clock (certificate validity).
pub(super) fn wall_now() -> std::time::SystemTime {
    crate::backend::WallTime::system(std::sync::Arc::new(infra_core::engine::SystemClock::new()))
        .system_time()
}

/// A span written as a number and a unit: `30s`, `90m`, `12h`, `7d`.
pub(super) fn parse_span(text: &str) -> Result<crate::contract::SpanMs, String> {
    let unit_at = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit: write it as 30s, 90m, 12h or 7d"))?;
    let (number, unit) = text.split_at(unit_at);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number"))?;
    let ms = match unit {
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{text:?}: the unit is s, m, h or d")),
    };
    Ok(crate::contract::SpanMs(n.saturating_mul(ms)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{iso, parse_iso};

    proptest! {
        /// Reading back what `iso` wrote gives the same instant, to the millisecond.
        #[test]
        fn parse_inverts_iso(ms in 0u64..253_402_300_799_999) {
            prop_assert_eq!(parse_iso(&iso(ms)), Ok(ms));
        }
    }

    #[test]
    fn whole_seconds_and_bad_text() {
        assert_eq!(parse_iso("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_iso("2026-12-02T15:04:05Z"), Ok(1_796_223_845_000));
        for bad in [
            "2026-12-02 15:04:05Z",
            "2026-12-02T15:04:05",
            "2026-02-30T00:00:00Z",
            "2026-12-02T24:00:00Z",
            "2026-12-02T15:04:05.5Z",
            "yesterday",
            "2026-12-02T15:04:05+01:00",
        ] {
            assert!(parse_iso(bad).is_err(), "{bad}");
        }
    }
}
