//! The decision rules for one request, over one cluster router (DESIGN section 2).

use super::ramp::{admits, chance};
use super::{ClusterRouter, Pool, ServerSlot};
use crate::config::{Balance, ServerState, SessionStyle};
use crate::routing::decision::{Decision, Outcome, Reject};
use crate::routing::session_id::MAX_SESSION_ID_LEN;
use crate::routing::tried::Tried;
use std::sync::atomic::Ordering::Relaxed;

impl ClusterRouter {
    /// Could a server not in `tried` take a request at `now` (active, and up or due a
    /// probe)? Asked before an answer is dropped for another try, which would otherwise
    /// end in tether's own 503.
    pub fn another_could_take(&self, tried: &Tried, now: u64) -> bool {
        self.servers.iter().enumerate().any(|(i, s)| {
            !tried.contains(i)
                && s.live.state() == ServerState::Active
                && s.live.could_take(now, self.recover_after_ms)
        })
    }
}

/// Where a session id points when it points somewhere that cannot take it now.
#[derive(Clone, Copy)]
enum Target {
    Server(usize),
    /// A mod_jk domain none of whose servers can take it.
    Domain,
}

/// What one session id says: a usable server, or a named but unusable one (with the key
/// a failover hashes on).
enum Lookup<'s> {
    Hit(Decision),
    Unusable(Target, &'s [u8]),
}

/// What the candidates seen so far left behind, for when none of them is usable.
#[derive(Default)]
pub(super) struct Pending<'s> {
    /// The first candidate whose token named a server or domain that cannot take it.
    unusable: Option<(Target, &'s [u8])>,
    /// The hash key of the first candidate whose token named nothing.
    orphan: Option<&'s [u8]>,
}

/// One decision's view: the router, the servers to avoid, and the time.
pub(super) struct Pick<'a> {
    pub router: &'a ClusterRouter,
    pub tried: &'a Tried,
    pub now: u64,
    /// A server a routing plugin chose for a request without a session of this cluster.
    pub preferred: Option<usize>,
    /// Look only: claim no recovery probe and take no turn of the round robin.
    pub dry: bool,
}

