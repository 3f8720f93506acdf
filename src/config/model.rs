//! Validated configuration: parsed addresses, enums, resolved references, defaults applied.

pub use super::listener_model::*;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
pub use tether_plugins::PluginSpec;

/// Most servers a request may be tried on (`max_attempts` upper bound).
pub const MAX_ATTEMPTS_LIMIT: u32 = 16;
/// Largest `grace_period_seconds` and `graceful_shutdown_timeout_seconds` (one hour).
pub const MAX_SHUTDOWN_SECONDS: u64 = 3600;
/// Largest `weight` a server may have.
pub const MAX_WEIGHT: u32 = 1000;
/// Default and largest `websphere.partition_table_max`.
pub const DEFAULT_PARTITION_TABLE_MAX: usize = 100_000;
pub const PARTITION_TABLE_MAX_LIMIT: usize = 10_000_000;
/// Default `session_timeout` (Tomcat's default session timeout).
pub const DEFAULT_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);
/// Default and largest `session_table_max` (live sessions counted exactly per cluster).
pub const DEFAULT_SESSION_TABLE_MAX: usize = 1_000_000;
pub const SESSION_TABLE_MAX_LIMIT: usize = 100_000_000;

/// A whole, valid tether configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Things that work but are probably not what was meant (overlapping or unreachable
    /// routes): `tether -t` prints them, start and reload log them.
    pub warnings: Vec<super::ConfigError>,
    pub server: ServerSettings,
    /// Where partition tables and runtime states are kept across restarts.
    pub state_dir: Option<PathBuf>,
    pub listeners: Vec<Listener>,
    pub clusters: Vec<Cluster>,
    /// The admin API; off when absent.
    pub admin: Option<Admin>,
    /// The Prometheus `/metrics` listener; off when absent.
    pub metrics: Option<Metrics>,
    /// The access log; off when absent.
    pub access_log: Option<AccessLogSettings>,
    /// Reload when the config file changes, looking this often; off when absent.
    pub watch_config: Option<Duration>,
    /// The Redis a fleet of tethers shares state through; off when absent.
    pub shared_state: Option<super::shared_state::SharedState>,
    /// How servers named by DNS are resolved again while tether runs (`resolver:`).
    pub resolver: Resolver,
}

/// `resolver:`: servers addressed by a host name are resolved again every `interval`,
/// with the system's resolver (`/etc/hosts`, `/etc/resolv.conf`) or these `nameservers`.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolver {
    /// Empty: the system's resolver, which also resolves the names once at load.
    pub nameservers: Vec<SocketAddr>,
    pub interval: Duration,
    /// Each look-up's bound.
    pub timeout: Duration,
}

/// The access log (`access_log:`).
#[derive(Debug, Clone, PartialEq)]
pub struct AccessLogSettings {
    /// File the log is appended to (reopened on `SIGUSR1`).
    pub path: PathBuf,
    /// Replace session ids in logged paths (`;jsessionid=` and the session cookie's name
    /// as a query parameter) with `***`, keeping the route (default true: a session id in
    /// a log is a credential).
    pub mask_session_ids: bool,
}

/// The admin API listener.
#[derive(Debug, Clone, PartialEq)]
pub struct Admin {
    pub address: SocketAddr,
    /// Bearer token every call must carry, read from `token_file` at load time: the
    /// `admin` role's.
    pub token: Option<String>,
    /// More tokens (`tokens:`), each with its role, read at load time.
    pub role_tokens: Vec<(String, Role)>,
    /// Allow an admin API without a token on a non-loopback address (default false: such a
    /// config is refused, since anyone who reaches the address could stop every server).
    pub allow_unauthenticated: bool,
    /// HTTPS instead of plain HTTP (default none: plain). Fixed until a binary upgrade,
    /// as the listener is.
    pub tls: Option<ServiceTls>,
}

/// The Prometheus listener (`metrics:`).
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    pub address: SocketAddr,
    /// HTTPS instead of plain HTTP (default none: plain).
    pub tls: Option<ServiceTls>,
}

