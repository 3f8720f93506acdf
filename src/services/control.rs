//! Run-time control shared by the admin API and signals: server states and weights,
//! config reloads, and the status report. Nothing here runs on the request path.
//!
//! A change that affects balancing (a weight) or the whole config (a reload) builds a new
//! routing snapshot from the current config, carrying live state over by name, and swaps
//! it in; requests in flight keep the snapshot they started with.

use crate::config::{self, Config, ConfigErrors, ServerState};
use crate::routing::ServerSlot;
use crate::state::snapshot::{SharedSnapshot, Snapshot};
use arc_swap::ArcSwap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

mod dns;
mod overview;
mod reload_notes;
mod sessions;
mod shared;
mod status;

pub use dns::DnsRefresh;
pub use sessions::SessionsNow;
pub use shared::Shared;
pub use status::empty_by;

/// Why a control call was refused.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("unknown cluster `{0}`")]
    UnknownCluster(String),
    #[error("unknown server `{1}` in cluster `{0}`")]
    UnknownServer(String, String),
    #[error("weight must be a whole number between 1 and {max}", max = config::MAX_WEIGHT)]
    BadWeight,
    #[error("this tether was started without a config file; nothing to reload")]
    NoConfigFile,
    #[error("{0}")]
    BadConfig(Box<ConfigErrors>),
    /// A certificate or key that passed validation did not load when the acceptor was
    /// built (changed in between): the running TLS setup stays.
    #[error("TLS: {0}")]
    Tls(String),
}

/// What a successful reload did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ReloadReport {
    /// Settings that differ in the new file but only take effect after a binary upgrade.
    pub needs_upgrade: Vec<String>,
    /// Servers whose run-time state or weight won over a different value in the file.
    pub overridden: Vec<String>,
}

pub struct Control {
    config: ArcSwap<Config>,
    /// The config the process started with: what its listeners, admin API and Pingora
    /// settings actually are until a binary upgrade, whatever later reloads said.
    started: Arc<Config>,
    snapshot: SharedSnapshot,
    path: Option<PathBuf>,
    /// Serialises changes that rebuild the snapshot (reload, weight), so none is lost.
    rebuild: Mutex<()>,
    /// The fleet this instance shares operators' changes with, if any.
    fleet: once_cell::sync::OnceCell<Arc<dyn Shared>>,
    /// When the process started (ms since the Unix epoch).
    started_ms: u64,
    /// The last reload: when, and why it failed (`None`: applied).
    last_reload: Mutex<Option<(u64, Option<String>)>>,
    /// Wakes the resolver after a reload, which may have named new servers.
    names_changed: tokio::sync::Notify,
}

impl Control {
    pub fn new(config: Config, snapshot: SharedSnapshot, path: Option<PathBuf>) -> Self {
        let started = Arc::new(config);
        Control {
            config: ArcSwap::new(started.clone()),
            started,
            snapshot,
            path,
            rebuild: Mutex::new(()),
            fleet: Default::default(),
            started_ms: crate::routing::wall_ms(),
            last_reload: Mutex::new(None),
            names_changed: tokio::sync::Notify::new(),
        }
    }

    /// Shares operators' changes with `fleet` from now on.
    pub fn join_fleet(&self, fleet: Arc<dyn Shared>) {
        let _ = self.fleet.set(fleet);
    }

    /// Tells the fleet (if any) what `cluster/server` is now.
    fn publish(&self, cluster: &str, server: &str) {
        let Some(fleet) = self.fleet.get() else {
            return;
        };
        let now = self.with_server(cluster, server, |s| {
            (s.live.is_overridden()).then(|| (s.live.state(), s.live.weight()))
        });
        if let Ok(now) = now {
            let (state, weight) = now.map_or((None, 0), |(s, w)| (Some(s), w));
            fleet.server_changed(cluster, server, state, weight);
        }
    }

