//! Route precedence after `tether import mod_jk`, case for case as real Apache httpd with
//! mod_jk routes: each mount set of `tests/corpus/mount_precedence` is imported (from a
//! `uriworkermap.properties`, `JkMount`/`JkUnMount` lines and `worker.X.mount`), and
//! `tether explain` must send each request path to the worker mod_jk picked, or to none.
//! The corpus's expectations are mod_jk's own: where Apache and mod_jk are installed, the
//! corpus's script checks them against the real thing first.

mod common;

use common::import::{import, scratch, tether};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/mount_precedence")
}

/// One case file: its rules as `(keyword, rule)` and its `(path, worker or "none")`.
struct Case {
    name: String,
    rules: Vec<(String, String)>,
    asks: Vec<(String, String)>,
}

fn cases() -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "the corpus is there");
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let (rules, asks) = text.split_once("\n----\n").expect("a ---- line");
            let lines = |s: &str| {
                s.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(|l| {
                        let (a, b) = l.split_once(char::is_whitespace).unwrap();
                        (a.to_string(), b.trim().to_string())
                    })
                    .collect::<Vec<_>>()
            };
            Case {
                name: f.file_name().unwrap().to_string_lossy().into_owned(),
                rules: lines(rules),
                asks: lines(asks),
            }
        })
        .collect()
}

/// The case's rules as mod_jk's three sources, imported: the YAML file's path.
fn imported(case: &Case, dir: &Path) -> PathBuf {
    let (mut map, mut httpd) = (String::new(), String::new());
    let mut worker_mounts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut workers: Vec<String> = Vec::new();
    for (keyword, rule) in &case.rules {
        let (pattern, target) = rule.split_once('=').unwrap();
        let worker = target.split(';').next().unwrap();
        if worker != "*" && !workers.iter().any(|w| w == worker) {
            workers.push(worker.to_string());
        }
        match keyword.as_str() {
            "mount" => writeln!(map, "{rule}").unwrap(),
            "jkmount" => match pattern.strip_prefix('!') {
                Some(p) => writeln!(httpd, "JkUnMount {p} {target}").unwrap(),
                None => writeln!(httpd, "JkMount {pattern} {target}").unwrap(),
            },
            "wmount" => worker_mounts
                .entry(worker.to_string())
                .or_default()
                .push(pattern.to_string()),
            other => panic!("{}: unknown keyword {other}", case.name),
        }
    }
    let mut props = format!("worker.list={}\n", workers.join(","));
    for (i, w) in workers.iter().enumerate() {
        // Addresses only written down: nothing connects to them.
        writeln!(
            props,
            "worker.{w}.type=ajp13\nworker.{w}.host=127.0.0.1\nworker.{w}.port={}",
            20000 + i
        )
        .unwrap();
    }
    for (w, patterns) in &worker_mounts {
        writeln!(props, "worker.{w}.mount={}", patterns.join(" ")).unwrap();
    }
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (w, u, h) = (
        file("workers.properties", &props),
        file("uriworkermap.properties", &map),
        file("httpd.conf", &httpd),
    );
    let yaml = import(&["mod_jk", &w, &u, "--jkmount-from", &h]);
    let out = dir.join("tether.yaml");
    std::fs::write(&out, yaml).unwrap();
    out
}

/// The worker (one-server cluster) `tether explain` sends `path` to, or "none".
fn explained(config: &Path, path: &str) -> String {
    let out = tether(&[
        "-c",
        config.to_str().unwrap(),
        "explain",
        &format!("GET {path}"),
    ]);
    assert!(
        out.status.success(),
        "explain {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    match v["cluster"].as_str() {
        Some(c) => c.to_string(),
        None => "none".into(),
    }
}

#[test]
fn imported_mounts_route_as_mod_jk_does() {
    let dir = scratch("mount-precedence");
    let mut wrong = Vec::new();
    let mut checks = 0;
    for case in cases() {
        let sub = dir.join(&case.name);
        std::fs::create_dir_all(&sub).unwrap();
        let config = imported(&case, &sub);
        for (path, want) in &case.asks {
            checks += 1;
            let got = explained(&config, path);
            if &got != want {
                wrong.push(format!("{} {path}: mod_jk {want}, tether {got}", case.name));
            }
        }
    }
    assert!(checks >= 140, "{checks}");
    assert!(
        wrong.is_empty(),
        "{} of {checks}:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_corpus_is_what_real_mod_jk_does() {
    if !Path::new("/usr/sbin/apache2").exists()
        || !Path::new("/usr/lib/apache2/modules/mod_jk.so").exists()
    {
        eprintln!("skipped: apache2 with libapache2-mod-jk is not installed");
        return;
    }
    let out = std::process::Command::new(corpus().join("check_mod_jk.sh"))
        .env("MOD_JK_PORT", common::free_port().to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" 0 mismatches"), "{stdout}");
}
