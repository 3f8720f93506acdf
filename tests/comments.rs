//! Code comments say why, for a reader of the repository, who has no issue tracker: no
//! comment cites an issue by its number. (This file's own examples are the exception.)

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() && !path.ends_with("target") {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Does `comment` name an issue by number?
fn cites_an_issue(comment: &str) -> bool {
    let lower = comment.to_ascii_lowercase();
    lower.match_indices("issue").any(|(at, _)| {
        let rest = lower[at + "issue".len()..].trim_start_matches('s');
        rest.starts_with(' ') && rest[1..].starts_with(|c: char| c.is_ascii_digit())
    })
}

#[test]
fn no_comment_cites_an_issue_number() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src",
        "tests",
        "benches",
        "examples",
        "plugins/src",
        "fuzz/fuzz_targets",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 100,
        "the tree was read: {} files",
        files.len()
    );
    let mut found = Vec::new();
    let this = Path::new(file!()).file_name();
    for file in files.iter().filter(|f| f.file_name() != this) {
        let text = std::fs::read_to_string(file).unwrap();
        for (i, line) in text.lines().enumerate() {
            if let Some(at) = line.find("//") {
                if cites_an_issue(&line[at..]) {
                    let shown = file.strip_prefix(root).unwrap_or(file).display();
                    found.push(format!("{shown}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "comments that cite issues:\n{}",
        found.join("\n")
    );
}

#[test]
fn what_counts_as_citing_an_issue() {
    assert!(cites_an_issue("// tether's engine (issue 24)"));
    assert!(cites_an_issue("//! Fleet state (Issue 16): ..."));
    assert!(cites_an_issue("// see issues 16 and 26"));
    assert!(!cites_an_issue("// the issue of a certificate"));
    assert!(!cites_an_issue("// an issue: none"));
}
