//! Calendar dates of Unix day counts, for writing store times for people.

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
