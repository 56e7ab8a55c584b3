//! `docs/guarantees.md` names its proofs; this test checks that they exist.
//!
//! - Every row of the Structural table names, in its "proof" column, a module path of
//!   this crate (`key::Key`, `kinds::Capacity`, `plan`, `fleet::FleetBuilder::declare`).
//!   The path must lead to a source file under `infra-core/src/`, and the doc comments
//!   it names (the item's, or a module's whole file when the path names no item) must
//!   hold at least one `compile_fail` doctest and at least one doctest that compiles:
//!   the failure is paired with a success, so it is the one claimed and not a typo.
//! - Anywhere else in the file, "proven by `X`" or "tested by `X`" must name something
//!   that exists: a file of the workspace, or a test function found by its name.
//!
//! A missing proof fails with the row's text, the path it names and what is missing.

use std::fs;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("infra-core sits in the workspace")
        .to_owned()
}

fn guarantees() -> String {
    let path = workspace().join("docs/guarantees.md");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One row of the Structural table: the mistake, and the first code span of its proof.
#[derive(Debug, PartialEq)]
struct Row {
    mistake: String,
    proof: String,
}

/// The rows of the table under `## Structural`, header and rule left out.
fn structural_rows(doc: &str) -> Vec<Row> {
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Structural"))
        .expect("docs/guarantees.md has a `## Structural` section");
    let mut rows = Vec::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 4 || cells[0] == "mistake" || cells[0].starts_with("---") {
            continue;
        }
        let mistake = cells[0].to_owned();
        let proof = first_code_span(cells[cells.len() - 1])
            .unwrap_or_else(|| panic!("Structural row {mistake:?}: its proof names no `path`"));
        rows.push(Row {
            mistake,
            proof: proof.to_owned(),
        });
    }
    rows
}

fn first_code_span(text: &str) -> Option<&str> {
    let start = text.find('`')? + 1;
    let len = text[start..].find('`')?;
    Some(&text[start..start + len])
}

/// What a path of the proof column leads to: a source file, and the items inside it
/// (none for a module).
#[derive(Debug)]
struct Target {
    file: PathBuf,
    items: Vec<String>,
}

/// Follows `a::b::C::f` through the module files under `src`: the longest prefix that
/// is a module gives the file; what follows names an item in it (or, for an item
/// re-exported from a private submodule, in a file of the module's directory).
fn resolve(src: &Path, proof: &str) -> Result<Target, String> {
    let segments: Vec<&str> = proof.split("::").collect();
    let mut dir = src.to_owned();
    let mut file = None;
    let mut used = 0;
    for segment in &segments {
        let flat = dir.join(format!("{segment}.rs"));
        let nested = dir.join(segment).join("mod.rs");
        let found = if flat.is_file() {
            flat
        } else if nested.is_file() {
            nested
        } else {
            break;
        };
        file = Some(found);
        dir = dir.join(segment);
        used += 1;
    }
    let file = file.ok_or_else(|| {
        format!(
            "`{}` is no module: neither {0}.rs nor {0}/mod.rs is under {}",
            segments[0],
            src.display()
        )
    })?;
    let items: Vec<String> = segments[used..].iter().map(|s| (*s).to_owned()).collect();
    if items.is_empty() {
        return Ok(Target { file, items });
    }
    // The item is in the module's file, or in one of its submodules' files.
    let mut candidates = vec![file.clone()];
    if let Ok(entries) = fs::read_dir(&dir) {
        let mut more: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        more.sort();
        candidates.extend(more);
    }
    candidates
        .into_iter()
        .find(|f| {
            fs::read_to_string(f)
                .is_ok_and(|text| definition_line(&text, &items[0], None).is_some())
        })
        .map(|file| Target {
            file,
            items: items.clone(),
        })
        .ok_or_else(|| {
            format!(
                "no definition of `{}` in {} or beside it",
                items[0],
                file.display()
            )
        })
}

