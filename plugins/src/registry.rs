//! The explicit registry: plugin names, how their config is parsed and how they are built.

pub use crate::config_error::PluginConfigError;
use crate::target::KnownTargets;
use crate::{route_lookup, route_table, script, Plugin};
use serde_yaml::Value;
use std::sync::Arc;

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
    ("route_lookup", |v, t| {
        route_lookup::parse(v, t).map(PluginSpec::RouteLookup)
    }),
    ("route_table", |v, t| {
        route_table::parse(v, t).map(PluginSpec::RouteTable)
    }),
    ("script", |v, t| script::parse(v, t).map(PluginSpec::Script)),
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
