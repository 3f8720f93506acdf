//! One cluster's router: its servers with live state, indexes built once, and `decide`.

use super::decision::{Decision, Outcome, Reject};
use super::live::ServerLive;
use super::ring::Ring;
use super::session_id::{cookie_values, path_parameter, MAX_SESSION_ID_LEN};
use super::tried::Tried;
use super::wrr::Schedule;
use crate::config::{Balance, Cluster, Server, ServerState, SessionStyle};
use http::header::{HeaderMap, HeaderName, COOKIE};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

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
        let weights: Vec<u32> = members.iter().map(|&i| servers[i].config.weight).collect();
        Pool {
            ring: Ring::new(&ring_members),
            schedule: Schedule::new(&weights),
            members: members.into(),
        }
    }
}

pub struct ClusterRouter {
    pub name: String,
    style: SessionStyle,
    cookie: Box<[u8]>,
    path_param: Box<[u8]>,
    session_header: Option<HeaderName>,
    sticky: bool,
    sticky_force: bool,
    pub max_attempts: u32,
    balance: Balance,
    recover_after_ms: u64,
    clone_separator: u8,
    servers: Box<[ServerSlot]>,
    routes: HashMap<Box<[u8]>, usize>,
    clones: HashMap<Box<[u8]>, usize>,
    domains: HashMap<Box<[u8]>, ()>,
    primaries: Pool,
    backups: Pool,
    cursor: AtomicU64,
}

impl ClusterRouter {
    /// Builds the router for `cfg`. Servers that `previous` also has (by name) keep their
    /// live state, so a reload does not reset health, drain state or counters.
    pub fn new(cfg: &Cluster, previous: Option<&ClusterRouter>) -> ClusterRouter {
        let servers: Box<[ServerSlot]> = cfg
            .servers
            .iter()
            .map(|s| ServerSlot {
                live: previous
                    .and_then(|p| p.servers.iter().find(|o| o.config.name == s.name))
                    .map(|o| o.live.clone())
                    .unwrap_or_else(|| Arc::new(ServerLive::new(s.state, s.weight))),
                config: s.clone(),
            })
            .collect();
        let index = |key: fn(&Server) -> Option<&str>| {
            servers
                .iter()
                .enumerate()
                .filter_map(|(i, s)| key(&s.config).map(|k| (k.as_bytes().into(), i)))
                .collect::<HashMap<Box<[u8]>, usize>>()
        };
        let routes = index(|s| Some(&s.route));
        let clones = index(|s| s.clone_id.as_deref());
        let domains = index(|s| s.domain.as_deref())
            .into_keys()
            .map(|k| (k, ()))
            .collect();
        ClusterRouter {
            name: cfg.name.clone(),
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
            balance: cfg.balance,
            recover_after_ms: cfg.recover_after.as_millis() as u64,
            clone_separator: cfg.clone_separator,
            primaries: Pool::new(&servers, false),
            backups: Pool::new(&servers, true),
            servers,
            routes,
            clones,
            domains,
            cursor: AtomicU64::new(0),
        }
    }

    pub fn servers(&self) -> &[ServerSlot] {
        &self.servers
    }

    /// Chooses the server for a request whose raw path (with query) is `path`.
    /// `tried` holds the servers this request already failed on; `now` is [`super::now_ms`].
    pub fn decide(&self, path: &[u8], headers: &HeaderMap, tried: &Tried, now: u64) -> Decision {
        let ctx = Pick {
            router: self,
            tried,
            now,
        };
        if !self.sticky {
            return ctx.new_session();
        }
        let mut pending = Pending::default();
        if let Some(sid) = path_parameter(path, &self.path_param) {
            if let Some(d) = ctx.consider(sid, &mut pending) {
                return d;
            }
        } else {
            for value in headers.get_all(COOKIE) {
                for sid in cookie_values(value.as_bytes(), &self.cookie) {
                    if let Some(d) = ctx.consider(sid, &mut pending) {
                        return d;
                    }
                }
            }
            if let Some(sid) = self.session_header.as_ref().and_then(|h| headers.get(h)) {
                if let Some(d) = ctx.consider(sid.as_bytes(), &mut pending) {
                    return d;
                }
            }
        }
        ctx.settle(pending)
    }
}

/// Where a session id points when it points somewhere that cannot take it now.
#[derive(Clone, Copy)]
enum Target {
    Server(usize),
    /// A mod_jk domain none of whose servers can take it.
    Domain,
}

