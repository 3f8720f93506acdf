//! Serde types that mirror the config file; never used outside `config`.
//!
//! Sections and list items are deserialised one at a time so that every bad item is
//! reported, not only the first. An item that fails to deserialise is kept as `None`.

use super::error::ConfigError;
use super::model::{Balance, HealthCheckKind, ServerState, SessionStyle};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_yaml::Value;

/// The top level; each section is still a YAML tree here.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTop {
    server: Option<Value>,
    state_dir: Option<String>,
    listeners: Option<Value>,
    clusters: Option<Value>,
    admin: Option<Value>,
    metrics: Option<Value>,
    access_log: Option<Value>,
    watch_config: Option<String>,
}

#[derive(Default)]
pub struct RawConfig {
    pub server: RawServerSettings,
    pub state_dir: Option<String>,
    pub listeners: Vec<Option<RawListener>>,
    pub clusters: Vec<RawClusterItem>,
    pub admin: Option<RawAdmin>,
    pub metrics: Option<RawMetrics>,
    pub access_log: Option<RawAccessLog>,
    pub watch_config: Option<String>,
}

/// A cluster and its servers, deserialised separately so that a bad cluster field does
/// not hide the errors of its servers.
pub struct RawClusterItem {
    pub cluster: Option<RawCluster>,
    pub servers: Vec<Option<RawServer>>,
}

/// Pingora's own settings (`server:`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawServerSettings {
    pub threads: Option<usize>,
    pub work_stealing: Option<bool>,
    pub grace_period_seconds: Option<u64>,
    pub graceful_shutdown_timeout_seconds: Option<u64>,
    pub pid_file: Option<String>,
    pub upgrade_sock: Option<String>,
    pub error_log: Option<String>,
    pub daemon: Option<bool>,
    pub user: Option<String>,
    pub group: Option<String>,
    pub upstream_keepalive_pool_size: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    pub name: String,
    pub address: String,
    pub cluster: String,
    pub forwarded_headers: Option<bool>,
    #[serde(default)]
    pub plugins: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub name: String,
    pub session_style: Option<SessionStyle>,
    pub session_cookie: Option<String>,
    pub session_path: Option<String>,
    pub session_header: Option<String>,
    pub sticky: Option<bool>,
    pub sticky_force: Option<bool>,
    pub max_attempts: Option<u32>,
    pub balance: Option<Balance>,
    pub recover_after: Option<String>,
    pub connect_timeout: Option<String>,
    pub read_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    pub websphere: Option<RawWebsphere>,
    pub health_check: Option<RawHealthCheck>,
    #[serde(default)]
    pub plugins: Vec<Value>,
    pub fail_on_status: Option<Vec<u16>>,
}

/// The admin API listener (`admin:`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub address: String,
    pub token_file: Option<String>,
    pub allow_unauthenticated: Option<bool>,
}

/// The Prometheus listener (`metrics:`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub address: String,
}

/// The access log (`access_log:`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAccessLog {
    pub path: String,
    pub enabled: Option<bool>,
    pub mask_session_ids: Option<bool>,
}

/// Active health checks of a cluster (`health_check:`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHealthCheck {
    pub kind: Option<HealthCheckKind>,
    pub path: Option<String>,
    pub host: Option<String>,
    pub expect: Option<Value>,
    pub interval: Option<String>,
    pub timeout: Option<String>,
    pub rise: Option<u32>,
    pub fall: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWebsphere {
    pub clone_separator: Option<String>,
    pub private_headers: Option<bool>,
    pub partition_table_max: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub name: String,
    pub address: String,
    pub route: Option<String>,
    pub clone_id: Option<String>,
    pub weight: Option<u32>,
    pub domain: Option<String>,
    pub redirect: Option<String>,
    pub backup: Option<bool>,
    pub state: Option<ServerState>,
}

/// Deserialises `value` as `T`, recording an error at `path` (plus the inner path) on failure.
fn item<T: DeserializeOwned>(value: Value, path: &str, errors: &mut Vec<ConfigError>) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(v) => Some(v),
        Err(e) => {
            let inner = e.path().to_string();
            let mut message = e.into_inner().to_string();
            // Point unknown fields at the field itself, not at the item that holds it.
            let mut full = join(path, if inner == "." { "" } else { &inner });
            if let Some(name) = unknown_field(&message) {
                if !full.ends_with(name) {
                    full = join(&full, name);
                }
                message = message.replace(", expected one of", "; known fields:");
            }
            errors.push(ConfigError::new(full, message));
            None
        }
    }
}

fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

fn join(parent: &str, child: &str) -> String {
    match (parent.is_empty(), child.is_empty()) {
        (_, true) => parent.to_string(),
        (true, false) => child.to_string(),
        (false, false) if child.starts_with('[') => format!("{parent}{child}"),
        _ => format!("{parent}.{child}"),
    }
}

/// Deserialises each item of a YAML list; a missing list is empty.
fn list<T: DeserializeOwned>(
    value: Option<Value>,
    path: &str,
    errors: &mut Vec<ConfigError>,
) -> Vec<Option<T>> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Sequence(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| item(v, &format!("{path}[{i}]"), errors))
            .collect(),
        Some(_) => {
            errors.push(ConfigError::new(path, "must be a list"));
            Vec::new()
        }
    }
}

impl RawConfig {
    /// Splits the YAML tree into raw types, recording every item that does not fit.
    pub fn from_tree(tree: Value, errors: &mut Vec<ConfigError>) -> RawConfig {
        let top: RawTop = match tree {
            Value::Null => RawTop::default(),
            tree => match item(tree, "", errors) {
                Some(top) => top,
                None => return RawConfig::default(),
            },
        };
        let server = match top.server {
            None | Some(Value::Null) => Some(RawServerSettings::default()),
            Some(v) => item(v, "server", errors),
        };
        let clusters = clusters(top.clusters, errors);
        let admin = match top.admin {
            None | Some(Value::Null) => None,
            Some(v) => item(v, "admin", errors),
        };
        let metrics = match top.metrics {
            None | Some(Value::Null) => None,
            Some(v) => item(v, "metrics", errors),
        };
        let access_log = match top.access_log {
            None | Some(Value::Null) => None,
            Some(v) => item(v, "access_log", errors),
        };
        RawConfig {
            watch_config: top.watch_config,
            metrics,
            access_log,
            admin,
            server: server.unwrap_or_default(),
            state_dir: top.state_dir,
            listeners: list(top.listeners, "listeners", errors),
            clusters,
        }
    }
}

/// Deserialises each cluster with its `servers` list taken out and checked on its own.
fn clusters(value: Option<Value>, errors: &mut Vec<ConfigError>) -> Vec<RawClusterItem> {
    let items = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Sequence(items)) => items,
        Some(_) => {
            errors.push(ConfigError::new("clusters", "must be a list"));
            return Vec::new();
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, mut v)| {
            let path = format!("clusters[{i}]");
            let servers = v.as_mapping_mut().and_then(|m| m.remove("servers"));
            let servers = list(servers, &format!("{path}.servers"), errors);
            RawClusterItem {
                cluster: item(v, &path, errors),
                servers,
            }
        })
        .collect()
}
