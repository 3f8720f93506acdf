//! The manual holds together: every chapter `docs/SUMMARY.md` lists exists and
//! every chapter in `docs/` is listed, so `mdbook build docs` would render all of it; and
//! every relative link in the README and the chapters leads to a file that exists and,
//! when it names a heading (`file.md#anchor`), to a heading of that file.

mod common;

use common::markdown::{anchors, links};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Broken relative links of the Markdown file `file`, each said as `file: target (why)`.
fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let dir = file.parent().unwrap();
    let mut out = Vec::new();
    for target in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let dest = if path.is_empty() {
            file.to_path_buf()
        } else {
            dir.join(path)
        };
        let say = |why: &str| format!("{}: {target} ({why})", file.display());
        if !dest.exists() {
            out.push(say("no such file"));
            continue;
        }
        if let (Some(anchor), Some("md")) = (anchor, dest.extension().and_then(|e| e.to_str())) {
            let text = std::fs::read_to_string(&dest).unwrap();
            if !anchors(&text).contains(anchor) {
                out.push(say("no such heading"));
            }
        }
    }
    out
}

#[test]
fn every_chapter_is_in_the_summary_and_every_listed_chapter_exists() {
    let docs = root().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    assert!(listed.len() >= 10, "a summary of the chapters: {listed:?}");
    for l in &listed {
        assert!(
            docs.join(l).is_file(),
            "SUMMARY.md lists {l}, which is missing"
        );
    }
    for entry in std::fs::read_dir(&docs).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") && name != "SUMMARY.md" {
            assert!(listed.contains(&name), "docs/{name} is not in SUMMARY.md");
        }
    }
}

#[test]
fn every_relative_link_leads_somewhere() {
    let mut files = vec![root().join("README.md"), root().join("bench/README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let relative = files
        .iter()
        .flat_map(|f| links(&std::fs::read_to_string(f).unwrap()))
        .filter(|l| !l.contains("://"))
        .count();
    assert!(relative >= 100, "the manual's links: {relative}");
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_reader_finds_links_and_anchors_as_mdbook_makes_them() {
    let text =
        "See [TLS](tls.md#client-certificates-mtls) and `[not](a.md)`.\n```\n[no](b.md)\n```\n";
    assert_eq!(links(text), vec!["tls.md#client-certificates-mtls"]);
    let a = anchors("## Client certificates (mTLS)\n### `listeners[].limits`\n");
    assert!(a.contains("client-certificates-mtls"), "{a:?}");
    assert!(a.contains("listenerslimits"), "{a:?}");
}

/// `docs/layout.md` names every module of the crate: each layer (a `pub mod` of
/// `src/lib.rs`, as `src/LAYER.rs` or `src/LAYER/`) and each public module of a layer (as
/// `src/LAYER/NAME.rs` or `src/LAYER/NAME/`), so an engineer finds where each part lives.
#[test]
fn the_layout_names_every_module() {
    let src = root().join("src");
    let layout = std::fs::read_to_string(root().join("docs/layout.md")).unwrap();
    let modules_of = |file: &std::path::Path| -> Vec<String> {
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
            .map(str::to_string)
            .collect()
    };
    let layers = modules_of(&src.join("lib.rs"));
    assert!(layers.len() > 5, "src/lib.rs was read: {layers:?}");
    let mut paths = Vec::new();
    for layer in &layers {
        paths.push(layer.clone());
        for m in modules_of(&src.join(format!("{layer}.rs"))) {
            paths.push(format!("{layer}/{m}"));
        }
    }
    assert!(paths.len() > 40, "the layers' modules were read: {paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|m| {
            !layout.contains(&format!("src/{m}.rs")) && !layout.contains(&format!("src/{m}/"))
        })
        .collect();
    assert!(missing.is_empty(), "not in docs/layout.md: {missing:?}");
}
