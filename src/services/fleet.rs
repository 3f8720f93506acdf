//! Fleet state: several tether instances share WebSphere partition tables and
//! operators' server changes through Redis (or Valkey), and hint each other about servers
//! their health checks marked down.
//!
//! The request path never talks to Redis. It keeps reading the local partition table and
//! server states; `$WSPT` changes are recorded by the table (`routing/partitions/journal.rs`)
//! and operators' changes by [`Fleet::server_changed`]. One background task
//! ([`FleetSync`]) publishes them every 100 ms, reads what the others published from a
//! Redis stream, and applies it. Each entry carries a version (a hybrid logical clock in
//! ms): Redis keeps the newer of two writes (a compare-and-set script), so instances never
//! flip an entry back and forth. See `keys.rs` for the keys and their format, and the
//! docs/fleet.md.

mod apply;
mod conflict;
pub mod hints;
pub mod identity;
pub mod keys;
mod metrics;
mod publish;
mod redis_io;
mod rescue;
mod sessions;
mod start;
mod sync;

pub use start::load_at_start;

use crate::config::shared_state::SharedState;
use crate::config::ServerState;
use keys::{Keys, ServerValue};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The fleet's sync task (`sync.rs`): this instance's fleet state and the operator state
/// it applies the others' changes to. Its work is spread by topic over `sync.rs`,
/// `publish.rs` and `rescue.rs`.
pub struct FleetSync {
    fleet: Arc<Fleet>,
    control: Arc<crate::services::control::Control>,
}

impl FleetSync {
    pub fn new(fleet: Arc<Fleet>, control: Arc<crate::services::control::Control>) -> FleetSync {
        FleetSync { fleet, control }
    }
}

/// Another instance, as its last heartbeat said.
#[derive(Clone, Debug)]
pub struct Peer {
    pub name: String,
    pub seen_ms: u64,
    pub partitions: u64,
}

pub struct Fleet {
    pub settings: SharedState,
    /// This instance's name and this process's origin token.
    pub identity: identity::Identity,
    keys: Keys,
    /// The hybrid logical clock: the last version used or seen.
    clock: AtomicU64,
    up: AtomicBool,
    /// Lag of the last change applied from another instance.
    lag_ms: AtomicU64,
    /// Operators' changes made here, not yet published.
    outbox: Mutex<Vec<(String, ServerValue)>>,
    /// The newest change of each server (`cluster/server`) the fleet knows of.
    servers: Mutex<HashMap<String, ServerValue>>,
    peers: Mutex<Vec<Peer>>,
    /// Another live process writing this instance's heartbeat.
    clash: Mutex<conflict::Watch>,
    pub hints: hints::Hints,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Fleet {
    /// The fleet member this process is; without a configured name, the one kept in
    /// `state_dir` (chosen there at the first start).
    pub fn new(settings: SharedState, state_dir: Option<&std::path::Path>) -> Arc<Fleet> {
        metrics::init();
        let identity = identity::resolve(settings.instance.as_deref(), state_dir);
        log::info!(
            "fleet: this instance is {} ({})",
            identity.name,
            identity.describe(state_dir)
        );
        Arc::new(Fleet {
            keys: Keys::new(&settings.key_prefix),
            identity,
            settings,
            clock: AtomicU64::new(0),
            up: AtomicBool::new(false),
            lag_ms: AtomicU64::new(0),
            outbox: Mutex::default(),
            servers: Mutex::default(),
            peers: Mutex::default(),
            clash: Mutex::default(),
            hints: Default::default(),
        })
    }

    pub fn instance(&self) -> &str {
        &self.identity.name
    }

    /// This process's origin token, in every event and heartbeat it writes.
    pub fn origin(&self) -> &str {
        &self.identity.origin
    }

    /// A version for a change made at `at_ms`: later than every version used or seen.
    fn stamp(&self, at_ms: u64) -> u64 {
        let mut last = self.clock.load(Relaxed);
        loop {
            let v = at_ms.max(last + 1);
            match self.clock.compare_exchange(last, v, Relaxed, Relaxed) {
                Ok(_) => return v,
                Err(now) => last = now,
            }
        }
    }

    /// Another instance used `version`: ours must be later from now on.
    fn saw(&self, version: u64) {
        self.clock.fetch_max(version, Relaxed);
    }

    /// An operator changed a server through this instance: `state` and `weight` are its
    /// run-time values now, or `None` when it went back to the config file's.
    pub fn server_changed(
        &self,
        cluster: &str,
        server: &str,
        state: Option<ServerState>,
        weight: u32,
    ) {
        let value = ServerValue {
            version: self.stamp(crate::routing::wall_ms()),
            state,
            weight,
            instance: self.identity.name.clone(),
        };
        let field = keys::server_field(cluster, server);
        lock(&self.servers).insert(field.clone(), value.clone());
        lock(&self.outbox).push((field, value));
    }

    /// The fleet's newest change of a server, for `GET /status`.
    pub fn server_status(&self, cluster: &str, server: &str) -> Option<serde_json::Value> {
        let servers = lock(&self.servers);
        let v = servers.get(&keys::server_field(cluster, server))?;
        Some(serde_json::json!({
            "state": keys::state_text(v.state),
            "weight": v.state.map(|_| v.weight),
            "by": v.instance,
            "at_ms": v.version,
        }))
    }

    /// The fleet part of `GET /status`.
    pub fn status(&self) -> serde_json::Value {
        let peers: Vec<serde_json::Value> = lock(&self.peers)
            .iter()
            .map(|p| {
                serde_json::json!({
                    "instance": p.name,
                    "last_seen_ms_ago": crate::routing::wall_ms().saturating_sub(p.seen_ms),
                    "partitions": p.partitions,
                })
            })
            .collect();
        let now = crate::routing::now_ms();
        let conflict = lock(&self.clash).conflict().map(|o| {
            serde_json::json!({
                "pid": o.pid,
                "origin": o.origin,
                "since_ms_ago": now.saturating_sub(o.first_ms),
            })
        });
        serde_json::json!({
            "instance": self.identity.name,
            "name_conflict": conflict,
            "redis": self.settings.url,
            "key_prefix": self.settings.key_prefix,
            "up": self.up.load(Relaxed),
            "lag_ms": self.lag_ms.load(Relaxed),
            "instances": peers,
        })
    }

    fn set_up(&self, up: bool) {
        self.up.store(up, Relaxed);
        metrics::UP.set(up as i64);
    }
}

impl crate::services::control::Shared for Fleet {
    fn server_changed(&self, cluster: &str, server: &str, state: Option<ServerState>, weight: u32) {
        Fleet::server_changed(self, cluster, server, state, weight)
    }

    fn server_status(&self, cluster: &str, server: &str) -> Option<serde_json::Value> {
        Fleet::server_status(self, cluster, server)
    }

    fn status(&self) -> serde_json::Value {
        Fleet::status(self)
    }
}
