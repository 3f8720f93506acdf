//! `route_table`: a static map from a key (user id, tenant...) to a cluster or server, read
//! from a CSV or YAML file named in the config and reloaded with the config.
//!
//! CSV: one `key,target` per line (`#` comments, blank lines and a `key,target` header are
//! skipped); YAML: a mapping `key: target`. Targets are `cluster` or `cluster/server` and
//! must exist in the config; a key may be given once. The table is built once and read
//! without a lock.

use crate::config_error::PluginConfigError;
use crate::key::KeySource;
use crate::metrics::{LookupMetrics, Outcome};
use crate::target::{KnownTargets, Target};
use crate::{Connection, Plugin, RequestState, Route};
use async_trait::async_trait;
use pingora_http::RequestHeader;
use serde::Deserialize;
use serde_yaml::Value;
use std::collections::hash_map::Entry;
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

pub fn parse(entry: &Value, targets: &KnownTargets) -> Result<Spec, Vec<PluginConfigError>> {
    let raw: Raw = serde_yaml::from_value(entry.clone())
        .map_err(|e| vec![PluginConfigError::new("", e.to_string())])?;
    let table = load(&raw.file, targets).map_err(|errs| {
        errs.into_iter()
            .map(|m| PluginConfigError::new("file", m))
            .collect::<Vec<_>>()
    })?;
    Ok(Spec {
        key: raw.key,
        file: raw.file,
        table: Arc::new(table),
    })
}

/// Reads a table file; every problem (up to 20) is reported with its line. A key given
/// twice is an error naming both lines: silently keeping one of them would route some
/// users by a line nobody meant.
pub fn load(path: &Path, targets: &KnownTargets) -> Result<Table, Vec<String>> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| vec![format!("cannot read {shown}: {e}")])?;
    // Editors on Windows may start a UTF-8 file with a byte-order mark; it is not part of
    // the first key (which would otherwise never match).
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    );
    // (line, message), sorted by line at the end.
    let mut errors: Vec<(usize, String)> = Vec::new();
    let mut table = Table::new();
    // Keys seen before, with their lines (rare: their first lines are looked up after).
    let mut repeated: Vec<(usize, String)> = Vec::new();
    let mut add =
        |line: usize, key: &str, target: &str, errors: &mut Vec<(usize, String)>| match targets
            .resolve(target)
        {
            _ if key.is_empty() => errors.push((line, format!("{shown}:{line}: empty key"))),
            Some(t) => match table.entry(key.into()) {
                Entry::Vacant(e) => {
                    e.insert(t);
                }
                Entry::Occupied(_) => repeated.push((line, key.to_string())),
            },
            None => errors.push((
                line,
                format!("{shown}:{line}: `{target}` is not a configured cluster or cluster/server"),
            )),
        };
    if yaml {
        // Duplicate YAML keys are refused while parsing (serde_yaml names the line).
        let Mapping(map) = serde_yaml::from_str(text)
            .map_err(|e| vec![format!("{shown}: not a mapping of key: target: {e}")])?;
        for (key, target) in &map {
            add(0, key, target, &mut errors);
        }
    } else {
        for (line_no, row) in csv_rows(text) {
            match row {
                Some((key, target)) => add(line_no, key, target, &mut errors),
                None => {
                    let message = format!("{shown}:{line_no}: expected `key,target`");
                    errors.push((line_no, message));
                }
            }
        }
        if !repeated.is_empty() {
            let mut first: HashMap<&str, usize> =
                repeated.iter().map(|(_, k)| (k.as_str(), 0)).collect();
            for (line_no, row) in csv_rows(text) {
                if let Some(f) = row.and_then(|(key, _)| first.get_mut(key)) {
                    if *f == 0 {
                        *f = line_no;
                    }
                }
            }
            for (line, key) in &repeated {
                let first = first[key.as_str()];
                let key: String = key.chars().take(100).collect();
                errors.push((
                    *line,
                    format!("{shown}:{line}: key `{key}` is also on line {first}"),
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(table)
    } else {
        errors.sort_by_key(|(line, _)| *line);
        let mut errors: Vec<String> = errors.into_iter().map(|(_, m)| m).collect();
        let more = errors.len().saturating_sub(MAX_REPORTED);
        errors.truncate(MAX_REPORTED);
        if more > 0 {
            errors.push(format!("{shown}: and {more} more problems"));
        }
        Err(errors)
    }
}

/// The rows of a CSV table with their line numbers: `Some((key, target))` (trimmed key), or
/// `None` for a line without a comma. Comments, blank lines and the header are skipped.
fn csv_rows(text: &str) -> impl Iterator<Item = (usize, Option<(&str, &str)>)> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || (i == 0 && line == "key,target") {
            return None;
        }
        let row = line
            .split_once(',')
            .map(|(key, target)| (key.trim(), target));
        Some((i + 1, row))
    })
}

