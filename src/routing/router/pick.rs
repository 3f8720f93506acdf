//! The decision rules for one request, over one cluster router (DESIGN section 2).

use super::{ClusterRouter, Pool, ServerSlot};
use crate::config::{Balance, ServerState, SessionStyle};
use crate::routing::decision::{Decision, Outcome, Reject};
use crate::routing::session_id::MAX_SESSION_ID_LEN;
use crate::routing::tried::Tried;
use std::sync::atomic::Ordering::Relaxed;

/// One decision's view: the router, the servers to avoid, and the time.
pub(super) struct Pick<'a> {
    pub router: &'a ClusterRouter,
    pub tried: &'a Tried,
    pub now: u64,
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

    /// The decision for one session id candidate; remembers the first one that named no
    /// server, for the consistent-hash fallback.
    pub fn consider<'s>(&self, sid: &'s [u8], orphan: &mut Option<&'s [u8]>) -> Option<Decision> {
        if sid.len() > MAX_SESSION_ID_LEN {
            return None;
        }
        let decision = self.by_session(sid);
        if decision.is_none() && orphan.is_none() {
            *orphan = Some(self.hash_key(sid));
        }
        decision
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

    /// The decision for a session id, or `None` when its token names no server.
    fn by_session(&self, sid: &[u8]) -> Option<Decision> {
        let r = self.router;
        match r.style {
            SessionStyle::Tomcat => {
                let token = &sid[sid.iter().position(|&b| b == b'.')? + 1..];
                if let Some(&i) = r.routes.get(token) {
                    return Some(self.sticky_target(i, sid, Outcome::RouteHit));
                }
                let domain = &token[..token.iter().position(|&b| b == b'.')?];
                r.domains
                    .contains_key(domain)
                    .then(|| self.domain_target(domain, sid))
            }
            SessionStyle::Websphere => {
                let sep = r.clone_separator;
                let clones = &sid[sid.iter().position(|&b| b == sep)? + 1..];
                // Each token is a clone id or a partition id, tried in order.
                clones.split(|&b| b == sep).find_map(|token| {
                    // Failover hashes on the token: one new owner per clone or partition.
                    if let Some(&i) = r.clones.get(token) {
                        return Some(self.sticky_target(i, token, Outcome::RouteHit));
                    }
                    let tag = r.partitions.as_ref()?.get(token)?;
                    let &i = r.clone_tags.get(&tag)?;
                    Some(self.sticky_target(i, token, Outcome::PartitionHit))
                })
            }
        }
    }

    /// The session names server `i`: use it, or fail over (or refuse, with `sticky_force`).
    /// `key` is what a failover hashes on.
    fn sticky_target(&self, i: usize, key: &[u8], outcome: Outcome) -> Decision {
        if self.sticky_ok(i) {
            return Decision::Route { server: i, outcome };
        }
        if self.router.sticky_force {
            return Decision::Reject(Reject::StickyForce);
        }
        self.failover(i, key)
    }

    /// The session names a mod_jk domain: any server of it, chosen by hash.
    fn domain_target(&self, domain: &[u8], sid: &[u8]) -> Decision {
        let in_domain =
            |i: usize| self.slot(i).config.domain.as_deref().map(str::as_bytes) == Some(domain);
        let ok = |i: usize| in_domain(i) && self.sticky_ok(i);
        let peek = |i: usize| in_domain(i) && self.could_take_new(i);
        match self.hash_pick(sid, ok, peek) {
            Some(server) => Decision::Route {
                server,
                outcome: Outcome::DomainHit,
            },
            None if self.router.sticky_force => Decision::Reject(Reject::StickyForce),
            None => self.rebalance(sid, Outcome::Failover),
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
    pub fn hash_fallback(&self, sid: &[u8]) -> Decision {
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
    pub fn new_session(&self) -> Decision {
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
