//! Calendar dates of Unix day counts: store times written for people as
//! `YYYY-MM-DDTHH:MM:SS.mmmZ`, and read back from that form (UTC, the fraction
//! optional) where an operator gives a time.

/// The proleptic Gregorian date `(year, month, day)` of `days` since 1970-01-01.
#[must_use]
pub(crate) fn date_of_day(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
#[cfg_attr(not(feature = "cli"), allow(dead_code, reason = "the command line's"))]
pub(crate) fn iso(ms: u64) -> String {
    let days = i64::try_from(ms / 86_400_000).unwrap_or(0);
    let rem = ms % 86_400_000;
    let (y, m, d) = date_of_day(days);
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
#[cfg_attr(
    not(feature = "serve"),
    allow(dead_code, reason = "the command line's and the service's")
)]
pub(crate) fn parse_iso(text: &str) -> Result<u64, String> {
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

#[cfg(test)]
mod tests {
    use super::date_of_day;

    #[test]
    fn known_days() {
        assert_eq!(date_of_day(0), (1970, 1, 1));
        assert_eq!(date_of_day(59), (1970, 3, 1));
        assert_eq!(date_of_day(11_016), (2000, 2, 29));
        assert_eq!(date_of_day(20_789), (2026, 12, 2));
        assert_eq!(date_of_day(-1), (1969, 12, 31));
    }
}