/// TLS of a listener of tether's own (`admin.tls`, `metrics.tls`): one certificate, TLS
/// 1.2 and 1.3 with Mozilla's intermediate ciphers, HTTP/1.1. Checked when the config is
/// loaded, loaded again when the listener starts.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceTls {
    /// Certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// CA bundle (PEM): when set, a client must show a certificate it issued (default
    /// none: no client certificate asked for).
    pub client_ca: Option<PathBuf>,
}

/// What an admin API token may do; each role may do what the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Status, sessions, explain.
    Read,
    /// And drain, stop, activate, weight.
    Operate,
    /// And reload and dropping run-time changes: everything.
    Admin,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Operate => "operate",
            Role::Admin => "admin",
        }
    }
}

/// How a health check talks to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthCheckKind {
    /// A TCP connect.
    Tcp,
    /// An HTTP GET whose status must be in `expect`.
    Http,
    /// An AJP CPing answered by a CPong (mod_jk's `ping_mode`).
    Cping,
}

/// Active health checks of a cluster (JServ watchdog, HAProxy `check`).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheck {
    pub kind: HealthCheckKind,
    pub path: String,
    /// `Host` header of the check; the server's address when absent.
    pub host: Option<String>,
    /// Accepted statuses, inclusive.
    pub expect: (u16, u16),
    pub interval: Duration,
    pub timeout: Duration,
    /// Consecutive passes that bring a down server up.
    pub rise: u32,
    /// Consecutive failures that take an up server down.
    pub fall: u32,
}

/// Pingora's server settings, from the `server:` section.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    pub threads: usize,
    /// Off by default: one event loop per thread, as nginx and HAProxy run, which measured
    /// a lower p99 and less CPU per request than Pingora's stealing scheduler
    /// (bench/results/HISTORY.md, "Pingora's proxy path: what was tried").
    pub work_stealing: bool,
    pub grace_period_seconds: u64,
    pub graceful_shutdown_timeout_seconds: u64,
    pub pid_file: String,
    pub upgrade_sock: String,
    pub error_log: Option<String>,
    pub daemon: bool,
    pub user: Option<String>,
    pub group: Option<String>,
    pub upstream_keepalive_pool_size: usize,
    /// Kept-alive connections per worker thread that keep their buffers while they wait
    /// up to a second for their next request (tether's engine, `front/engine/grace.rs`).
    pub idle_buffers_per_thread: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            threads: 2,
            work_stealing: false,
            grace_period_seconds: 5,
            graceful_shutdown_timeout_seconds: 5,
            pid_file: "/tmp/tether.pid".to_string(),
            upgrade_sock: "/tmp/tether_upgrade.sock".to_string(),
            error_log: None,
            daemon: false,
            user: None,
            group: None,
            upstream_keepalive_pool_size: 128,
            idle_buffers_per_thread: 256,
        }
    }
}

/// A cluster's TLS to its servers (`clusters[].tls`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterTls {
    /// CA bundle the servers' certificates are verified with (the system's when absent).
    pub ca: Option<PathBuf>,
    /// SNI name, also the name the certificate must carry (the server's host when absent).
    pub sni: Option<String>,
    /// Verify the servers' certificates (default true; false is logged at start).
    pub verify: bool,
    /// The proxy's own certificate and key, for servers that ask for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// Tomcat `SSLValve` headers (`clusters[].ssl_headers`): the names the facts go under.
#[derive(Debug, Clone, PartialEq)]
pub struct SslHeaders {
    pub client_cert: String,
    pub cipher: String,
    pub session_id: String,
    pub key_size: String,
}

/// How session ids carry the server's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionStyle {
    /// Tomcat / JServ: `<id>.<jvmRoute>`.
    Tomcat,
    /// WebSphere: `<cache id><id>:<clone or partition>[:<clone>...]`.
    Websphere,
}

/// `clusters[].outlier`: a server whose answers are 5xx `consecutive_5xx` times in a row
/// takes no new sessions for `ejection` (longer each time it happens again, up to ten
/// times as long); its own sessions still reach it, and if they keep failing it is marked
/// down. Never more than `max_ejected_percent` of the servers are ejected at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outlier {
    pub consecutive_5xx: u32,
    /// Failures to answer in a row (a reset or a timeout after connecting: tether's own
    /// 502/504 for the server) that eject it likewise.
    pub consecutive_errors: u32,
    pub ejection: Duration,
    pub max_ejected_percent: u32,
}