/// The line that defines `name` (a type, trait, function or macro), searching from
/// `after` when given.
fn definition_line(text: &str, name: &str, after: Option<usize>) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let from = after.map_or(0, |a| a + 1);
    (from..lines.len()).find(|&i| {
        let words: Vec<&str> = lines[i]
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
            .filter(|w| !w.is_empty())
            .collect();
        words.windows(2).any(|w| {
            matches!(
                w[0],
                "struct" | "enum" | "trait" | "type" | "fn" | "union" | "macro_rules!"
            ) && w[1] == name
        }) && !lines[i].trim_start().starts_with("//")
    })
}

/// The doc comment (`///` lines) right above line `at`, attributes skipped.
fn doc_comment_above(text: &str, at: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut doc = Vec::new();
    let mut i = at;
    let mut in_attribute = false;
    while i > 0 {
        i -= 1;
        let line = lines[i].trim_start();
        if let Some(rest) = line.strip_prefix("///") {
            doc.push(rest.strip_prefix(' ').unwrap_or(rest).to_owned());
        } else if line.starts_with("#[") {
            in_attribute = false;
        } else if in_attribute || line.ends_with(")]") {
            in_attribute = true;
        } else {
            break;
        }
    }
    doc.reverse();
    doc
}

/// Every doc-comment line of a file, `//!` and `///`.
fn all_doc_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            l.strip_prefix("//!").or_else(|| l.strip_prefix("///"))
        })
        .map(|rest| rest.strip_prefix(' ').unwrap_or(rest).to_owned())
        .collect()
}

/// How many doctests of each sort the doc lines hold: (compile_fail, compiling).
fn count_doctests(doc: &[String]) -> (usize, usize) {
    let (mut fails, mut compiles) = (0, 0);
    let mut open = false;
    for line in doc {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        if open {
            open = false;
            continue;
        }
        open = true;
        let attrs: Vec<&str> = info
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|a| !a.is_empty())
            .collect();
        let rust = attrs.iter().all(|a| {
            matches!(*a, "rust" | "compile_fail" | "no_run" | "should_panic")
                || a.starts_with("edition")
                || (a.starts_with('E') && a[1..].chars().all(|c| c.is_ascii_digit()))
        });
        if !rust || attrs.contains(&"ignore") {
            continue;
        }
        if attrs.contains(&"compile_fail") {
            fails += 1;
        } else {
            compiles += 1;
        }
    }
    (fails, compiles)
}

/// What is wrong with one row's proof, if anything.
fn check_row(src: &Path, row: &Row) -> Option<String> {
    let target = match resolve(src, &row.proof) {
        Ok(t) => t,
        Err(why) => return Some(why),
    };
    let text = fs::read_to_string(&target.file).expect("resolved to a file");
    let shown = target
        .file
        .strip_prefix(workspace())
        .unwrap_or(&target.file)
        .display()
        .to_string();
    let (doc, place) = if target.items.is_empty() {
        (all_doc_lines(&text), format!("the doc comments of {shown}"))
    } else {
        let mut at = None;
        for item in &target.items {
            match definition_line(&text, item, at) {
                Some(line) => at = Some(line),
                None => return Some(format!("no definition of `{item}` in {shown}")),
            }
        }
        let at = at.expect("at least one item");
        (
            doc_comment_above(&text, at),
            format!(
                "the doc comment of `{}` ({shown}:{})",
                target.items.join("::"),
                at + 1
            ),
        )
    };
    match count_doctests(&doc) {
        (0, 0) => Some(format!("{place} holds no doctest at all")),
        (0, _) => Some(format!("{place} holds no `compile_fail` doctest")),
        (_, 0) => Some(format!(
            "{place} holds a `compile_fail` doctest but none that compiles beside it"
        )),
        _ => None,
    }
}

