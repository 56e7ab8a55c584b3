//! Suggestions for a name that names nothing: the known names nearest to it by edit
//! distance, for "did you mean …?" in the engine's errors and in consumers' own
//! command lines.

/// At most three of `known` nearest to `wanted` by edit distance (Levenshtein, by
/// characters), nearest first, among those within half of `wanted`'s length (at least
/// 3 edits). Empty when nothing is near.
///
/// ```
/// let near = infra_core::names::nearest("w11", ["w1", "w2", "db-primary"]);
/// assert_eq!(near, ["w1", "w2"]);
/// ```
pub fn nearest<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut scored: Vec<(usize, &str)> = known
        .into_iter()
        .map(|name| (distance(wanted, name), name))
        .collect();
    scored.sort_unstable();
    scored.dedup_by(|a, b| a.1 == b.1);
    let limit = (wanted.chars().count() / 2).max(3);
    scored
        .into_iter()
        .filter(|(d, _)| *d <= limit)
        .take(3)
        .map(|(_, name)| name.to_owned())
        .collect()
}

/// The Levenshtein distance between two strings, by characters.
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(row[j + 1])
            };
            previous = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A distance is zero exactly between equal strings, symmetric, and never more
        /// than the longer string's length.
        #[test]
        fn distance_is_a_metric_on_these_laws(a in "[a-c]{0,8}", b in "[a-c]{0,8}") {
            let d = distance(&a, &b);
            prop_assert_eq!(d == 0, a == b);
            prop_assert_eq!(d, distance(&b, &a));
            prop_assert!(d <= a.chars().count().max(b.chars().count()));
        }

        /// A name that is known is its own nearest.
        #[test]
        fn a_known_name_comes_first(names in proptest::collection::vec("[a-e]{1,6}", 1..6), pick in 0usize..6) {
            let wanted = names[pick % names.len()].clone();
            let near = nearest(&wanted, names.iter().map(String::as_str));
            prop_assert_eq!(near.first(), Some(&wanted));
        }
    }

    #[test]
    fn nothing_near_suggests_nothing() {
        assert!(nearest("database-primary", ["w1", "w2"]).is_empty());
    }
}
