//! The configuration reference cannot rot: every field the parser accepts is in
//! `docs/configuration.md`, and the chapter names no field the parser does not know.
//!
//! The parser says itself what it accepts: a field it does not know is refused with the
//! list of those it knows ("unknown field `x`; known fields: ..." or serde's "expected one
//! of ..."). So the test puts an unknown field into each section of a small valid config,
//! runs `tether -t`, and reads the list; a known field that takes a mapping (or a list of
//! mappings) is a section too, found the same way. The chapter is read by its headings (a
//! section's path in backquotes: `listeners[].limits`, `clusters[]`, `plugins[script]`;
//! "top level" for the root) and the backquoted names in the first column of their tables
//! (`metrics.address` under the top level is `address` of section `metrics`).

mod common;

use serde_yaml::{Mapping, Value};
use std::collections::{BTreeMap, BTreeSet};

const PROBE: &str = "zzz_probe";

/// A small config that `tether -t` accepts.
const BASE: &str = "listeners:\n  - name: web\n    address: \"127.0.0.1:1\"\n    cluster: shop\n\
                    clusters:\n  - name: shop\n    servers:\n      - { name: a, address: \"127.0.0.1:2\" }\n";

/// One step into the config: a mapping's key, or a list's first item.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    First,
}

/// A section: where it is in the config, and what a plugin entry there must be named.
#[derive(Clone, Debug)]
struct Section {
    name: String,
    steps: Vec<Step>,
    /// In a plugin's section or one nested in it: how many steps lead to the plugin's
    /// entry, and the `name` that entry carries.
    plugin: Option<(usize, &'static str)>,
}

/// The value at `steps` under `v`, made (as an empty mapping or a one-item list) where it
/// is missing or not the right kind.
fn place<'a>(v: &'a mut Value, steps: &[Step]) -> &'a mut Value {
    let Some((step, rest)) = steps.split_first() else {
        return v;
    };
    let next = match step {
        Step::Key(k) => {
            if !v.is_mapping() {
                *v = Value::Mapping(Mapping::new());
            }
            let m = v.as_mapping_mut().unwrap();
            let key = Value::String(k.clone());
            if !m.contains_key(&key) {
                m.insert(key.clone(), Value::Null);
            }
            m.get_mut(&key).unwrap()
        }
        Step::First => {
            if v.as_sequence().is_none_or(|s| s.is_empty()) {
                *v = Value::Sequence(vec![Value::Mapping(Mapping::new())]);
            }
            &mut v.as_sequence_mut().unwrap()[0]
        }
    };
    place(next, rest)
}

/// What `tether -t` says of `yaml`.
fn check(dir: &std::path::Path, yaml: &str) -> String {
    common::tether_t(dir, yaml).1
}