#[test]
fn every_structural_row_names_a_compile_fail_doctest_paired_with_one_that_compiles() {
    let src = workspace().join("infra-core/src");
    let rows = structural_rows(&guarantees());
    assert!(
        rows.len() >= 20,
        "found only {} Structural rows in docs/guarantees.md: the table's shape changed",
        rows.len()
    );
    let missing: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            check_row(&src, row).map(|why| {
                format!(
                    "Structural row {:?} (proof `{}`): {why}",
                    row.mistake, row.proof
                )
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/guarantees.md promises proofs that are missing:\n  {}",
        missing.join("\n  ")
    );
}

/// Each "proven by `X`" and "tested by `X`" of a text, with the line it is on.
fn named_proofs(doc: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in doc.lines() {
        for phrase in ["proven by `", "tested by `"] {
            let mut rest = line;
            while let Some(at) = rest.find(phrase) {
                rest = &rest[at + phrase.len()..];
                if let Some(end) = rest.find('`') {
                    found.push((rest[..end].to_owned(), line.to_owned()));
                    rest = &rest[end..];
                }
            }
        }
    }
    found
}

/// Every `.rs` file of the workspace's crates (the build directory left out).
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Whether `name` is a test function somewhere in the workspace: `fn name(` with a
/// test attribute (`#[test]`, `#[tokio::test]`, …) among the lines just above it.
fn test_function_exists(files: &[PathBuf], name: &str) -> bool {
    let signature = format!("fn {name}(");
    files.iter().any(|f| {
        let Ok(text) = fs::read_to_string(f) else {
            return false;
        };
        let lines: Vec<&str> = text.lines().collect();
        lines.iter().enumerate().any(|(i, l)| {
            l.contains(&signature)
                && lines[i.saturating_sub(3)..i]
                    .iter()
                    .any(|a| a.trim_start().starts_with("#[") && a.contains("test"))
        })
    })
}

#[test]
fn every_test_the_guarantees_name_exists() {
    let root = workspace();
    let doc = guarantees();
    let named = named_proofs(&doc);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let missing: Vec<String> = named
        .iter()
        .filter(|(x, _)| {
            if x.contains('/') || x.ends_with(".rs") {
                !root.join(x).exists()
            } else {
                let name = x.rsplit("::").next().unwrap_or(x);
                !test_function_exists(&files, name)
            }
        })
        .map(|(x, line)| format!("`{x}`, named in: {line}"))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/guarantees.md names proofs that do not exist (no such file, no such test \
         function):\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn the_checker_reads_what_the_guarantees_are_written_in() {
    let doc = "# T\n\n## Structural\n\n| mistake | P | what | proof |\n|---|---|---|---|\n\
               | A typo | P | x | `key::Key` (`Key::new`) |\n\n## Checked\n\n\
               | mistake | P | check |\n|---|---|---|\n| Other | P | tested by `a_test` |\n";
    assert_eq!(
        structural_rows(doc),
        vec![Row {
            mistake: "A typo".into(),
            proof: "key::Key".into()
        }]
    );
    assert_eq!(
        named_proofs(doc),
        vec![(
            "a_test".to_owned(),
            "| Other | P | tested by `a_test` |".to_owned()
        )]
    );
    let lines = |text: &str| -> Vec<String> { text.lines().map(str::to_owned).collect() };
    assert_eq!(
        count_doctests(&lines("```\na\n```\n```compile_fail\nb\n```")),
        (1, 1)
    );
    assert_eq!(
        count_doctests(&lines(
            "```text\na\n```\n```ignore\nb\n```\n```rust,no_run\nc\n```"
        )),
        (0, 1),
        "text and ignored blocks are no proof; a no_run block compiles"
    );
    let source = "/// Docs.\n///\n/// ```compile_fail\n/// x\n/// ```\n#[derive(Clone)]\n\
                  pub struct Thing;\n";
    let at = definition_line(source, "Thing", None).expect("defined");
    assert_eq!(count_doctests(&doc_comment_above(source, at)), (1, 0));
}