/// A YAML mapping of key to target that refuses a key given twice (a plain map would keep
/// the last one silently).
struct Mapping(HashMap<String, String>);

impl<'de> Deserialize<'de> for Mapping {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MappingVisitor)
    }
}

struct MappingVisitor;

impl<'de> serde::de::Visitor<'de> for MappingVisitor {
    type Value = Mapping;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a mapping of key: target")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Mapping, A::Error> {
        let mut map = HashMap::new();
        while let Some(key) = m.next_key_seed(NewKey(&map))? {
            let target = m.next_value::<String>()?;
            map.insert(key, target);
        }
        Ok(Mapping(map))
    }
}

/// A key of [`Mapping`] not in it yet. The check runs while the key is read, so serde_yaml
/// adds the key's line to the error.
struct NewKey<'a>(&'a HashMap<String, String>);

impl<'de> serde::de::DeserializeSeed<'de> for NewKey<'_> {
    type Value = String;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for NewKey<'_> {
    type Value = String;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<String, E> {
        if self.0.contains_key(key) {
            return Err(E::custom(format!("key `{key}` is given twice")));
        }
        Ok(key.to_string())
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

    async fn route(
        &self,
        req: &RequestHeader,
        conn: &Connection,
        _state: &mut RequestState,
    ) -> Route {
        let Some(key) = self.spec.key.extract(req, conn) else {
            return Route::Continue;
        };
        match self.spec.table.get(&*key) {
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

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_key() {
        let csv = write("bom.csv", "\u{feff}001,shop/a\n002,was\n");
        let t = load(&csv, &targets()).unwrap();
        assert!(t.contains_key("001"), "{:?}", t.keys().collect::<Vec<_>>());
        // With a header too: the header is still recognised and skipped.
        let csv_header = write("bom-header.csv", "\u{feff}key,target\n001,shop/a\n");
        assert_eq!(load(&csv_header, &targets()).unwrap().len(), 1);
        let yaml = write("bom.yaml", "\u{feff}\"001\": shop/a\n");
        assert!(load(&yaml, &targets()).unwrap().contains_key("001"));
        for p in [csv, csv_header, yaml] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn a_key_given_twice_is_an_error_naming_both_lines() {
        let csv = write(
            "dup.csv",
            "key,target\n001,shop/a\n002,shop/b\n 001 ,was\n003,nowhere\n001,shop/a\n",
        );
        let errs = load(&csv, &targets()).unwrap_err();
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(
            errs[0].ends_with(":4: key `001` is also on line 2"),
            "{errs:?}"
        );
        assert!(errs[1].contains(":5: `nowhere`"), "{errs:?}");
        assert!(
            errs[2].ends_with(":6: key `001` is also on line 2"),
            "{errs:?}"
        );
        let yaml = write("dup.yaml", "\"001\": shop/a\n\"002\": was\n\"001\": was\n");
        let errs = load(&yaml, &targets()).unwrap_err();
        assert!(
            errs[0].contains("key `001` is given twice") && errs[0].contains("line 3"),
            "{errs:?}"
        );
        for p in [csv, yaml] {
            let _ = std::fs::remove_file(p);
        }
    }
}
