//! Helpers of the importer tests: fixtures, running `tether import` and `tether -t`, and
//! reading the YAML they print.

use serde_yaml::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name)
}

pub fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tether-import-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn tether(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(args)
        .output()
        .expect("run tether")
}

/// Runs `tether import ARGS`, expecting success: the YAML text.
pub fn import(args: &[&str]) -> String {
    let mut all = vec!["import"];
    all.extend_from_slice(args);
    let out = tether(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tether import {args:?} failed:\n{stderr}"
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `tether -t -c` on the text as printed: must pass. Returns its stderr (warnings).
pub fn check(yaml: &str, tag: &str) -> String {
    let file = scratch(tag).join("tether.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = tether(&["-t", "-c", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "tether -t rejected the imported config:\n{stderr}\n---\n{yaml}"
    );
    stderr
}

pub fn parse(yaml: &str) -> Value {
    serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("not YAML: {e}\n{yaml}"))
}

pub fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no `{name}` in {list:?}"))
}

/// (host, path, cluster, exclude, disabled) of a listener's routes.
pub fn routes(listener: &Value) -> Vec<(String, String, String, bool, bool)> {
    listener["routes"]
        .as_sequence()
        .map(|s| s.as_slice())
        .unwrap_or(&[])
        .iter()
        .map(|r| {
            (
                r["host"].as_str().unwrap_or("").to_string(),
                r["path"].as_str().unwrap().to_string(),
                r["cluster"].as_str().unwrap().to_string(),
                r["exclude"].as_bool().unwrap_or(false),
                r["disabled"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

pub fn route(host: &str, path: &str, cluster: &str) -> (String, String, String, bool, bool) {
    (host.into(), path.into(), cluster.into(), false, false)
}

pub fn comments(yaml: &str) -> String {
    yaml.lines()
        .filter_map(|l| l.split_once('#').map(|(_, c)| c))
        .collect::<Vec<_>>()
        .join("\n")
}