/// The field list in an unknown-field error for the probe, if the output has one.
fn known_fields(said: &str) -> Option<BTreeSet<String>> {
    let line = said
        .lines()
        .find(|l| l.contains(&format!("unknown field `{PROBE}`")))?;
    let list = line
        .split_once("known fields:")
        .or_else(|| line.split_once("expected one of"))
        .or_else(|| line.split_once("expected"))?
        .1;
    Some(
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

/// The fields the parser accepts in section `s` (`None`: it is no section of fields).
fn probe(dir: &std::path::Path, s: &Section, value_as_list: bool) -> Option<BTreeSet<String>> {
    let mut config: Value = serde_yaml::from_str(BASE).unwrap();
    let mut steps = s.steps.clone();
    if value_as_list {
        steps.push(Step::First);
    }
    if let Some((depth, name)) = s.plugin {
        let entry = place(&mut config, &s.steps[..depth]);
        if !entry.is_mapping() {
            *entry = Value::Mapping(Mapping::new());
        }
        entry
            .as_mapping_mut()
            .unwrap()
            .insert("name".into(), name.into());
    }
    let at = place(&mut config, &steps);
    if !at.is_mapping() {
        *at = Value::Mapping(Mapping::new());
    }
    at.as_mapping_mut().unwrap().insert(PROBE.into(), 1.into());
    known_fields(&check(dir, &serde_yaml::to_string(&config).unwrap()))
}

/// Every section the parser has, from the root down, with its fields.
fn parser_sections(dir: &std::path::Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![Section {
        name: String::new(),
        steps: Vec::new(),
        plugin: None,
    }];
    for plugin in tether_plugins::NAMES {
        todo.push(Section {
            name: format!("plugins[{plugin}]"),
            steps: vec![
                Step::Key("listeners".into()),
                Step::First,
                Step::Key("plugins".into()),
                Step::First,
            ],
            plugin: Some((4, plugin)),
        });
    }
    while let Some(s) = todo.pop() {
        let fields = probe(dir, &s, false).unwrap_or_else(|| panic!("no fields in {s:?}"));
        for f in &fields {
            if f == "name" || f == "plugins" {
                continue; // names are strings; plugin lists are sections of their own
            }
            let mut steps = s.steps.clone();
            steps.push(Step::Key(f.clone()));
            let join = |suffix: &str| match s.name.as_str() {
                "" => format!("{f}{suffix}"),
                n => format!("{n}.{f}{suffix}"),
            };
            for (list, suffix) in [(false, ""), (true, "[]")] {
                let inner = Section {
                    name: join(suffix),
                    steps: steps.clone(),
                    plugin: s.plugin,
                };
                if !out.contains_key(&inner.name) && probe(dir, &inner, list).is_some() {
                    let mut inner = inner;
                    if list {
                        inner.steps.push(Step::First);
                    }
                    todo.push(inner);
                    break;
                }
            }
        }
        out.insert(s.name, fields);
    }
    out
}

/// The sections and fields the chapter names.
fn chapter_sections(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // The sections the current heading names (a table under a heading that names two,
    // like the plugins' shared `key`, documents both).
    let mut sections: Vec<String> = Vec::new();
    let path = |name: &str| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.[]".contains(c))
    };
    for line in text.lines() {
        if let Some(h) = line.strip_prefix('#') {
            let h = h.trim_start_matches('#').trim();
            sections = if h.eq_ignore_ascii_case("top level") {
                vec![String::new()]
            } else {
                h.split('`')
                    .skip(1)
                    .step_by(2)
                    .filter(|n| path(n))
                    .map(str::to_string)
                    .collect()
            };
            continue;
        }
        let Some(row) = line.strip_prefix('|') else {
            continue;
        };
        let first = row.split('|').next().unwrap_or("");
        for name in first.split('`').skip(1).step_by(2).filter(|n| path(n)) {
            for s in &sections {
                let full = if s.is_empty() {
                    name.to_string()
                } else {
                    format!("{s}.{name}")
                };
                let (sec, field) = full.rsplit_once('.').unwrap_or(("", &full));
                out.entry(sec.to_string())
                    .or_default()
                    .insert(field.trim_end_matches("[]").to_string());
            }
        }
    }
    // A section documented is its field in the section above documented.
    let sections: Vec<String> = out.keys().filter(|k| !k.is_empty()).cloned().collect();
    for k in sections {
        let (parent, field) = k.rsplit_once('.').unwrap_or(("", &k));
        // A plugin's section (`plugins[script]`) is an entry of every `plugins` list, not a
        // field of the top level.
        if parent.is_empty() && field.starts_with("plugins[") {
            continue;
        }
        out.entry(parent.to_string())
            .or_default()
            .insert(field.trim_end_matches("[]").to_string());
    }
    out
}

#[test]
fn every_field_the_parser_accepts_is_in_the_reference_and_no_other() {
    let dir = common::scratch_dir("config-reference");
    let parser = parser_sections(&dir);
    println!("the parser's sections: {parser:#?}");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
    let chapter = chapter_sections(&std::fs::read_to_string(path).unwrap());
    let mut missing = Vec::new();
    let mut unknown = Vec::new();
    for (section, fields) in &parser {
        let documented = chapter.get(section).cloned().unwrap_or_default();
        for f in fields.difference(&documented) {
            missing.push(format!("{section}: {f}"));
        }
    }
    for (section, fields) in &chapter {
        let accepted = parser.get(section).cloned().unwrap_or_default();
        for f in fields.difference(&accepted) {
            unknown.push(format!("{section}: {f}"));
        }
    }
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/configuration.md lacks fields the parser accepts:\n  {}\nand names fields the parser does not know:\n  {}",
        missing.join("\n  "),
        unknown.join("\n  ")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_chapter_reader_finds_sections_and_dotted_fields() {
    let text = "## top level\n| field | default |\n| --- | --- |\n| `watch_config` | none |\n\
                | `metrics.address` | none |\n### `listeners[].limits`\n| `a`, `b` | 1 |\n\
                ## `plugins[script]`\n| `file` | none |\n\
                ### Keys of `plugins[route_lookup]` and `plugins[route_table]`\n| `key.header` | none |\n";
    let c = chapter_sections(text);
    assert_eq!(
        c[""],
        BTreeSet::from(["watch_config".to_string(), "metrics".to_string()])
    );
    assert_eq!(c["metrics"], BTreeSet::from(["address".to_string()]));
    assert_eq!(
        c["listeners[].limits"],
        BTreeSet::from(["a".to_string(), "b".to_string()])
    );
    assert_eq!(c["plugins[script]"], BTreeSet::from(["file".to_string()]));
    for p in ["plugins[route_lookup].key", "plugins[route_table].key"] {
        assert_eq!(c[p], BTreeSet::from(["header".to_string()]));
    }
}
