//! One cluster's router: its servers with live state, indexes built once, and `decide`.

pub mod learn;
mod outlier;
mod pick;
mod ramp;
mod track;

use super::decision::{Decision, Outcome};
use super::fields::Fields;
use super::live::ServerLive;
use super::live_sessions::LiveSessions;
use super::partitions::{clone_tag, Feed, PartitionTable};
use super::ring::Ring;
use super::session_id::{cookie_values, path_parameter};
use super::tried::Tried;
use super::wrr::Schedule;
use crate::config::{Balance, Cluster, HealthCheck, Server, SessionStyle};
use http::header::{HeaderName, COOKIE};
use pick::{Pending, Pick};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// A configured server and its live state.
pub struct ServerSlot {
    pub config: Server,
    pub live: Arc<ServerLive>,
}

/// Servers of one kind (primaries or backups), balanced together.
struct Pool {
    members: Box<[usize]>,
    ring: Ring,
    schedule: Schedule,
}

impl Pool {
    fn new(servers: &[ServerSlot], backup: bool) -> Pool {
        let members: Vec<usize> = (0..servers.len())
            .filter(|&i| servers[i].config.backup == backup)
            .collect();
        let ring_members: Vec<_> = members
            .iter()
            .map(|&i| (i, servers[i].config.address, servers[i].config.weight))
            .collect();
        // New sessions follow the live weight (the admin API may change it); the hash ring
        // keeps the configured one, so orphaned sessions do not move on a weight change.
        let weights: Vec<u32> = members.iter().map(|&i| servers[i].live.weight()).collect();
        Pool {
            ring: Ring::new(&ring_members),
            schedule: Schedule::new(&weights),
            members: members.into(),
        }
    }
}

/// Upstream timeouts of a cluster.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub read: Duration,
    pub idle: Duration,
}

pub struct ClusterRouter {
    pub name: String,
    timeouts: Timeouts,
    style: SessionStyle,
    cookie: Box<[u8]>,
    path_param: Box<[u8]>,
    session_header: Option<HeaderName>,
    sticky: bool,
    sticky_force: bool,
    /// Requests waiting for a slot on a server at its `max_inflight`.
    pub queue: crate::config::Queue,
    /// Requests free to go to any server, waiting for the first slot one hands back;
    /// carried over by a reload.
    pub waiting: Arc<super::Waiters>,
    max_inflight_per: crate::config::MaxInflightPer,
    /// `replace_server_errors` (0: off).
    pub replace_server_errors: u16,
    /// Which failures of a try send the request on (`retry_on`).
    pub retry: crate::config::Retry,
    pub max_attempts: u32,
    balance: Balance,
    recover_after_ms: u64,
    clone_separator: u8,
    servers: Box<[ServerSlot]>,
    routes: HashMap<Box<[u8]>, usize>,
    clones: HashMap<Box<[u8]>, usize>,
    /// Clone tag (as the partition table stores it) → server index.
    clone_tags: HashMap<u32, usize>,
    /// WebSphere clusters only; shared with the previous router across reloads.
    partitions: Option<Arc<PartitionTable>>,
    private_headers: bool,
    health_check: Option<HealthCheck>,
    fail_on_status: Box<[crate::config::FailOn]>,
    domains: HashMap<Box<[u8]>, ()>,
    primaries: Pool,
    backups: Pool,
    cursor: AtomicU64,
    /// Live sessions per server (sticky clusters with a `session_table_max`); kept by a
    /// reload that keeps the servers, their order and the table's settings.
    sessions: Option<Arc<LiveSessions>>,
    /// `drain_rescue`: stale sessions of draining servers are balanced as new ones.
    drain_rescue: bool,
    /// `slow_start` in ms (0: off).
    slow_start_ms: u64,
    outlier: Option<crate::config::Outlier>,
    ejections: AtomicU64,
}

