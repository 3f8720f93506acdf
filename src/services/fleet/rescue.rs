//! `drain_rescue` in a fleet: what every instance knows of the sessions live on
//! a draining server, shared through Redis, so that a stale cookie is balanced as a new
//! session only when no instance holds it live.
//!
//! Every [`PUBLISH_EVERY`] (every second for a draining server) each instance writes, per
//! server of a cluster with `drain_rescue`, a Bloom filter of the sessions its table holds
//! live there ([`SeenFilter`]), kept in Redis for one `session_timeout` past its last
//! write: a process that stops leaves its knowledge behind for as long as its sessions may
//! live. Every second it reads every instance's filters of each draining server and hands
//! them to the cluster's session table, once the fleet's knowledge is complete:
//! - the fleet has watched for a whole timeout: `{p}:watching` (set when Redis has none,
//!   so a Redis that lost its data starts the wait again) is older than the timeout and
//!   one publishing period;
//! - the server has been draining here for one publishing period and more, so every live
//!   instance has published a filter made since it began (a session made on it just
//!   before is in one);
//! - no instance's table evicted a live session within a timeout.
//!
//! Otherwise, and whenever Redis is gone or this task is behind, a stale cookie goes to its
//! draining server, as without `drain_rescue`. What is lost: the sessions a process made
//! in its last [`PUBLISH_EVERY`] before it died without a drain, and those of an instance
//! cut off from Redis for longer than a timeout.

use super::keys::Keys;
use super::redis_io::{Failure, Redis};
use super::FleetSync;
use crate::config::ServerState;
use crate::routing::fleet_seen::{FleetSeen, SeenFilter};
use crate::routing::{now_ms, wall_ms};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// How often a server's filters are written while it is not draining.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(5);
/// Room for the clocks of the instances and the tick of this task.
const MARGIN_MS: u64 = 2_000;

/// What the task remembers between ticks.
#[derive(Default)]
pub(super) struct RescueWatch {
    /// When this instance first saw each draining `(cluster, server)` draining.
    draining_since: HashMap<(String, String), u64>,
    last_publish_ms: Option<u64>,
}

impl FleetSync {
    /// Publishes this instance's filters and reads the fleet's for draining servers.
    pub(super) async fn sync_rescue(
        &self,
        redis: &mut Redis,
        watch: &mut RescueWatch,
    ) -> Result<(), Failure> {
        let snapshot = self.control.snapshot().load_full();
        if !snapshot.clusters.iter().any(|r| r.drain_rescue()) {
            return Ok(());
        }
        let keys = &self.fleet.keys;
        let now = now_ms();
        let publish_all = watch
            .last_publish_ms
            .is_none_or(|t| now.saturating_sub(t) >= PUBLISH_EVERY.as_millis() as u64);
        let watching_ms = wall_ms().saturating_sub(redis.watching_since(keys, wall_ms()).await?);
        let period = PUBLISH_EVERY.as_millis() as u64 + MARGIN_MS;
        let mut draining_now = HashSet::new();
        for router in snapshot.clusters.iter().filter(|r| r.drain_rescue()) {
            let Some(table) = router.live_sessions() else {
                continue;
            };
            let draining: Vec<bool> = router
                .servers()
                .iter()
                .map(|s| s.live.state() == ServerState::Draining)
                .collect();
            if !publish_all && !draining.contains(&true) {
                table.set_fleet_seen(None);
                continue;
            }
            let timeout_ms = table.timeout_s() * 1000;
            let live = table.fingerprints();
            let incomplete = table.evicted_within_timeout();
            let holder = format!("{}-{}", self.fleet.origin(), table.id());
            let ttl_ms = timeout_ms + 2 * PUBLISH_EVERY.as_millis() as u64;
            let mut known = Vec::with_capacity(draining.len());
            for (i, slot) in router.servers().iter().enumerate() {
                let server = slot.config.name.as_str();
                let cluster = router.name.as_str();
                if publish_all || draining[i] {
                    let fps = live.get(i).map_or(&[][..], |v| v.as_slice());
                    let bytes = SeenFilter::of(fps, incomplete).encode();
                    let (key, holders) = (
                        keys.seen(cluster, server, &holder),
                        keys.seen_holders(cluster, server),
                    );
                    redis
                        .publish_seen(&key, &holders, &holder, &bytes, ttl_ms)
                        .await?;
                }
                if !draining[i] {
                    known.push(None);
                    continue;
                }
                let id = (cluster.to_string(), server.to_string());
                let since = *watch.draining_since.entry(id.clone()).or_insert(now);
                draining_now.insert(id);
                let ready =
                    watching_ms >= timeout_ms + period && now.saturating_sub(since) >= period;
                known.push(match ready {
                    true => self.read_filters(redis, cluster, server).await?,
                    false => None,
                });
            }
            table.set_fleet_seen(Some(FleetSeen::new(known, now_ms())));
        }
        watch.draining_since.retain(|k, _| draining_now.contains(k));
        if publish_all {
            watch.last_publish_ms = Some(now);
        }
        Ok(())
    }

