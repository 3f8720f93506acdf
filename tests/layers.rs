//! Layers that only look down. The crate's top-level modules are layers, declared in
//! `lib.rs` from the top down; a module may use only those below its own, and no two
//! modules of a crate import each other, directly or round a ring. Each file's imports
//! (`crate::`, `super::`, `self::` paths and the child modules it declares) are lifted to
//! the two sibling modules under the files' lowest common module; a module importing its
//! own parent or child is one idea and does not count. Comments and `#[cfg(test)] mod
//! tests { .. }` blocks are left out. A cycle, or a use of a layer above, fails the test
//! with the imports that make it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The module path of a source file (`routing/router.rs` → `["routing", "router"]`).
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// The file of the longest prefix of `parts` that is a module file.
fn resolve(root: &Path, parts: &[String]) -> Option<PathBuf> {
    (1..=parts.len()).rev().find_map(|n| {
        let base = parts[..n].iter().fold(root.to_path_buf(), |p, s| p.join(s));
        [base.with_extension("rs"), base.join("mod.rs")]
            .into_iter()
            .find(|f| f.is_file())
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The source without comments and without an inline `#[cfg(test)] mod tests` block (it
/// ends the file by convention here).
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `::`-separated identifiers right after byte `at` of `text` (`::a::{b` gives a, b).
fn path_after(text: &str, at: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = &text[at..];
    while let Some(r) = rest.strip_prefix("::") {
        let r = r.strip_prefix('{').unwrap_or(r);
        let len = r
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(r.len());
        if len == 0 {
            break;
        }
        parts.push(r[..len].to_string());
        rest = &r[len..];
    }
    parts
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every place `word` starts as a whole identifier not preceded by `::`.
fn starts_of<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    text.match_indices(word).filter_map(move |(i, _)| {
        let b = text.as_bytes();
        let before_ok = i == 0 || (!is_ident(b[i - 1]) && !text[..i].ends_with("::"));
        let after = i + word.len();
        let after_ok = text[after..].starts_with("::");
        (before_ok && after_ok).then_some(after)
    })
}

/// Which sibling module uses which, and for each such pair a file import that makes it.
type Edges = (
    BTreeMap<String, BTreeSet<String>>,
    BTreeMap<(String, String), String>,
);

fn edges(root: &Path) -> Edges {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut why: BTreeMap<(String, String), String> = BTreeMap::new();
    for file in &files {
        let here = module_of(root, file);
        let text = code(&std::fs::read_to_string(file).unwrap());
        let mut targets = Vec::new();
        for (word, base) in [
            ("crate", Vec::new()),
            ("self", here.clone()),
            ("super", here[..here.len().saturating_sub(1)].to_vec()),
        ] {
            for at in starts_of(&text, word) {
                let mut base = base.clone();
                let mut rest = path_after(&text, at);
                while rest.first().is_some_and(|p| p == "super") {
                    base.pop();
                    rest.remove(0);
                }
                base.extend(rest);
                targets.push(base);
            }
        }
        // Child modules declared here and used by name.
        for line in text.lines() {
            let l = line.trim_start();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            if let Some(name) = l.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                for at in starts_of(&text, name) {
                    let mut p = here.clone();
                    p.push(name.to_string());
                    p.extend(path_after(&text, at));
                    targets.push(p);
                }
            }
        }
        for t in targets {
            let Some(target) = resolve(root, &t) else {
                continue;
            };
            if &target == file {
                continue;
            }
            let there = module_of(root, &target);
            let common = here.iter().zip(&there).take_while(|(a, b)| a == b).count();
            if common == here.len() || common == there.len() {
                continue;
            }
            let (a, b) = (here[..=common].join("/"), there[..=common].join("/"));
            why.entry((a.clone(), b.clone())).or_insert_with(|| {
                format!(
                    "{} uses {}",
                    file.strip_prefix(root).unwrap().display(),
                    target.strip_prefix(root).unwrap().display()
                )
            });
            edges.entry(a).or_default().insert(b);
        }
    }
    (edges, why)
}

/// The cycles among sibling modules of the crate at `root`, each with the file imports
/// that make it.
fn cycles(root: &Path) -> Vec<String> {
    let (edges, why) = edges(root);
    // A module is in a cycle when it reaches itself; each cycle is said once.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for n in edges.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let mut said = BTreeSet::new();
    let mut out = Vec::new();
    for m in edges.keys() {
        if said.contains(m) || !reach(m).contains(m) {
            continue;
        }
        let ring: BTreeSet<String> = reach(m)
            .into_iter()
            .filter(|n| reach(n).contains(m))
            .collect();
        let mut lines = vec![format!(
            "{}:",
            ring.iter().cloned().collect::<Vec<_>>().join(" ↔ ")
        )];
        for a in &ring {
            for b in edges[a].iter().filter(|b| ring.contains(*b)) {
                lines.push(format!("  {a} → {b} ({})", why[&(a.clone(), b.clone())]));
            }
        }
        said.extend(ring);
        out.push(lines.join("\n"));
    }
    out
}

/// The crate's top-level modules in `lib.rs`'s order: its layers, from the top.
fn layers(root: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(root.join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// Each use of a layer above the user's, with the file import that makes it.
fn upward(root: &Path) -> Vec<String> {
    let order = layers(root);
    let rank = |m: &String| order.iter().position(|l| l == m);
    let (edges, why) = edges(root);
    let mut out = Vec::new();
    for (a, uses) in &edges {
        for b in uses {
            if let (Some(ra), Some(rb)) = (rank(a), rank(b)) {
                if rb < ra {
                    out.push(format!("{a} → {b} ({})", why[&(a.clone(), b.clone())]));
                }
            }
        }
    }
    out
}

#[test]
fn layers_use_only_those_below() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let order = layers(&root);
    assert!(order.len() >= 5, "lib.rs declares its layers: {order:?}");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    for file in files {
        let top = module_of(&root, &file);
        if let Some(first) = top.first() {
            assert!(
                order.contains(first),
                "{} is in no layer that lib.rs declares",
                file.display()
            );
        }
    }
    let found = upward(&root);
    assert!(
        found.is_empty(),
        "uses of a layer above (lib.rs lists the layers from the top):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_use_of_a_layer_above_is_found() {
    let dir = std::env::temp_dir().join(format!("tether-upward-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("low")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod high;\npub mod low;\n").unwrap();
    std::fs::write(dir.join("high.rs"), "use crate::low::Thing;\n").unwrap();
    std::fs::write(dir.join("low.rs"), "pub mod inner;\n").unwrap();
    std::fs::write(dir.join("low/inner.rs"), "pub struct Thing;\n").unwrap();
    assert!(upward(&dir).is_empty());
    std::fs::write(dir.join("low/inner.rs"), "use crate::high::X;\n").unwrap();
    let found = upward(&dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("low → high"), "{}", found[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_two_modules_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in ["src", "plugins/src"] {
        let found = cycles(&root.join(krate));
        assert!(
            found.is_empty(),
            "import cycles in {krate}:\n{}",
            found.join("\n")
        );
    }
}

#[test]
fn a_cycle_is_found() {
    let dir = std::env::temp_dir().join(format!("tether-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::helper;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "mod inner;\n").unwrap();
    // A child of b uses a: the edge counts for b.
    std::fs::write(
        dir.join("b/inner.rs"),
        "use crate::a::Thing;\n// use crate::c;\n",
    )
    .unwrap();
    let found = cycles(&dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("a ↔ b:"), "{}", found[0]);
    assert!(found[0].contains("b/inner.rs uses a.rs"), "{}", found[0]);
    // A module using its own parent is no cycle.
    std::fs::write(dir.join("a.rs"), "fn f() {}\n").unwrap();
    std::fs::write(dir.join("b/inner.rs"), "use super::helper;\n").unwrap();
    assert!(cycles(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
