//! A provider crate's README tables held against the simulated cloud's rows.
//!
//! A provider's README documents, per kind, whether the cloud reports each field and
//! how it changes after creation, in tables under headings ``### `kind`…`` whose rows
//! start with the field (``| `field` | … | reported | after creation |``). The simulated
//! cloud's [`super::clouds::ROWS`] say the same for its stand-in of that provider.
//! [`disagreements`] lists where the two differ, so that a fleet planned against the
//! simulator meets no surprise on the cloud, and a README never drifts from it.
//!
//! The cells are read as: *reported* `always` (reported), `never` (unreported),
//! `when …` (reported under a condition); *after creation* `in place`, `at creation…`
//! (a change is a replace or a refusal), `in place, except…`.

use std::collections::BTreeMap;

use super::clouds::{Change, ROWS, Read, behaviour};

/// Every disagreement between the tables of `readme` and the simulated cloud's rows for
/// `provider`, over `kinds`: a field the simulator knows and the README has no row for,
/// a row the simulator does not know, a cell that says otherwise, a row given twice, a
/// row too short to read. Empty when they agree.
pub fn disagreements(provider: &str, kinds: &[&str], readme: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut table = readme_rows(kinds, readme, &mut problems);
    for kind in kinds.iter().copied() {
        let fields: Vec<&str> = ROWS
            .iter()
            .filter(|r| r.providers.contains(&provider) && r.kinds.contains(&kind))
            .flat_map(|r| r.fields.iter().copied())
            .collect();
        if fields.is_empty() {
            problems.push(format!(
                "the simulated cloud has no {provider} row of `{kind}`"
            ));
        }
        for field in fields {
            let Some(row) = behaviour(provider, kind, field) else {
                continue;
            };
            let Some((reports, change)) = table.remove(&(kind.to_owned(), field.to_owned())) else {
                problems.push(format!("the README has no row for `{kind}`.`{field}`"));
                continue;
            };
            if !read_agrees(&row.read, &reports) {
                problems.push(format!(
                    "`{kind}`.`{field}`: the README says it is reported `{reports}`, the \
                     simulated cloud says {:?}",
                    row.read
                ));
            }
            if !change_agrees(&row.change, &change) {
                problems.push(format!(
                    "`{kind}`.`{field}`: the README says it changes `{change}`, the simulated \
                     cloud says {:?}",
                    row.change
                ));
            }
        }
    }
    for (kind, field) in table.keys() {
        problems.push(format!(
            "the README has a row for `{kind}`.`{field}`, which the simulated cloud does not know"
        ));
    }
    problems
}

/// (kind, field) → (reported, after creation), from the tables under the headings of
/// `kinds`.
fn readme_rows(
    kinds: &[&str],
    readme: &str,
    problems: &mut Vec<String>,
) -> BTreeMap<(String, String), (String, String)> {
    let mut table = BTreeMap::new();
    let mut kind: Option<&str> = None;
    for line in readme.lines() {
        if let Some(heading) = line.strip_prefix("### `") {
            kind = heading.split('`').next().filter(|k| kinds.contains(k));
            continue;
        }
        // Any other heading ends the kind's section: a table after it is not the kind's.
        if line.starts_with('#') {
            kind = None;
            continue;
        }
        let (Some(kind), Some(row)) = (kind, line.strip_prefix("| `")) else {
            continue;
        };
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 4 {
            problems.push(format!(
                "a README row of `{kind}` has too few cells: {line}"
            ));
            continue;
        }
        let field = row.split('`').next().unwrap_or_default();
        let cells = (
            cells[cells.len() - 2].to_owned(),
            cells[cells.len() - 1].to_owned(),
        );
        if table
            .insert((kind.to_owned(), field.to_owned()), cells)
            .is_some()
        {
            problems.push(format!("`{kind}`.`{field}` has two README rows"));
        }
    }
    table
}

fn read_agrees(read: &Read, reports: &str) -> bool {
    match read {
        Read::Reported => reports == "always",
        Read::Unreported => reports == "never",
        Read::ReportedWhen(_) => reports.starts_with("when "),
    }
}

fn change_agrees(change: &Change, says: &str) -> bool {
    match change {
        Change::InPlace => says == "in place",
        Change::AtCreation(_) => says.starts_with("at creation"),
        Change::InPlaceUnless(..) => says.starts_with("in place, except"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_readme_that_says_otherwise_is_caught_row_by_row() {
        let readme = "\
### `secrets`: a secret
| field | on the cloud | reported | after creation |
|---|---|---|---|
| `valueFrom` | a version | always | in place |
| `description` | description | always | in place |
| `description` | again | always | in place |
| `unknownField` | x | always | in place |
";
        let problems = disagreements("scaleway", &["secrets"], readme);
        let said = problems.join("\n");
        assert!(
            said.contains("`secrets`.`valueFrom`: the README says it is reported `always`"),
            "{said}"
        );
        assert!(said.contains("two README rows"), "{said}");
        assert!(said.contains("no row for `secrets`.`tags`"), "{said}");
        assert!(
            said.contains("`secrets`.`unknownField`, which the simulated cloud does not know"),
            "{said}"
        );
    }

    #[test]
    fn a_table_under_a_later_heading_is_not_the_kinds() {
        let readme = "\
### `secrets`: a secret
| field | on the cloud | reported | after creation |
|---|---|---|---|
| `unknownField` | x | always | in place |

## Another section
| kind | a | b | c |
|---|---|---|---|
| `secrets` | x | y | z |
";
        let problems = disagreements("scaleway", &["secrets"], readme).join("\n");
        assert!(problems.contains("`secrets`.`unknownField`"), "{problems}");
        assert!(!problems.contains("`secrets`.`secrets`"), "{problems}");
    }
}