impl ClusterRouter {
    /// Builds the router for `cfg`. Servers that `previous` also has (by name) keep their
    /// live state, so a reload does not reset health, drain state or counters.
    pub fn new(cfg: &Cluster, previous: Option<&ClusterRouter>) -> ClusterRouter {
        let servers: Box<[ServerSlot]> = cfg
            .servers
            .iter()
            .map(|s| ServerSlot {
                live: match previous
                    .and_then(|p| p.servers.iter().find(|o| o.config.name == s.name))
                {
                    Some(old) => {
                        old.live.apply_config(s.state, s.weight);
                        old.live
                            .slots()
                            .set_limit(super::share(s.max_inflight, cfg.max_inflight_per));
                        old.live.clone()
                    }
                    None => {
                        let live = Arc::new(ServerLive::new(s.state, s.weight));
                        live.slots()
                            .set_limit(super::share(s.max_inflight, cfg.max_inflight_per));
                        // Added by a reload to a checked cluster: its checks say when it is up.
                        if previous.is_some() && cfg.health_check.is_some() {
                            live.start_down(super::now_ms());
                        } else if previous.is_some() {
                            live.came_back(super::now_ms());
                        }
                        live
                    }
                },
                config: s.clone(),
            })
            .collect();
        let waiting = previous.map_or_else(Default::default, |p| p.waiting.clone());
        for s in servers.iter() {
            s.live.slots().join(&waiting);
            // A name with no address takes no request; one that resolved since does.
            match &s.config.unresolved {
                Some(why) => s.live.hold_down(why),
                None if s.live.held() => {
                    s.live.mark_up();
                }
                None => {}
            }
        }
        let index = |key: fn(&Server) -> Option<&str>| {
            servers
                .iter()
                .enumerate()
                .filter_map(|(i, s)| key(&s.config).map(|k| (k.as_bytes().into(), i)))
                .collect::<HashMap<Box<[u8]>, usize>>()
        };
        let routes = index(|s| Some(&s.route));
        let clone_tags = clones_by_tag(&servers);
        let partitions = (cfg.session_style == SessionStyle::Websphere).then(|| {
            match previous.and_then(|p| p.partitions.clone()) {
                Some(table) if table.max() == cfg.partition_table_max => table,
                _ => Arc::new(PartitionTable::new(cfg.partition_table_max)),
            }
        });
        let sessions = (cfg.sticky && cfg.session_table_max > 0).then(|| {
            let timeout = cfg.session_timeout.as_secs();
            let same_servers = previous.is_some_and(|p| {
                p.servers.len() == servers.len()
                    && p.servers
                        .iter()
                        .zip(servers.iter())
                        .all(|(a, b)| a.config.name == b.config.name)
            });
            match previous.and_then(|p| p.sessions.clone()) {
                Some(t) if same_servers && t.fits(cfg.session_table_max, timeout) => t,
                _ => Arc::new(LiveSessions::new(
                    cfg.session_table_max,
                    servers.len(),
                    timeout,
                )),
            }
        });
        let clones = index(|s| s.clone_id.as_deref());
        // An empty domain is no domain (mod_jk).
        let domains = index(|s| s.domain.as_deref().filter(|d| !d.is_empty()))
            .into_keys()
            .map(|k| (k, ()))
            .collect();
        ClusterRouter {
            name: cfg.name.clone(),
            timeouts: Timeouts {
                connect: cfg.connect_timeout,
                read: cfg.read_timeout,
                idle: cfg.idle_timeout,
            },
            style: cfg.session_style,
            cookie: cfg.session_cookie.as_bytes().into(),
            path_param: cfg.session_path.as_bytes().into(),
            session_header: cfg
                .session_header
                .as_deref()
                .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok()),
            sticky: cfg.sticky,
            sticky_force: cfg.sticky_force,
            max_attempts: cfg.max_attempts,
            queue: cfg.queue,
            waiting,
            max_inflight_per: cfg.max_inflight_per,
            replace_server_errors: cfg.replace_server_errors,
            retry: cfg.retry.clone(),
            balance: cfg.balance,
            // With active checks the check decides when a server is back: no probes.
            recover_after_ms: match cfg.health_check {
                Some(_) => u64::MAX,
                None => cfg.recover_after.as_millis() as u64,
            },
            clone_separator: cfg.clone_separator,
            primaries: Pool::new(&servers, false),
            backups: Pool::new(&servers, true),
            servers,
            routes,
            clones,
            clone_tags,
            partitions,
            private_headers: cfg.private_headers,
            health_check: cfg.health_check.clone(),
            fail_on_status: cfg.fail_on_status.clone().into(),
            domains,
            cursor: AtomicU64::new(0),
            sessions,
            drain_rescue: cfg.drain_rescue,
            slow_start_ms: cfg.slow_start.as_millis() as u64,
            outlier: cfg.outlier,
            // Carried over so that the counter never goes back at a reload.
            ejections: AtomicU64::new(previous.map_or(0, |p| p.ejections())),
        }
    }

    /// The names a session id travels under: the path parameter and the cookie.
    pub fn session_names(&self) -> [&[u8]; 2] {
        [&self.path_param, &self.cookie]
    }

    /// The field a session id may also come in (`session_header`).
    pub fn session_header(&self) -> Option<&HeaderName> {
        self.session_header.as_ref()
    }

    /// Does it balance new sessions by live sessions (`balance: sessions`)?
    pub fn balances_by_sessions(&self) -> bool {
        self.balance == Balance::Sessions && self.sessions.is_some()
    }

    /// Does the cluster route by session (`sticky`)?
    pub fn is_sticky(&self) -> bool {
        self.sticky
    }

    /// The server a Tomcat route (`jvmRoute`) or a WebSphere clone id names.
    pub fn server_named_by(&self, token: &[u8]) -> Option<usize> {
        match self.style {
            SessionStyle::Tomcat => self.routes.get(token).copied(),
            SessionStyle::Websphere => self.clones.get(token).copied(),
        }
    }

    /// `drain_rescue`: stale cookies of draining servers are balanced as new sessions.
    pub fn drain_rescue(&self) -> bool {
        self.drain_rescue
    }

    pub fn servers(&self) -> &[ServerSlot] {
        &self.servers
    }

    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Active health check settings, when the cluster has them.
    pub fn health_check(&self) -> Option<&HealthCheck> {
        self.health_check.as_ref()
    }

    /// Does `status` fail the try (`fail_on_status`), and does it mark the server down?
    pub fn fails_on(&self, status: u16) -> Option<bool> {
        self.fail_on_status
            .iter()
            .find(|f| f.status == status)
            .map(|f| f.mark_down)
    }

    /// The servers' bounds again after the fleet's size changed (`max_inflight_per:
    /// fleet`).
    pub fn share_bounds(&self) {
        if self.max_inflight_per == crate::config::MaxInflightPer::Fleet {
            for s in self.servers.iter() {
                let bound = super::share(s.config.max_inflight, self.max_inflight_per);
                s.live.slots().set_limit(bound);
            }
        }
    }

    /// Does an answer with `status` go to the next server (`retry_on`)?
    pub fn retries_on(&self, status: u16) -> bool {
        self.retry.statuses.contains(&status)
    }

    /// Is this a WebSphere cluster (partition table, `$WSFO`)?
    pub fn is_websphere(&self) -> bool {
        self.style == SessionStyle::Websphere
    }

    /// Should requests carry the WebSphere plug-in's private headers?
    pub fn private_headers(&self) -> bool {
        self.private_headers
    }

    /// The partition table (WebSphere clusters only).
    pub fn partitions(&self) -> Option<&Arc<PartitionTable>> {
        self.partitions.as_ref()
    }

    /// The fleet's feed of the partition table, when `d` sends a WebSphere session away
    /// from its partition's owner (a hash, for a partition the table does not know, or a
    /// failover, from an owner that cannot take it) and the fleet may know better
    /// (`partitions/feed.rs`): what the request waits on before it fails over.
    pub fn fleet_feed(&self, d: Decision, key: Option<u64>, now: u64) -> Option<&Feed> {
        let away = matches!(
            d,
            Decision::Route {
                outcome: Outcome::HashFallback | Outcome::Failover,
                ..
            }
        );
        if !away || self.style != SessionStyle::Websphere {
            return None;
        }
        let feed = self.partitions.as_ref()?.feed();
        feed.may_wait(key, now).then_some(feed)
    }

    /// Chooses the server for a request whose raw path (with query) is `path`.
    /// `tried` holds the servers this request already failed on; `now` is [`super::now_ms`].
    pub fn decide(&self, path: &[u8], headers: &impl Fields, tried: &Tried, now: u64) -> Decision {
        self.decide_with(path, headers, tried, now, None)
    }

    /// Like [`Self::decide`], with a server a routing plugin chose: it takes the request
    /// when the request carries no session of this cluster (a new or an orphaned session)
    /// and it can take new sessions. A session of this cluster keeps its affinity.
    pub fn decide_with(
        &self,
        path: &[u8],
        headers: &impl Fields,
        tried: &Tried,
        now: u64,
        preferred: Option<usize>,
    ) -> Decision {
        let pick = self.pick(tried, now, preferred, false);
        self.walk(&pick, path, headers, |_, _| {})
    }

    /// Where [`Self::decide`] would send this request now and why, with the session id it
    /// went by and that id's token (the route after the first `.`, or WebSphere's clone and
    /// partition list), without claiming anything: no recovery probe, no turn of the
    /// round robin. For scripts and for explaining a decision to an operator.
    pub fn explain(&self, path: &[u8], headers: &impl Fields, now: u64) -> Explained {
        self.explain_after(path, headers, now, &Tried::default())
    }

    /// [`Self::explain`] for a retry, after the servers in `tried` failed.
    pub fn explain_after(
        &self,
        path: &[u8],
        headers: &impl Fields,
        now: u64,
        tried: &Tried,
    ) -> Explained {
        let pick = self.pick(tried, now, None, true);
        let mut session_id: Option<Vec<u8>> = None;
        let decision = self.walk(&pick, path, headers, |sid, decided| {
            if decided || session_id.is_none() {
                session_id = Some(sid.to_vec());
            }
        });
        let sep = match self.style {
            SessionStyle::Tomcat => b'.',
            SessionStyle::Websphere => self.clone_separator,
        };
        let token = session_id
            .as_deref()
            .and_then(|sid| Some(sid[sid.iter().position(|&b| b == sep)? + 1..].to_vec()));
        Explained {
            session_id,
            token,
            decision,
        }
    }

    /// One decision's view (`dry`: claiming nothing).
    fn pick<'a>(
        &'a self,
        tried: &'a Tried,
        now: u64,
        preferred: Option<usize>,
        dry: bool,
    ) -> Pick<'a> {
        Pick {
            router: self,
            tried,
            now,
            preferred: preferred.filter(|&p| p < self.servers.len()),
            dry,
        }
    }

    /// The decision over the request's session id candidates (the path parameter, else
    /// each cookie, then the session header); `seen` is told each candidate considered and
    /// whether it decided.
    fn walk(
        &self,
        pick: &Pick,
        path: &[u8],
        headers: &impl Fields,
        mut seen: impl FnMut(&[u8], bool),
    ) -> Decision {
        if !self.sticky {
            return pick.new_session();
        }
        let mut pending = Pending::default();
        if let Some(sid) = path_parameter(path, &self.path_param) {
            let d = pick.consider(sid, &mut pending);
            seen(sid, d.is_some());
            if let Some(d) = d {
                return d;
            }
        } else {
            for value in headers.values(&COOKIE) {
                for sid in cookie_values(value, &self.cookie) {
                    let d = pick.consider(sid, &mut pending);
                    seen(sid, d.is_some());
                    if let Some(d) = d {
                        return d;
                    }
                }
            }
            if let Some(sid) = self.session_header.as_ref().and_then(|h| headers.first(h)) {
                let d = pick.consider(sid, &mut pending);
                seen(sid, d.is_some());
                if let Some(d) = d {
                    return d;
                }
            }
        }
        pick.settle(pending)
    }
}

/// What [`ClusterRouter::explain`] found: the session id it went by (the one that decided,
/// else the first one seen) and that id's token, and the decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    pub session_id: Option<Vec<u8>>,
    pub token: Option<Vec<u8>>,
    pub decision: Decision,
}

fn clones_by_tag(servers: &[ServerSlot]) -> HashMap<u32, usize> {
    servers
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((clone_tag(s.config.clone_id.as_deref()?.as_bytes()), i)))
        .collect()
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