impl Pick<'_> {
    fn slot(&self, i: usize) -> &ServerSlot {
        &self.router.servers[i]
    }

    /// May `i` take a request of its own session? (active or draining, and up)
    fn sticky_ok(&self, i: usize) -> bool {
        let live = &self.slot(i).live;
        !self.tried.contains(i) && live.state() != ServerState::Stopped && self.up(live)
    }

    /// Is the server up, or due a recovery probe (claimed unless `dry`)?
    fn up(&self, live: &crate::routing::ServerLive) -> bool {
        if self.dry {
            live.could_take(self.now, self.router.recover_after_ms)
        } else {
            live.available(self.now, self.router.recover_after_ms)
        }
    }

    /// May `i` take a new session? (active and up)
    fn new_ok(&self, i: usize) -> bool {
        let live = &self.slot(i).live;
        !self.tried.contains(i)
            && live.state() == ServerState::Active
            && !live.ejected(self.now)
            && self.up(live)
    }

    /// Like [`Self::new_ok`] but without claiming a recovery probe.
    fn could_take_new(&self, i: usize) -> bool {
        let live = &self.slot(i).live;
        !self.tried.contains(i)
            && live.state() == ServerState::Active
            && !live.ejected(self.now)
            && live.could_take(self.now, self.router.recover_after_ms)
    }

    /// The decision for one session id candidate when its server can take it. Otherwise
    /// remembers it and lets the next candidate try (mod_jk walks every session id before
    /// failing over, so a stale cookie for a dead server does not hide a live session).
    pub fn consider<'s>(&self, sid: &'s [u8], pending: &mut Pending<'s>) -> Option<Decision> {
        if sid.len() > MAX_SESSION_ID_LEN {
            return None;
        }
        match self.by_session(sid) {
            Some(Lookup::Hit(d)) => Some(d),
            Some(Lookup::Unusable(target, key)) => {
                pending.unusable.get_or_insert((target, key));
                None
            }
            None => {
                pending.orphan.get_or_insert(self.hash_key(sid));
                None
            }
        }
    }

    /// No candidate could be served as is: fail over for the first one that named a
    /// server, else hash the first orphan, else it is a new session.
    ///
    /// `sticky_force` refuses both, like mod_jk's `sticky_session_force`, which fails any
    /// request whose session id no server can take, its route naming nothing included.
    /// Not in a WebSphere cluster: partition ids are learned from responses, so an id the
    /// table does not know yet is no lost session; it is hashed as before.
    pub fn settle(&self, pending: Pending) -> Decision {
        let r = self.router;
        match (pending.unusable, pending.orphan) {
            (Some(_), _) if r.sticky_force => Decision::Reject(Reject::StickyForce),
            (None, Some(_)) if r.sticky_force && r.style == SessionStyle::Tomcat => {
                Decision::Reject(Reject::StickyForce)
            }
            (Some((Target::Server(i), key)), _) => self.failover(i, key),
            (Some((Target::Domain, key)), _) => self.rebalance(key, Outcome::Failover),
            (None, Some(key)) => self.hash_fallback(key),
            (None, None) => self.new_session(),
        }
    }

    /// What an orphaned session is hashed on: the session id, or for WebSphere its first
    /// clone/partition token, so that every session of one partition fails over to the
    /// same server (which takes the partition over once) instead of scattering.
    fn hash_key<'s>(&self, sid: &'s [u8]) -> &'s [u8] {
        let sep = self.router.clone_separator;
        if self.router.style != SessionStyle::Websphere {
            return sid;
        }
        match sid.iter().position(|&b| b == sep) {
            Some(at) => sid[at + 1..].split(|&b| b == sep).next().unwrap_or(sid),
            None => sid,
        }
    }

    /// Where a session id's token points, or `None` when it names no server.
    fn by_session<'s>(&self, sid: &'s [u8]) -> Option<Lookup<'s>> {
        let r = self.router;
        match r.style {
            SessionStyle::Tomcat => {
                let token = &sid[sid.iter().position(|&b| b == b'.')? + 1..];
                if let Some(&i) = r.routes.get(token) {
                    return Some(self.sticky_target(i, sid, Outcome::RouteHit));
                }
                if r.domains.is_empty() {
                    return None;
                }
                // No server has this route: a domain name is a route too (mod_jk), and so
                // is a dotted route whose first part is a domain.
                let domain = if r.domains.contains_key(token) {
                    token
                } else {
                    let first = &token[..token.iter().position(|&b| b == b'.')?];
                    r.domains.contains_key(first).then_some(first)?
                };
                Some(self.domain_target(domain, sid))
            }
            SessionStyle::Websphere => {
                let sep = r.clone_separator;
                let list = &sid[sid.iter().position(|&b| b == sep)? + 1..];
                // Each token is a clone id or a partition id. Failover hashes on the token,
                // so a clone's or partition's sessions all move to one new owner.
                let mut known = list.split(|&b| b == sep).filter_map(|token| {
                    if let Some(&i) = r.clones.get(token) {
                        return Some((i, token, Outcome::RouteHit));
                    }
                    let tag = r.partitions.as_ref()?.get(token)?;
                    r.clone_tags
                        .get(&tag)
                        .map(|&i| (i, token, Outcome::PartitionHit))
                });
                let (first, key, outcome) = known.next()?;
                if self.sticky_ok(first) {
                    if let Some(d) = self.rescued(first, sid) {
                        return Some(Lookup::Hit(d));
                    }
                    return Some(Lookup::Hit(Decision::Route {
                        server: first,
                        outcome,
                    }));
                }
                // The later clones hold the session's replicas: the plug-in tries them in
                // order before anything else. Leaving the first clone is still a failover.
                Some(match known.find(|&(i, ..)| self.sticky_ok(i)) {
                    Some((server, ..)) => Lookup::Hit(Decision::Route {
                        server,
                        outcome: Outcome::Failover,
                    }),
                    None => Lookup::Unusable(Target::Server(first), key),
                })
            }
        }
    }

    /// The session names server `i`: use it if it can take it. `key` is what a failover
    /// would hash on.
    fn sticky_target<'s>(&self, i: usize, key: &'s [u8], outcome: Outcome) -> Lookup<'s> {
        if self.sticky_ok(i) {
            if let Some(d) = self.rescued(i, key) {
                return Lookup::Hit(d);
            }
            Lookup::Hit(Decision::Route { server: i, outcome })
        } else {
            Lookup::Unusable(Target::Server(i), key)
        }
    }

    /// `drain_rescue`: the session names draining server `i`, where it is known to be live
    /// nowhere (a stale cookie: the session table, or in a fleet every instance's, has not
    /// seen it within the timeout):
    /// it is balanced as a new session, and counted. `None` to go to `i` as usual.
    fn rescued(&self, i: usize, sid: &[u8]) -> Option<Decision> {
        let r = self.router;
        if !r.drain_rescue || self.slot(i).live.state() != ServerState::Draining {
            return None;
        }
        let table = r.sessions.as_ref()?;
        if !table.is_stale_on(table.key(r.base_id(sid)), i, self.now) {
            return None;
        }
        let d = self.new_session();
        match d {
            Decision::Route { .. } => {
                if !self.dry {
                    table.count_rescue(i);
                }
                Some(d)
            }
            Decision::Reject(_) => None,
        }
    }

    /// The session names a mod_jk domain: a server of it, chosen by hash.
    fn domain_target<'s>(&self, domain: &[u8], sid: &'s [u8]) -> Lookup<'s> {
        match self.in_domain(domain, sid) {
            Some(server) => Lookup::Hit(Decision::Route {
                server,
                outcome: Outcome::DomainHit,
            }),
            None => Lookup::Unusable(Target::Domain, sid),
        }
    }

    /// A member of `domain` by consistent hash of `sid`, among the members that take new
    /// work only (mod_jk: active ones): a draining member takes the sessions that name it,
    /// never a domain's.
    fn in_domain(&self, domain: &[u8], sid: &[u8]) -> Option<usize> {
        let member =
            |i: usize| self.slot(i).config.domain.as_deref().map(str::as_bytes) == Some(domain);
        // `peek` must accept what `ok` accepts, or the ring walk gives up early.
        let ok = |i: usize| member(i) && self.new_ok(i);
        let peek = |i: usize| member(i) && self.could_take_new(i);
        self.hash_pick(sid, ok, peek)
    }

    /// Server `i` cannot take its session: its `redirect`, else its domain, else the hash.
    /// The redirect may be draining (mod_jk: "used even if being disabled, thus offering
    /// hot standby"), not stopped or down.
    fn failover(&self, i: usize, sid: &[u8]) -> Decision {
        let cfg = &self.slot(i).config;
        let server = cfg.redirect.filter(|&r| self.sticky_ok(r)).or_else(|| {
            let domain = cfg.domain.as_deref().filter(|d| !d.is_empty())?;
            self.in_domain(domain.as_bytes(), sid)
        });
        match server {
            Some(server) => Decision::Route {
                server,
                outcome: Outcome::Failover,
            },
            None => self.rebalance(sid, Outcome::Failover),
        }
    }

    /// A session whose token names no server: consistent hash over servers taking new work.
    pub fn hash_fallback(&self, sid: &[u8]) -> Decision {
        if let Some(d) = self.preferred_server(Outcome::HashFallback) {
            return d;
        }
        self.rebalance(sid, Outcome::HashFallback)
    }

    /// The plugin's server, when it can take a new session.
    fn preferred_server(&self, outcome: Outcome) -> Option<Decision> {
        let server = self.preferred.filter(|&p| self.new_ok(p))?;
        Some(Decision::Route { server, outcome })
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
    pub fn new_session(&self) -> Decision {
        if let Some(d) = self.preferred_server(Outcome::NewSession) {
            return d;
        }
        let r = self.router;
        // A dry look walks from where the round robin stands without moving it.
        let mut at = r.cursor.load(Relaxed);
        let mut next = || match self.dry {
            false => r.cursor.fetch_add(1, Relaxed),
            true => {
                at += 1;
                at - 1
            }
        };
        // Slow start: a ramping server is taken by chance (its share of its weight);
        // when chance passes over every server, the plain pick stands.
        let ramped = |i: usize| self.dry || admits(r.ramp(&self.slot(i).live, self.now));
        let mut pick = |pool: &Pool| match r.balance {
            Balance::Weighted => {
                let mut weighted = |ok: &dyn Fn(usize) -> bool| {
                    pool.schedule
                        .pick(&mut next, |m| ok(pool.members[m]))
                        .map(|m| pool.members[m])
                };
                match r.slow_start_ms {
                    0 => weighted(&|i| self.new_ok(i)),
                    _ => weighted(&|i| ramped(i) && self.new_ok(i))
                        .or_else(|| weighted(&|i| self.new_ok(i))),
                }
            }
            Balance::LeastInflight => self.least_inflight(pool, next()),
            Balance::Sessions => self.fewest_sessions(pool, next()),
        };
        match pick(&r.primaries).or_else(|| pick(&r.backups)) {
            Some(server) => Decision::Route {
                server,
                outcome: Outcome::NewSession,
            },
            None => Decision::Reject(Reject::NoServer),
        }
    }

    /// Fewest live sessions per unit of weight, of two servers drawn at random from those
    /// that can take a new session (power of two choices: no herd on the emptiest while the
    /// counts catch up); ties by requests in flight. `k` draws in a dry look.
    fn fewest_sessions(&self, pool: &Pool, k: u64) -> Option<usize> {
        let Some(table) = self.router.sessions.as_ref() else {
            return self.least_inflight(pool, k);
        };
        let n = pool.members.len();
        if n == 0 {
            return None;
        }
        let draw = |salt: u64| match self.dry {
            true => (k.wrapping_mul(0x9E37_79B9).wrapping_add(salt) % n as u64) as usize,
            false => (chance() * n as f64) as usize % n,
        };
        // Two distinct candidates that could take it; the walk from a draw finds one.
        let from = |start: usize, skip: Option<usize>| {
            (0..n)
                .map(|step| pool.members[(start + step) % n])
                .find(|&i| Some(i) != skip && self.could_take_new(i))
        };
        let a = from(draw(0), None)?;
        let b = from(draw(1), Some(a)).unwrap_or(a);
        let load = |i: usize| {
            let live = &self.slot(i).live;
            let ramp = (self.router.ramp(live, self.now) * 1000.0) as u64;
            let weight = (live.weight() as u64 * ramp).max(1);
            (table.live_count(i), live.inflight(), weight)
        };
        let ((sa, fa, wa), (sb, fb, wb)) = (load(a), load(b));
        let (first, second) = match (sa * wb).cmp(&(sb * wa)) {
            std::cmp::Ordering::Less => (a, b),
            std::cmp::Ordering::Greater => (b, a),
            std::cmp::Ordering::Equal if fa * wb <= fb * wa => (a, b),
            std::cmp::Ordering::Equal => (b, a),
        };
        [first, second].into_iter().find(|&i| self.new_ok(i))
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
            // Per unit of weight, the ramp's share of it during a slow start (in thousandths).
            let ramp = (self.router.ramp(live, self.now) * 1000.0) as u64;
            let (load, weight) = (live.inflight(), (live.weight() as u64 * ramp).max(1));
            if best.is_none_or(|(_, bl, bw)| load * bw < bl * weight) {
                best = Some((i, load, weight));
            }
        }
        best.map(|(i, ..)| i).filter(|&i| self.new_ok(i))
    }
}
