//! The explicit registry: plugin names, how their config is parsed and how they are built.

use crate::target::KnownTargets;
use crate::{route_lookup, route_table, script, Plugin};
use serde_yaml::Value;
use std::sync::Arc;

/// A problem in one plugin's config; `path` is relative to the plugin's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfigError {
    pub path: String,
    pub message: String,
}

impl PluginConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        PluginConfigError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// A validated plugin config, ready to build.
#[derive(Debug, Clone, PartialEq)]
pub enum PluginSpec {
    RouteLookup(route_lookup::Settings),
    RouteTable(route_table::Spec),
    Script(script::Settings),
}

type Parser = fn(&Value, &KnownTargets) -> Result<PluginSpec, Vec<PluginConfigError>>;

/// Every plugin tether knows, by name.
const REGISTRY: &[(&str, Parser)] = &[
    ("route_lookup", route_lookup::parse),
    ("route_table", route_table::parse),
    ("script", script::parse),
];

/// The names in the registry.
pub const NAMES: &[&str] = &["route_lookup", "route_table", "script"];

/// Validates one plugin entry (`{ name: ..., ... }`).
pub fn parse(entry: &Value, targets: &KnownTargets) -> Result<PluginSpec, Vec<PluginConfigError>> {
    let Some(name) = entry.get("name").and_then(Value::as_str) else {
        return Err(vec![PluginConfigError::new("name", "missing plugin name")]);
    };
    match REGISTRY.iter().find(|(n, _)| *n == name) {
        Some((_, parse)) => parse(entry, targets),
        None => Err(vec![PluginConfigError::new(
            "name",
            format!("unknown plugin `{name}` (known: {})", NAMES.join(", ")),
        )]),
    }
}

/// Builds a plugin instance from its spec.
pub fn build(spec: &PluginSpec, targets: &Arc<KnownTargets>) -> Arc<dyn Plugin> {
    match spec {
        PluginSpec::RouteLookup(s) => {
            Arc::new(route_lookup::RouteLookup::new(s.clone(), targets.clone()))
        }
        PluginSpec::RouteTable(s) => Arc::new(route_table::RouteTable::new(s.clone())),
        PluginSpec::Script(s) => Arc::new(script::Script::new(s.clone(), targets.clone())),
    }
}