    /// Applies an operator's change made through another instance of the fleet: run-time
    /// `state` and weight, or back to the file's values (`None`). Returns whether anything
    /// changed; never published again.
    pub fn apply_shared(
        &self,
        cluster: &str,
        server: &str,
        change: Option<(ServerState, u32)>,
    ) -> Result<bool, ControlError> {
        let _guard = self.rebuild.lock().unwrap_or_else(|e| e.into_inner());
        let config = self.config.load_full();
        let file = config
            .clusters
            .iter()
            .find(|c| c.name == cluster)
            .and_then(|c| c.servers.iter().find(|s| s.name == server))
            .map(|s| (s.state, s.weight));
        let (changed, reweighted) = self.with_server(cluster, server, |slot| {
            let before = (
                slot.live.state(),
                slot.live.weight(),
                slot.live.is_overridden(),
            );
            match change {
                Some((state, weight)) => {
                    slot.live.override_state(state);
                    slot.live.override_weight(weight);
                }
                None => {
                    slot.live.clear_override();
                    if let Some((state, weight)) = file {
                        slot.live.apply_config(state, weight);
                    }
                }
            }
            let after = (
                slot.live.state(),
                slot.live.weight(),
                slot.live.is_overridden(),
            );
            (before != after, before.1 != after.1)
        })?;
        if reweighted {
            let current = self.snapshot.load_full();
            let mut next = Snapshot::build(&config, Some(&current));
            next.upstream_tls = current.upstream_tls.clone();
            self.bind_listeners(&mut next, &config, &current, None);
            self.snapshot.store(Arc::new(next));
        }
        if changed {
            self.save_overrides();
        }
        Ok(changed)
    }

    pub fn snapshot(&self) -> &SharedSnapshot {
        &self.snapshot
    }

    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    fn with_server<T>(
        &self,
        cluster: &str,
        server: &str,
        f: impl FnOnce(&ServerSlot) -> T,
    ) -> Result<T, ControlError> {
        self.in_cluster(cluster, server, |router, i| f(&router.servers()[i]))
    }

    /// Runs `f` on `cluster`'s router and the index of its `server`, from the current
    /// snapshot.
    fn in_cluster<T>(
        &self,
        cluster: &str,
        server: &str,
        f: impl FnOnce(&crate::routing::ClusterRouter, usize) -> T,
    ) -> Result<T, ControlError> {
        let snapshot = self.snapshot.load();
        let router = snapshot
            .clusters
            .iter()
            .find(|r| r.name == cluster)
            .ok_or_else(|| ControlError::UnknownCluster(cluster.into()))?;
        let index = router
            .servers()
            .iter()
            .position(|s| s.config.name == server)
            .ok_or_else(|| ControlError::UnknownServer(cluster.into(), server.into()))?;
        Ok(f(router, index))
    }

    /// Saves operators' changes under `state_dir` (for restarts and upgrades).
    fn save_overrides(&self) {
        if let Some(dir) = &self.config.load().state_dir {
            if let Err(e) = crate::services::overrides::save(&self.snapshot.load(), dir) {
                log::warn!("cannot save run-time changes under {}: {e}", dir.display());
            }
        }
    }

    /// Sets a server's state (drain, stop, activate); kept across reloads.
    pub fn set_state(
        &self,
        cluster: &str,
        server: &str,
        state: ServerState,
    ) -> Result<ServerState, ControlError> {
        let before = self.with_server(cluster, server, |slot| {
            let before = slot.live.state();
            slot.live.override_state(state);
            before
        })?;
        self.save_overrides();
        self.publish(cluster, server);
        Ok(before)
    }

    /// The status worker's `recover`: a server marked down (or ejected) on this instance
    /// takes requests again now; its health checks, if any, go on deciding. Whether it was
    /// down.
    pub fn recover(&self, cluster: &str, server: &str) -> Result<bool, ControlError> {
        self.with_server(cluster, server, |slot| slot.live.recover())
    }

    /// The status worker's `reset`: the server's counters on `/status` (requests,
    /// failures, errors, reply timeouts, the peak in flight) start again from 0.
    /// Prometheus's counters never go back.
    pub fn reset_counters(&self, cluster: &str, server: &str) -> Result<(), ControlError> {
        self.with_server(cluster, server, |slot| slot.live.reset_counters())
    }

