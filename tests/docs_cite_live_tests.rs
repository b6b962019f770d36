//! `docs/fixes.md` maps every fix to the tests that guard it; this checks that each test it
//! cites exists, so a renamed, moved or deleted test cannot leave the table pointing at nothing.
//!
//! A citation is a backticked path: `file::test` is test `test` of `tests/file.rs`;
//! `core::…::tests::name` (or `controller::`, `api::`) is unit test `name` of that module of
//! `src/`; `…::name` is a test of the module the previous citation of its row names.

use std::fs;
use std::path::{Path, PathBuf};

/// One cited test, resolved to the files that may define it.
#[derive(Debug)]
struct Citation {
    text: String,
    test: String,
    candidates: Vec<PathBuf>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `text` is a path of identifiers joined by `::` (possibly starting with `…`).
fn is_path(text: &str) -> bool {
    text.contains("::")
        && text.split("::").all(|segment| {
            segment == "…"
                || (!segment.is_empty()
                    && segment
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        })
}

/// The backticked spans of `line`.
fn backticked(line: &str) -> impl Iterator<Item = &str> {
    line.split('`').skip(1).step_by(2)
}

/// The files that may hold the tests of module `segments` of `src/`: the module's own file
/// (an inline `mod tests`) or its `tests.rs`.
fn unit_test_files(segments: &[&str]) -> Vec<PathBuf> {
    let module = segments.join("/");
    vec![
        root().join("src").join(format!("{module}.rs")),
        root().join("src").join(&module).join("mod.rs"),
        root().join("src").join(&module).join("tests.rs"),
    ]
}

/// Every test `docs/fixes.md` cites. Panics on a citation it cannot read.
fn citations(markdown: &str) -> Vec<Citation> {
    let mut found = Vec::new();
    for line in markdown.lines() {
        // The module the last full unit-test citation of this row named, for `…::name`.
        let mut module: Option<Vec<&str>> = None;
        for text in backticked(line).filter(|t| is_path(t)) {
            let segments: Vec<&str> = text.split("::").collect();
            let (test, path) = segments.split_last().expect("a path has segments");
            if *test == "…" || text == "file::test" {
                continue; // `core::…`: prose naming a kind of citation, not a test
            }
            let candidates = if path == ["…"] {
                let module = module
                    .as_ref()
                    .unwrap_or_else(|| panic!("{text}: no earlier citation in its row"));
                unit_test_files(module)
            } else if let [file] = path {
                vec![root().join("tests").join(format!("{file}.rs"))]
            } else {
                let (tests, module_path) = path.split_last().expect("two segments or more");
                assert_eq!(
                    *tests, "tests",
                    "{text}: a unit test is cited by its module's `tests::`"
                );
                module = Some(module_path.to_vec());
                unit_test_files(module_path)
            };
            found.push(Citation {
                text: text.to_owned(),
                test: (*test).to_owned(),
                candidates,
            });
        }
    }
    found
}

/// Whether `source` defines test function `name`: `fn name(` under a `#[test]` or
/// `#[tokio::test]` attribute (doc comments and other attributes may sit between).
fn defines_test(source: &str, name: &str) -> bool {
    let lines: Vec<&str> = source.lines().collect();
    lines.iter().enumerate().any(|(index, line)| {
        let line = line.trim_start();
        let signature = line.strip_prefix("async ").unwrap_or(line);
        signature.starts_with(&format!("fn {name}("))
            && lines[..index]
                .iter()
                .rev()
                .map(|l| l.trim())
                .take_while(|l| l.starts_with("#[") || l.starts_with("//"))
                .any(|l| l == "#[test]" || l.starts_with("#[tokio::test"))
    })
}

#[test]
fn every_test_docs_fixes_cites_exists() {
    let path = root().join("docs/fixes.md");
    let markdown =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let citations = citations(&markdown);
    // The table cites integration tests, unit tests and `…::` abbreviations; a parser that
    // found none of one kind would check nothing.
    assert!(citations.iter().any(|c| c.text.starts_with("core::")));
    assert!(citations.iter().any(|c| c.text.starts_with("…::")));
    assert!(citations.iter().any(|c| c.text.starts_with("claims::")));

    let dead: Vec<&str> = citations
        .iter()
        .filter(|citation| {
            !citation.candidates.iter().any(|file| {
                fs::read_to_string(file).is_ok_and(|source| defines_test(&source, &citation.test))
            })
        })
        .map(|citation| citation.text.as_str())
        .collect();
    assert!(
        dead.is_empty(),
        "docs/fixes.md cites tests that do not exist: {dead:#?}"
    );
}

#[test]
fn a_test_is_found_only_under_a_test_attribute() {
    let source = "#[test]\nfn cited() {}\n\n/// Doc.\n#[tokio::test]\nasync fn awaited() {}\n\nfn helper() {}\n";
    assert!(defines_test(source, "cited"));
    assert!(defines_test(source, "awaited"));
    assert!(!defines_test(source, "helper"));
    assert!(!defines_test(source, "missing"));
}

#[test]
fn abbreviations_take_the_module_of_the_previous_citation_of_their_row() {
    let row = "| B | `core::json::patch::tests::one`, `…::two`; `claims::three`, `file::test` |";
    let found = citations(row);
    let tests: Vec<&str> = found.iter().map(|c| c.test.as_str()).collect();
    assert_eq!(tests, ["one", "two", "three"]);
    assert_eq!(found[0].candidates, found[1].candidates);
    assert_eq!(
        found[2].candidates,
        [root().join("tests").join("claims.rs")]
    );
}
