//! Serde types that mirror the config file; never used outside `config`.
//!
//! Sections and list items are deserialised one at a time so that every bad item is
//! reported, not only the first. An item that fails to deserialise is kept as `None`.

use super::error::ConfigError;
use super::model::{Balance, HealthCheckKind, MaxInflightPer, ServerState, SessionStyle};
use super::raw_items::{item, list};
use super::raw_tls::{RawAjp, RawClusterTls, RawListenerTls, RawRedirect, RawSslHeaders};
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
    shared_state: Option<Value>,
    resolver: Option<Value>,
    #[serde(default, deserialize_with = "duration_text")]
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
    pub shared_state: Option<super::shared_state::RawSharedState>,
    pub resolver: Option<RawResolver>,
    pub watch_config: Option<String>,
}

/// `resolver:`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawResolver {
    #[serde(default)]
    pub nameservers: Vec<String>,
    #[serde(default, deserialize_with = "duration_text")]
    pub interval: Option<String>,
    #[serde(default, deserialize_with = "duration_text")]
    pub timeout: Option<String>,
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
    pub idle_buffers_per_thread: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    pub name: String,
    pub address: String,
    /// Required, unless the listener only redirects to https.
    pub cluster: Option<String>,
    pub forwarded_headers: Option<bool>,
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    pub proxy_protocol: Option<RawProxyProtocol>,
    #[serde(default)]
    pub plugins: Vec<Value>,
    pub limits: Option<RawLimits>,
    pub client_limits: Option<RawClientLimits>,
    pub tls: Option<RawListenerTls>,
    pub h2c: Option<bool>,
    pub http1: Option<String>,
    pub http2: Option<String>,
    pub http3: Option<bool>,
    pub alt_svc_max_age: Option<String>,
    pub http3_retry_above: Option<u64>,
    pub redirect_https: Option<RawRedirect>,
    #[serde(default)]
    pub routes: Vec<RawRoute>,
    pub error_pages: Option<serde_yaml::Mapping>,
    pub route_order: Option<String>,
    pub serve: Option<super::serve::RawServe>,
    pub compress: Option<super::compress::RawCompress>,
}

/// `listeners[].routes[]`.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    pub name: Option<String>,
    pub host: Option<String>,
    pub path: String,
    pub cluster: Option<String>,
    pub respond: Option<RawRespond>,
    pub redirect: Option<RawRouteRedirect>,
    pub serve: Option<super::serve::RawServe>,
    pub exclude: Option<bool>,
    pub disabled: Option<bool>,
    #[serde(default)]
    pub plugins: Vec<Value>,
    pub max_request_body: Option<u64>,
    pub error_pages: Option<serde_yaml::Mapping>,
    pub compress: Option<super::compress::RawCompress>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawRespond {
    pub status: u16,
    pub body: Option<String>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawRouteRedirect {
    pub to: String,
    pub status: Option<u16>,
}

/// `listeners[].proxy_protocol`.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawProxyProtocol {
    pub from: Vec<String>,
}

/// `listeners[].client_limits`.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawClientLimits {
    pub connections: Option<u32>,
    pub requests: Option<u32>,
    #[serde(default, deserialize_with = "duration_text")]
    pub per: Option<String>,
    pub clients: Option<u32>,
    #[serde(default)]
    pub allow: Vec<String>,
    pub ipv4_prefix: Option<u8>,
    pub ipv6_prefix: Option<u8>,
}