    /// Sets a server's weight for new sessions; kept across reloads.
    pub fn set_weight(
        &self,
        cluster: &str,
        server: &str,
        weight: u32,
    ) -> Result<u32, ControlError> {
        if !(1..=config::MAX_WEIGHT).contains(&weight) {
            return Err(ControlError::BadWeight);
        }
        let _guard = self.rebuild.lock().unwrap_or_else(|e| e.into_inner());
        let before = self.with_server(cluster, server, |slot| {
            let before = slot.live.weight();
            slot.live.override_weight(weight);
            before
        })?;
        // The balancing schedule is built from weights: rebuild it off the request path.
        self.rebuild_snapshot(&self.config.load());
        self.save_overrides();
        self.publish(cluster, server);
        Ok(before)
    }

    /// A new snapshot of `config` over the running one (live states, TLS and listeners
    /// kept), for a change that is not a reload. The caller holds `rebuild`.
    fn rebuild_snapshot(&self, config: &Config) {
        let current = self.snapshot.load_full();
        let mut next = Snapshot::build(config, Some(&current));
        next.upstream_tls = current.upstream_tls.clone();
        self.bind_listeners(&mut next, config, &current, None);
        self.snapshot.store(Arc::new(next));
    }

    /// Reads, validates and applies the config file. On error the running config stays.
    pub fn reload(&self) -> Result<ReloadReport, ControlError> {
        self.reload_with(false)
    }

    /// Reloads; with `drop_overrides`, operators' run-time changes are forgotten first, so
    /// every server takes its state and weight from the file.
    pub fn reload_with(&self, drop_overrides: bool) -> Result<ReloadReport, ControlError> {
        let result = self.try_reload(drop_overrides);
        crate::metrics::reload_done(result.is_ok());
        let failure = result.as_ref().err().map(ToString::to_string);
        *self.last_reload.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((crate::routing::wall_ms(), failure));
        result
    }

    fn try_reload(&self, drop_overrides: bool) -> Result<ReloadReport, ControlError> {
        let path = self.path.as_ref().ok_or(ControlError::NoConfigFile)?;
        let mut new = config::load(path).map_err(|e| ControlError::BadConfig(Box::new(e)))?;
        let _guard = self.rebuild.lock().unwrap_or_else(|e| e.into_inner());
        // Names the resolver answered keep their address until it answers again.
        dns::carry_addresses(&mut new, &self.config.load());
        // Certificates are loaded before anything changes: a bad one fails the reload.
        let acceptors = crate::state::tls::build_listeners(&new).map_err(ControlError::Tls)?;
        let upstream = crate::state::tls::build_clusters(&new).map_err(ControlError::Tls)?;
        let current = self.snapshot.load_full();
        if drop_overrides {
            for r in current.clusters.iter() {
                r.servers().iter().for_each(|s| s.live.clear_override());
            }
        }
        // Compared with what is running (bound at start), not with the previous reload.
        let report = ReloadReport {
            needs_upgrade: reload_notes::fixed_at_start(&self.started, &new),
            overridden: reload_notes::shadowed(&current, &new),
        };
        for line in &report.overridden {
            log::warn!("reload: {line}");
        }
        for line in config::warning_lines(&new, &path.display().to_string()) {
            log::warn!("reload: {line}");
        }
        let mut next = Snapshot::build(&new, Some(&current));
        next.upstream_tls = upstream.into();
        self.bind_listeners(&mut next, &new, &current, Some(&acceptors));
        self.snapshot.store(Arc::new(next));
        self.config.store(Arc::new(new));
        if drop_overrides {
            self.save_overrides();
        }
        self.names_changed.notify_one();
        Ok(report)
    }

    /// Forgets operators' run-time changes of one server (or of every server when
    /// `target` is `None`): they take their state and weight from the running config.
    /// Returns how many servers had one.
    pub fn drop_overrides(&self, target: Option<(&str, &str)>) -> Result<usize, ControlError> {
        let _guard = self.rebuild.lock().unwrap_or_else(|e| e.into_inner());
        let config = self.config.load_full();
        let current = self.snapshot.load_full();
        if let Some((cluster, server)) = target {
            self.with_server(cluster, server, |_| ())?;
        }
        let mut dropped = Vec::new();
        for (router, c) in current.clusters.iter().zip(&config.clusters) {
            for (slot, s) in router.servers().iter().zip(&c.servers) {
                let wanted = target.is_none_or(|(tc, ts)| tc == c.name && ts == s.name);
                if wanted && slot.live.is_overridden() {
                    slot.live.clear_override();
                    slot.live.apply_config(s.state, s.weight);
                    dropped.push((c.name.clone(), s.name.clone()));
                }
            }
        }
        let n = dropped.len();
        self.rebuild_snapshot(&config);
        self.save_overrides();
        if let Some(fleet) = self.fleet.get() {
            for (c, s) in &dropped {
                fleet.server_changed(c, s, None, 0);
            }
        }
        Ok(n)
    }