/// How new sessions are spread over servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Smooth weighted round robin (nginx, JServ balance sets).
    Weighted,
    /// Fewest requests in flight relative to weight.
    LeastInflight,
    /// Fewest live sessions relative to weight (two servers drawn at random, the emptier
    /// taken; ties by requests in flight).
    Sessions,
}

/// Administrative state of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerState {
    /// Takes new and sticky requests.
    Active,
    /// Takes only requests of its own sessions (mod_jk *disabled*, HAProxy *drain*).
    Draining,
    /// Takes no requests (mod_jk *stopped*).
    Stopped,
}

impl ServerState {
    /// As the config, the admin API and the metrics write it.
    pub fn name(self) -> &'static str {
        match self {
            ServerState::Active => "active",
            ServerState::Draining => "draining",
            ServerState::Stopped => "stopped",
        }
    }
}

/// A set of servers sharing sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub name: String,
    pub session_style: SessionStyle,
    pub session_cookie: String,
    pub session_path: String,
    /// Optional request header carrying the session id (non-browser clients).
    pub session_header: Option<String>,
    pub sticky: bool,
    pub sticky_force: bool,
    pub max_attempts: u32,
    pub balance: Balance,
    pub recover_after: Duration,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub idle_timeout: Duration,
    /// Separator of the clone list in WebSphere session ids (`:`, or `+` with CloneSeparatorChange).
    pub clone_separator: u8,
    /// WebSphere: set the plug-in's `$WSRA`, `$WSRH`, `$WSSC`, `$WSSN`, `$WSSP`, `$WSIS`.
    pub private_headers: bool,
    /// WebSphere: most partitions the partition table holds.
    pub partition_table_max: usize,
    /// A session is live until this long after its last request.
    pub session_timeout: Duration,
    /// The most live sessions counted exactly (0: not counted).
    pub session_table_max: usize,
    /// A request whose session names a draining server where it is not live is balanced
    /// as a new session (when the session table knows every live session).
    pub drain_rescue: bool,
    /// A server that comes back gets a share of new sessions that ramps from 10 % to its
    /// weight over this long (zero: at once).
    pub slow_start: Duration,
    /// Ejection from new sessions of a server that keeps answering 5xx (`outlier`).
    pub outlier: Option<Outlier>,
    pub health_check: Option<HealthCheck>,
    /// Upstream statuses that fail the try (mod_jk `fail_on_status`, nginx
    /// `proxy_next_upstream http_503`): the answer is dropped, the request goes to the
    /// next server when it may, else gets 503.
    pub fail_on_status: Vec<FailOn>,
    /// Routing plugins run after the listener's, for requests of this cluster.
    pub plugins: Vec<PluginSpec>,
    /// TLS to the servers; plain HTTP when absent.
    pub tls: Option<ClusterTls>,
    /// The servers speak AJP/1.3 (`ajp:`), not HTTP.
    pub ajp: Option<Ajp>,
    /// TLS facts for Tomcat's `SSLValve`, when set.
    pub ssl_headers: Option<SslHeaders>,
    /// Requests waiting for a slot on a server at its `max_inflight`.
    pub queue: Queue,
    /// Whose bound the servers' `max_inflight` is: this instance's, or the fleet's.
    pub max_inflight_per: MaxInflightPer,
    /// Pages for tether's own answers to this cluster's requests, over the listener's.
    pub error_pages: Option<super::ErrorPages>,
    /// A server's answer with this status or above goes to the client with tether's page
    /// for its status instead of its body (mod_jk's `use_server_errors`); 0: off.
    pub replace_server_errors: u16,
    /// Which failures of a try send the request to the next server (`retry_on`).
    pub retry: Retry,
    pub servers: Vec<Server>,
}

/// The queue of requests waiting for a slot on each server (HAProxy's `maxqueue` and
/// `timeout queue`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Queue {
    /// Requests waiting at most, per server (0: none wait; a full server refuses at once).
    pub length: u32,
    /// How long a request waits at most.
    pub timeout: Duration,
}