    /// Every instance's filter of `cluster/server`; `None` when one is unreadable or says
    /// its table does not know all its sessions.
    async fn read_filters(
        &self,
        redis: &mut Redis,
        cluster: &str,
        server: &str,
    ) -> Result<Option<Vec<SeenFilter>>, Failure> {
        let keys = &self.fleet.keys;
        let holders = keys.seen_holders(cluster, server);
        let found = redis
            .read_seen(&holders, |h| keys.seen(cluster, server, h))
            .await?;
        let mut filters = Vec::with_capacity(found.len());
        for bytes in found {
            match SeenFilter::decode(&bytes) {
                Some(f) if !f.incomplete() => filters.push(f),
                Some(_) => return Ok(None),
                None => {
                    log::warn!("fleet: an unreadable session filter of {cluster}/{server}; no drain rescue for it");
                    return Ok(None);
                }
            }
        }
        Ok(Some(filters))
    }
}

/// The Redis calls of the fleet's session filters.
impl Redis {
    /// Since when (ms since the Unix epoch) Redis has held the fleet's session filters:
    /// `now_ms` if it held no such mark (it is new, or lost its data).
    pub async fn watching_since(&mut self, keys: &Keys, now_ms: u64) -> Result<u64, Failure> {
        let mut set = redis::cmd("SET");
        set.arg(keys.watching()).arg(now_ms).arg("NX");
        if self.run::<Option<String>>(&set).await?.is_some() {
            return Ok(now_ms);
        }
        let mut get = redis::cmd("GET");
        get.arg(keys.watching());
        match self.run::<Option<String>>(&get).await {
            // Garbage reads as "just now": the wait starts again.
            Ok(v) => Ok(v.and_then(|v| v.parse().ok()).unwrap_or(now_ms)),
            Err(Failure::Data(_)) => Ok(now_ms),
            Err(e) => Err(e),
        }
    }

    /// Writes `holder`'s session filter at `key` for `ttl_ms`, and names it in `holders`.
    pub async fn publish_seen(
        &mut self,
        key: &str,
        holders: &str,
        holder: &str,
        filter: &[u8],
        ttl_ms: u64,
    ) -> Result<(), Failure> {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(key)
            .arg(filter)
            .arg("PX")
            .arg(ttl_ms)
            .ignore()
            .cmd("SADD")
            .arg(holders)
            .arg(holder)
            .ignore()
            .cmd("PEXPIRE")
            .arg(holders)
            .arg(ttl_ms)
            .ignore();
        self.run_pipe(&pipe).await
    }

    /// The filters of the holders named in `holders` (`key_of` names a holder's filter);
    /// holders whose filter expired are taken out of the set.
    pub async fn read_seen(
        &mut self,
        holders: &str,
        key_of: impl Fn(&str) -> String,
    ) -> Result<Vec<Vec<u8>>, Failure> {
        let mut members = redis::cmd("SMEMBERS");
        members.arg(holders);
        let names: Vec<String> = self.run(&members).await?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut get = redis::cmd("MGET");
        for n in &names {
            get.arg(key_of(n));
        }
        let values: Vec<Option<Vec<u8>>> = self.run(&get).await?;
        let gone: Vec<&String> = names
            .iter()
            .zip(&values)
            .filter(|(_, v)| v.is_none())
            .map(|(n, _)| n)
            .collect();
        if !gone.is_empty() {
            let mut rem = redis::cmd("SREM");
            rem.arg(holders).arg(gone);
            self.run::<u64>(&rem).await?;
        }
        Ok(values.into_iter().flatten().collect())
    }
}