    /// Points the listeners bound at start at their clusters in `next` (built from `new`).
    ///
    /// Listeners are fixed at start: each bound listener keeps its place, and takes its
    /// cluster (by name), `forwarded_headers` and plugins from the new file when the file
    /// still has it, or keeps its cluster and forwarding (without plugins) when it does not. (Taken from the previous reload instead, a
    /// listener removed by one reload would lose its place at the next, and its requests
    /// would index past the end.)
    ///
    /// `acceptors` are the new config's TLS acceptors (a reload); without them (a weight
    /// change) each listener keeps its own. Whether a listener speaks TLS is fixed at
    /// start; its certificates and settings follow the file.
    fn bind_listeners(
        &self,
        next: &mut Snapshot,
        new: &Config,
        current: &Snapshot,
        acceptors: Option<&[Option<Arc<crate::state::tls::Acceptor>>]>,
    ) {
        let mut clusters = Vec::new();
        let mut forwarded = Vec::new();
        let mut chains = Vec::new();
        let mut limits = Vec::new();
        let mut client_limits = Vec::new();
        let mut trusted_proxies = Vec::new();
        let mut proxy_protocol = Vec::new();
        let mut tls = Vec::new();
        let mut redirects = Vec::new();
        let mut routes = Vec::new();
        for (i, l) in self.started.listeners.iter().enumerate() {
            let kept = new.listeners.iter().position(|n| n.name == l.name);
            // A listener the file no longer has keeps its default cluster (by name).
            let now = current.listeners[i].map(|c| current.clusters[c].name.as_str());
            let wanted = match kept {
                Some(j) => new.listeners[j]
                    .cluster
                    .map(|c| new.clusters[c].name.as_str()),
                None => now,
            };
            clusters.push(wanted.and_then(|w| next.clusters.iter().position(|c| c.name == w)));
            match kept {
                Some(j) => {
                    forwarded.push(new.listeners[j].forwarded_headers);
                    limits.push(new.listeners[j].limits);
                    client_limits.push(next.client_limits[j].clone());
                    trusted_proxies.push(next.trusted_proxies[j].clone());
                    proxy_protocol.push(next.proxy_protocol[j].clone());
                    redirects.push(new.listeners[j].redirect_https);
                    routes.push(next.routes[j].clone());
                    let fresh = acceptors.and_then(|a| a[j].clone());
                    tls.push(match (&current.tls[i], fresh) {
                        (Some(_), Some(a)) => Some(a),
                        (keep, _) => keep.clone(),
                    });
                    chains.push(next.listener_chains[j].clone());
                }
                // Its plugins were built against the current clusters, whose places may
                // have changed: it runs without plugins until the file names it again.
                None => {
                    forwarded.push(current.forwarded[i]);
                    limits.push(current.limits[i]);
                    client_limits.push(current.client_limits[i].clone());
                    trusted_proxies.push(current.trusted_proxies[i].clone());
                    proxy_protocol.push(current.proxy_protocol[i].clone());
                    redirects.push(current.redirects[i]);
                    // Its routes name clusters by their old places: it runs without them.
                    routes.push(Default::default());
                    tls.push(current.tls[i].clone());
                    chains.push(Default::default());
                }
            }
        }
        next.listeners = clusters.into();
        next.forwarded = forwarded.into();
        next.listener_chains = chains.into();
        next.limits = limits.into();
        next.client_limits = client_limits.into();
        next.trusted_proxies = trusted_proxies.into();
        next.proxy_protocol = proxy_protocol.into();
        next.redirects = redirects.into();
        next.routes = routes.into();
        crate::metrics::certificate_expiry_reset();
        for (l, t) in self.started.listeners.iter().zip(&tls) {
            if let Some(t) = t {
                crate::metrics::certificate_expiry(&l.name, &t.expiry);
            }
        }
        next.tls = tls.into();
        next.refresh_has_plugins();
    }
}