/// What one session id says: a usable server, or a named but unusable one.
enum Lookup {
    Hit(Decision),
    Unusable(Target),
}

/// What the candidates seen so far left behind, for when none of them is usable.
#[derive(Default)]
struct Pending<'s> {
    /// The first candidate whose token named a server or domain that cannot take it.
    unusable: Option<(Target, &'s [u8])>,
    /// The first candidate whose token named nothing.
    orphan: Option<&'s [u8]>,
}

/// One decision's view: the router, the servers to avoid, and the time.
struct Pick<'a> {
    router: &'a ClusterRouter,
    tried: &'a Tried,
    now: u64,
}

impl Pick<'_> {
    fn slot(&self, i: usize) -> &ServerSlot {
        &self.router.servers[i]
    }

    /// May `i` take a request of its own session? (active or draining, and up)
    fn sticky_ok(&self, i: usize) -> bool {
        let live = &self.slot(i).live;
        !self.tried.contains(i)
            && live.state() != ServerState::Stopped
            && live.available(self.now, self.router.recover_after_ms)
    }

    /// May `i` take a new session? (active and up)
    fn new_ok(&self, i: usize) -> bool {
        let live = &self.slot(i).live;
        !self.tried.contains(i)
            && live.state() == ServerState::Active
            && live.available(self.now, self.router.recover_after_ms)
    }

    /// Like [`Self::new_ok`] but without claiming a recovery probe.
    fn could_take_new(&self, i: usize) -> bool {
        let live = &self.slot(i).live;
        !self.tried.contains(i)
            && live.state() == ServerState::Active
            && live.could_take(self.now, self.router.recover_after_ms)
    }

    /// Like [`Self::sticky_ok`] but without claiming a recovery probe.
    fn could_take_sticky(&self, i: usize) -> bool {
        let live = &self.slot(i).live;
        !self.tried.contains(i)
            && live.state() != ServerState::Stopped
            && live.could_take(self.now, self.router.recover_after_ms)
    }

    /// The decision for one session id candidate when its server can take it. Otherwise
    /// remembers it and lets the next candidate try (mod_jk walks every session id before
    /// failing over, so a stale cookie for a dead server does not hide a live session).
    fn consider<'s>(&self, sid: &'s [u8], pending: &mut Pending<'s>) -> Option<Decision> {
        if sid.len() > MAX_SESSION_ID_LEN {
            return None;
        }
        match self.by_session(sid) {
            Some(Lookup::Hit(d)) => Some(d),
            Some(Lookup::Unusable(target)) => {
                pending.unusable.get_or_insert((target, sid));
                None
            }
            None => {
                pending.orphan.get_or_insert(sid);
                None
            }
        }
    }

    /// No candidate could be served as is: fail over for the first one that named a
    /// server, else hash the first orphan, else it is a new session.
    fn settle(&self, pending: Pending) -> Decision {
        match (pending.unusable, pending.orphan) {
            (Some(_), _) if self.router.sticky_force => Decision::Reject(Reject::StickyForce),
            (Some((Target::Server(i), sid)), _) => self.failover(i, sid),
            (Some((Target::Domain, sid)), _) => self.rebalance(sid, Outcome::Failover),
            (None, Some(sid)) => self.hash_fallback(sid),
            (None, None) => self.new_session(),
        }
    }

    /// Where a session id's token points, or `None` when it names no server.
    fn by_session(&self, sid: &[u8]) -> Option<Lookup> {
        let r = self.router;
        match r.style {
            SessionStyle::Tomcat => {
                let token = &sid[sid.iter().position(|&b| b == b'.')? + 1..];
                if let Some(&i) = r.routes.get(token) {
                    return Some(self.sticky_target(i, Outcome::RouteHit));
                }
                let domain = &token[..token.iter().position(|&b| b == b'.')?];
                r.domains
                    .contains_key(domain)
                    .then(|| self.domain_target(domain, sid))
            }
            SessionStyle::Websphere => {
                let sep = r.clone_separator;
                let list = &sid[sid.iter().position(|&b| b == sep)? + 1..];
                let mut known = list
                    .split(|&b| b == sep)
                    .filter_map(|t| r.clones.get(t).copied());
                let first = known.next()?;
                if self.sticky_ok(first) {
                    return Some(Lookup::Hit(Decision::Route {
                        server: first,
                        outcome: Outcome::RouteHit,
                    }));
                }
                // The later clones hold the session's replicas: the plug-in tries them in
                // order before anything else. Leaving the first clone is still a failover.
                Some(match known.find(|&i| self.sticky_ok(i)) {
                    Some(server) => Lookup::Hit(Decision::Route {
                        server,
                        outcome: Outcome::Failover,
                    }),
                    None => Lookup::Unusable(Target::Server(first)),
                })
            }
        }
    }

    /// The session names server `i`: use it if it can take it.
    fn sticky_target(&self, i: usize, outcome: Outcome) -> Lookup {
        if self.sticky_ok(i) {
            Lookup::Hit(Decision::Route { server: i, outcome })
        } else {
            Lookup::Unusable(Target::Server(i))
        }
    }

    /// The session names a mod_jk domain: any server of it, chosen by hash.
    fn domain_target(&self, domain: &[u8], sid: &[u8]) -> Lookup {
        let in_domain =
            |i: usize| self.slot(i).config.domain.as_deref().map(str::as_bytes) == Some(domain);
        let ok = |i: usize| in_domain(i) && self.sticky_ok(i);
        // Must accept what `ok` accepts (draining included), or the ring gives up early.
        let peek = |i: usize| in_domain(i) && self.could_take_sticky(i);
        match self.hash_pick(sid, ok, peek) {
            Some(server) => Lookup::Hit(Decision::Route {
                server,
                outcome: Outcome::DomainHit,
            }),
            None => Lookup::Unusable(Target::Domain),
        }
    }

    /// Server `i` cannot take its session: its `redirect`, else its domain, else the hash.
    fn failover(&self, i: usize, sid: &[u8]) -> Decision {
        let cfg = &self.slot(i).config;
        if let Some(r) = cfg.redirect.filter(|&r| self.new_ok(r)) {
            return Decision::Route {
                server: r,
                outcome: Outcome::Failover,
            };
        }
        if let Some(domain) = cfg.domain.as_deref() {
            let same = |j: usize| self.slot(j).config.domain.as_deref() == Some(domain);
            let ok = |j: usize| same(j) && self.new_ok(j);
            let peek = |j: usize| same(j) && self.could_take_new(j);
            if let Some(server) = self.hash_pick(sid, ok, peek) {
                return Decision::Route {
                    server,
                    outcome: Outcome::Failover,
                };
            }
        }
        self.rebalance(sid, Outcome::Failover)
    }

    /// A session whose token names no server: consistent hash over servers taking new work.
    fn hash_fallback(&self, sid: &[u8]) -> Decision {
        self.rebalance(sid, Outcome::HashFallback)
    }

    fn rebalance(&self, sid: &[u8], outcome: Outcome) -> Decision {
        match self.hash_pick(sid, |i| self.new_ok(i), |i| self.could_take_new(i)) {
            Some(server) => Decision::Route { server, outcome },
            None => Decision::Reject(Reject::NoServer),
        }
    }

    /// Consistent hash over primaries, then over backups.
    fn hash_pick(
        &self,
        sid: &[u8],
        ok: impl Fn(usize) -> bool,
        peek: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let r = self.router;
        r.primaries
            .ring
            .pick(sid, &ok, &peek)
            .or_else(|| r.backups.ring.pick(sid, &ok, &peek))
    }

    /// No session: balance among active, up primaries; backups when none can.
    fn new_session(&self) -> Decision {
        let r = self.router;
        let k = r.cursor.fetch_add(1, Relaxed);
        let pick = |pool: &Pool| match r.balance {
            Balance::Weighted => pool
                .schedule
                .pick(k, |m| self.new_ok(pool.members[m]))
                .map(|m| pool.members[m]),
            Balance::LeastInflight => self.least_inflight(pool, k),
        };
        match pick(&r.primaries).or_else(|| pick(&r.backups)) {
            Some(server) => Decision::Route {
                server,
                outcome: Outcome::NewSession,
            },
            None => Decision::Reject(Reject::NoServer),
        }
    }

    /// Fewest in-flight requests per unit of weight; ties go round robin from `k`.
    fn least_inflight(&self, pool: &Pool, k: u64) -> Option<usize> {
        let n = pool.members.len();
        let mut best: Option<(usize, u64, u64)> = None;
        for step in 0..n {
            let i = pool.members[(k as usize).wrapping_add(step) % n];
            if !self.could_take_new(i) {
                continue;
            }
            let live = &self.slot(i).live;
            let (load, weight) = (live.inflight(), live.weight().max(1) as u64);
            if best.is_none_or(|(_, bl, bw)| load * bw < bl * weight) {
                best = Some((i, load, weight));
            }
        }
        best.map(|(i, ..)| i).filter(|&i| self.new_ok(i))
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
