//! Store times for people: milliseconds since the Unix epoch written as
//! `YYYY-MM-DDTHH:MM:SS.mmmZ`, and read back from that form (UTC, the fraction
//! optional) where an operator gives a time on the command line.

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso(ms: u64) -> String {
    let days = i64::try_from(ms / 86_400_000).unwrap_or(0);
    let rem = ms % 86_400_000;
    let (y, m, d) = crate::civil::date_of_day(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// `YYYY-MM-DDTHH:MM:SS[.mmm]Z` as milliseconds since the Unix epoch; `Err` says
/// what is wrong with the text.
pub fn parse_iso(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a UTC time like 2026-12-02T15:04:05Z");
    let rest = text.strip_suffix('Z').ok_or_else(bad)?;
    let (date, time) = rest.split_once('T').ok_or_else(bad)?;
    let (clock, millis) = match time.split_once('.') {
        Some((clock, fraction)) if fraction.len() == 3 => {
            (clock, number(fraction).ok_or_else(bad)?)
        }
        Some(_) => return Err(bad()),
        None => (time, 0),
    };
    let fields = |s: &str, sep: char| -> Result<Vec<i64>, String> {
        s.split(sep)
            .map(|p| number(p).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()
    };
    let (date, clock) = (fields(date, '-')?, fields(clock, ':')?);
    let [y, m, d] = <[i64; 3]>::try_from(date).map_err(|_| bad())?;
    let [hh, mm, ss] = <[i64; 3]>::try_from(clock).map_err(|_| bad())?;
    if !(1970..=9999).contains(&y)
        || !(1..=12).contains(&m)
        || !(1..=days_in_month(y, m)).contains(&d)
        || hh > 23
        || mm > 59
        || ss > 59
    {
        return Err(bad());
    }
    let days = days_from_civil(y, m, d);
    let ms = ((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + millis;
    u64::try_from(ms).map_err(|_| bad())
}

/// A run of ASCII digits as a number.
fn number(digits: &str) -> Option<i64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn days_in_month(y: i64, m: i64) -> i64 {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of [`iso`]'s).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
