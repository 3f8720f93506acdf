//! `route_table`: a static map from a key (user id, tenant...) to a cluster or server, read
//! from a CSV or YAML file named in the config and reloaded with the config.
//!
//! CSV: one `key,target` per line (`#` comments, blank lines and a `key,target` header are
//! skipped); YAML: a mapping `key: target`. Targets are `cluster` or `cluster/server` and
//! must exist in the config. The table is built once and read without a lock.

use crate::key::KeySource;
use crate::metrics::{LookupMetrics, Outcome};
use crate::registry::{PluginConfigError, PluginSpec};
use crate::target::{KnownTargets, Target};
use crate::{Plugin, Route};
use async_trait::async_trait;
use pingora_http::RequestHeader;
use serde::Deserialize;
use serde_yaml::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// At most this many problems of one file are reported.
const MAX_REPORTED: usize = 20;

pub type Table = HashMap<Box<str>, Target>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[allow(dead_code)]
    name: String,
    key: KeySource,
    file: PathBuf,
}

/// A validated `route_table`: the key source and the loaded table.
#[derive(Debug, Clone)]
pub struct Spec {
    pub key: KeySource,
    pub file: PathBuf,
    pub table: Arc<Table>,
}

/// Two specs are equal only if they share the very same loaded table: every reload reads
/// the file again.
impl PartialEq for Spec {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.file == other.file && Arc::ptr_eq(&self.table, &other.table)
    }
}

pub fn parse(entry: &Value, targets: &KnownTargets) -> Result<PluginSpec, Vec<PluginConfigError>> {
    let raw: Raw = serde_yaml::from_value(entry.clone())
        .map_err(|e| vec![PluginConfigError::new("", e.to_string())])?;
    let table = load(&raw.file, targets).map_err(|errs| {
        errs.into_iter()
            .map(|m| PluginConfigError::new("file", m))
            .collect::<Vec<_>>()
    })?;
    Ok(PluginSpec::RouteTable(Spec {
        key: raw.key,
        file: raw.file,
        table: Arc::new(table),
    }))
}

/// Reads a table file; every problem (up to 20) is reported with its line.
pub fn load(path: &Path, targets: &KnownTargets) -> Result<Table, Vec<String>> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| vec![format!("cannot read {shown}: {e}")])?;
    let yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    );
    let mut errors = Vec::new();
    let mut table = Table::new();
    let mut add = |line: usize, key: &str, target: &str, errors: &mut Vec<String>| match targets
        .resolve(target)
    {
        _ if key.is_empty() => errors.push(format!("{shown}:{line}: empty key")),
        Some(t) => {
            table.insert(key.into(), t);
        }
        None => errors.push(format!(
            "{shown}:{line}: `{target}` is not a configured cluster or cluster/server"
        )),
    };
    if yaml {
        let map: HashMap<String, String> = serde_yaml::from_str(&text)
            .map_err(|e| vec![format!("{shown}: not a mapping of key: target: {e}")])?;
        for (key, target) in &map {
            add(0, key, target, &mut errors);
        }
    } else {
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || (i == 0 && line == "key,target") {
                continue;
            }
            match line.split_once(',') {
                Some((key, target)) => add(line_no, key.trim(), target, &mut errors),
                None => errors.push(format!("{shown}:{line_no}: expected `key,target`")),
            }
        }
    }
    if errors.is_empty() {
        Ok(table)
    } else {
        let more = errors.len().saturating_sub(MAX_REPORTED);
        errors.truncate(MAX_REPORTED);
        if more > 0 {
            errors.push(format!("{shown}: and {more} more problems"));
        }
        Err(errors)
    }
}

pub struct RouteTable {
    spec: Spec,
    metrics: LookupMetrics,
}

impl RouteTable {
    pub fn new(spec: Spec) -> Self {
        RouteTable {
            spec,
            metrics: LookupMetrics::new("route_table"),
        }
    }
}

#[async_trait]
impl Plugin for RouteTable {
    fn name(&self) -> &'static str {
        "route_table"
    }

    async fn route(&self, req: &RequestHeader) -> Route {
        let Some(key) = self.spec.key.extract(req) else {
            return Route::Continue;
        };
        match self.spec.table.get(key) {
            Some(t) => {
                self.metrics.count(Outcome::Hit);
                Route::To(*t)
            }
            None => {
                self.metrics.count(Outcome::Miss);
                Route::Continue
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets() -> KnownTargets {
        KnownTargets::new([("shop", vec!["a", "b"]), ("was", vec!["w1"])])
    }

    fn write(name: &str, text: &str) -> PathBuf {
        let p =
            std::env::temp_dir().join(format!("tether-route-table-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn csv_and_yaml_load_and_unknown_targets_are_errors() {
        let csv = write(
            "ok.csv",
            "key,target\n# users\n001,shop/a\n002,shop/b\n\n003, was\n",
        );
        let t = load(&csv, &targets()).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(
            t["003"],
            Target {
                cluster: 1,
                server: None
            }
        );
        let yaml = write("ok.yaml", "\"001\": shop/a\n\"002\": was/w1\n");
        assert_eq!(
            load(&yaml, &targets()).unwrap()["002"],
            Target {
                cluster: 1,
                server: Some(0)
            }
        );
        let bad = write("bad.csv", "001,shop/a\n002,evil.example:80\n003\n,shop\n");
        let errs = load(&bad, &targets()).unwrap_err();
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(
            errs[0].contains(":2: `evil.example:80` is not a configured"),
            "{errs:?}"
        );
        assert!(errs[1].contains(":3: expected"), "{errs:?}");
        assert!(errs[2].contains(":4: empty key"), "{errs:?}");
        assert!(
            load(Path::new("/nonexistent.csv"), &targets()).unwrap_err()[0].contains("cannot read")
        );
        for p in [csv, yaml, bad] {
            let _ = std::fs::remove_file(p);
        }
    }
}