/// Most requests in flight to one server a config may bound (`max_inflight`).
pub const MAX_INFLIGHT_LIMIT: u32 = 100_000;
/// Most requests waiting for one server (`queue.length`).
pub const QUEUE_LENGTH_LIMIT: u32 = 1_000_000;

/// AJP/1.3 to a cluster's servers (`clusters[].ajp`).
#[derive(Debug, Clone, PartialEq)]
pub struct Ajp {
    /// The AJP connector's `secret` (Tomcat's `secretRequired`), read from `secret_file`.
    pub secret: Option<String>,
    /// The largest packet, as the connector's `packetSize` (8192 by default).
    pub packet_size: usize,
    /// When a connection is asked with a CPing before a request goes on it.
    pub ping: AjpPing,
    /// How long a CPong may take (mod_jk's `ping_timeout`).
    pub ping_timeout: std::time::Duration,
    /// A kept connection idle this long is asked with a CPing before it is used again
    /// (mod_jk's `connection_ping_interval`), whatever `ping` says.
    pub ping_interval: Option<std::time::Duration>,
}

/// When tether sends a CPing on a connection to an AJP server before a request (mod_jk's
/// `ping_mode`): one that is not answered in `ping_timeout` has the server marked down and
/// the request sent to another, as a failed connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AjpPing {
    Never,
    /// After each new connection (mod_jk's `C`).
    Connect,
    /// Before each request, on new and kept connections (mod_jk's `P`).
    Request,
}

/// Which failures of a try send the request to the next server, and which requests may
/// go again (`retry_on`, `retry_non_idempotent`, `retry_timeout`). Always within
/// `max_attempts`, and never once an answer began or a body streamed past what was kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// No connection (nothing of the request was sent).
    pub connect_failure: bool,
    /// The server closed or reset a new connection before any byte of an answer.
    pub empty_response: bool,
    /// An answer head that does not parse, or ends before it is whole.
    pub junk_response: bool,
    /// No answer head within `read_timeout`; the server is not marked down (the
    /// plug-in's positive `ServerIOTimeout`).
    pub response_timeout: bool,
    /// Answers with these statuses go to the next server (the last try's is relayed);
    /// the server is not marked down (that is `fail_on_status`).
    pub statuses: Vec<u16>,
    /// Requests other than GET, HEAD, PUT, DELETE, OPTIONS and TRACE may go again too.
    pub non_idempotent: bool,
    /// No new try once this long passed since the request began.
    pub timeout: Option<std::time::Duration>,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            connect_failure: true,
            empty_response: true,
            junk_response: false,
            response_timeout: false,
            statuses: Vec::new(),
            non_idempotent: false,
            timeout: None,
        }
    }
}

/// Whose bound a server's `max_inflight` is (`max_inflight_per`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxInflightPer {
    /// Each instance sends the server at most `max_inflight` requests at once.
    #[default]
    Instance,
    /// The fleet does: each instance takes its share, `max_inflight` divided by the
    /// instances alive (rounded up), as their heartbeats say.
    Fleet,
}

/// A `fail_on_status` entry: `503` marks the server down; `-404` (mod_jk's negative
/// code) fails the try only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailOn {
    pub status: u16,
    pub mark_down: bool,
}

/// One backend application server.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    pub name: String,
    pub address: SocketAddr,
    /// Tomcat `jvmRoute`; defaults to the name.
    pub route: String,
    /// WebSphere CloneID.
    pub clone_id: Option<String>,
    pub weight: u32,
    pub domain: Option<String>,
    /// Index of the failover server in the same cluster.
    pub redirect: Option<usize>,
    pub backup: bool,
    pub state: ServerState,
    /// Requests this instance has in flight to it at most (0: no bound).
    pub max_inflight: u32,
    /// The host name of `address` as written, when it was a name (not an IP): the SNI and
    /// verified name of TLS to this server unless the cluster's `tls.sni` says otherwise.
    pub host: Option<String>,
    /// Why a named server has no address yet (it did not resolve, or waits for the
    /// resolver's first answer): it is down, and takes no request until it resolves.
    pub unresolved: Option<String>,
}