/// `listeners[].limits`.
#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub max_request_head: Option<usize>,
    #[serde(default, deserialize_with = "duration_text")]
    pub request_head_timeout: Option<String>,
    #[serde(default, deserialize_with = "duration_text")]
    pub keepalive_timeout: Option<String>,
    pub max_connections: Option<usize>,
    pub request_buffer: Option<usize>,
    pub max_request_body: Option<u64>,
    #[serde(default, deserialize_with = "duration_text")]
    pub request_body_timeout: Option<String>,
    #[serde(default, deserialize_with = "duration_text")]
    pub send_timeout: Option<String>,
    pub request_body_min_rate: Option<u32>,
    #[serde(default, deserialize_with = "duration_text")]
    pub request_body_grace: Option<String>,
    pub send_min_rate: Option<u32>,
    #[serde(default, deserialize_with = "duration_text")]
    pub send_grace: Option<String>,
    #[serde(default, deserialize_with = "duration_text")]
    pub tunnel_idle_timeout: Option<String>,
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
    #[serde(default, deserialize_with = "duration_text")]
    pub recover_after: Option<String>,
    #[serde(default, deserialize_with = "duration_text")]
    pub connect_timeout: Option<String>,
    #[serde(default, deserialize_with = "duration_text")]
    pub read_timeout: Option<String>,
    #[serde(default, deserialize_with = "duration_text")]
    pub idle_timeout: Option<String>,
    pub websphere: Option<RawWebsphere>,
    pub health_check: Option<RawHealthCheck>,
    #[serde(default)]
    pub plugins: Vec<Value>,
    pub fail_on_status: Option<Vec<i32>>,
    pub replace_server_errors: Option<u16>,
    pub error_pages: Option<serde_yaml::Mapping>,
    pub tls: Option<RawClusterTls>,
    pub ajp: Option<RawAjp>,
    pub ssl_headers: Option<RawSslHeaders>,
    #[serde(default, deserialize_with = "duration_text")]
    pub session_timeout: Option<String>,
    pub session_table_max: Option<usize>,
    pub drain_rescue: Option<bool>,
    #[serde(default, deserialize_with = "duration_text")]
    pub slow_start: Option<String>,
    pub outlier: Option<RawOutlier>,
    pub max_inflight: Option<u32>,
    pub max_inflight_per: Option<MaxInflightPer>,
    pub queue: Option<RawQueue>,
    pub retry_on: Option<Vec<Value>>,
    pub retry_non_idempotent: Option<bool>,
    #[serde(default, deserialize_with = "duration_text")]
    pub retry_timeout: Option<String>,
}

/// `clusters[].queue`: requests waiting for a slot on a server at its `max_inflight`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQueue {
    pub length: Option<u32>,
    #[serde(default, deserialize_with = "duration_text")]
    pub timeout: Option<String>,
}

/// `clusters[].outlier`: ejection from new sessions of a server that keeps failing.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOutlier {
    pub consecutive_5xx: Option<u32>,
    pub consecutive_errors: Option<u32>,
    #[serde(default, deserialize_with = "duration_text")]
    pub ejection: Option<String>,
    pub max_ejected_percent: Option<u32>,
}

/// The admin API listener (`admin:`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub address: String,
    pub token_file: Option<String>,
    /// More tokens, each with a role (`read`, `operate`, `admin`).
    #[serde(default)]
    pub tokens: Vec<RawRoleToken>,
    pub allow_unauthenticated: Option<bool>,
    pub tls: Option<RawServiceTls>,
}

/// `admin.tls` and `metrics.tls`: one certificate, and client certificates when
/// `client_ca` is given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServiceTls {
    pub cert: String,
    pub key: String,
    pub client_ca: Option<String>,
}

/// `admin.tokens[]`: a token file and what its holder may do.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoleToken {
    pub file: String,
    pub role: String,
}

/// The Prometheus listener (`metrics:`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub address: String,
    pub tls: Option<RawServiceTls>,
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
    #[serde(default, deserialize_with = "duration_text")]
    pub interval: Option<String>,
    #[serde(default, deserialize_with = "duration_text")]
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
    pub max_inflight: Option<u32>,
}

/// A duration field as written: text, or a bare number (`5`), which the validation then
/// refuses with a message saying what to write (`5s`) instead of a type error.
fn duration_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => {
            return Err(serde::de::Error::custom(format!(
                "expected a duration such as `10s`, found {}",
                match other {
                    Value::Bool(_) => "a boolean",
                    Value::Sequence(_) => "a list",
                    Value::Mapping(_) => "a mapping",
                    _ => "something else",
                }
            )))
        }
    })
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
        let shared_state = match top.shared_state {
            None | Some(Value::Null) => None,
            Some(v) => item(v, "shared_state", errors),
        };
        let resolver = match top.resolver {
            None | Some(Value::Null) => None,
            Some(v) => item(v, "resolver", errors),
        };
        RawConfig {
            shared_state,
            resolver,
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
            let before = errors.len();
            let cluster = item(v, &path, errors);
            // `servers` was taken out above: the list of a cluster's known fields names it.
            for e in &mut errors[before..] {
                let own = e
                    .path
                    .strip_prefix(&path)
                    .and_then(|f| f.strip_prefix('.'))
                    .is_some_and(|f| !f.contains(['.', '[']));
                if own && e.message.contains("; known fields:") {
                    e.message.push_str(", `servers`");
                }
            }
            RawClusterItem { cluster, servers }
        })
        .collect()
}
