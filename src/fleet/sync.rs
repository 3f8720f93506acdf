//! The fleet's sync task: publishes this instance's changes, applies the others', and
//! reconnects (republishing what it holds) whenever Redis comes back.
//!
//! One session, while Redis answers:
//! 1. read the fleet's epoch token (set it when Redis holds none: it started empty);
//! 2. note the event stream's last id, so nothing published from now on is missed;
//! 3. publish what changed here while disconnected (newer versions win in Redis);
//! 4. load everything Redis holds (operators' changes, partition tables) and apply it;
//! 5. publish what this instance holds and Redis lacks (Redis restarted empty, or this
//!    instance learned it before joining), at version 0, so it never overrides anything;
//! 6. then, every 100 ms, publish local changes; apply the stream's events as a reader task
//!    delivers them; every second, write a heartbeat and check the epoch token.
//!
//! Any link failure ends the session; local changes keep being collected (bounded by the
//! number of distinct partitions) and the next session publishes them.

use super::apply::{self, Applied};
use super::keys::{self, PartitionValue, ServerValue};
use super::redis_io::{Event, Failure, Redis};
use super::{lock, metrics, start, Fleet, Peer};
use crate::control::Control;
use crate::logging::Every;
use crate::routing::{now_ms, wall_ms};
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const TICK: Duration = Duration::from_millis(100);
/// Ticks between heartbeats (and epoch checks).
const HEARTBEAT_TICKS: u32 = 10;
/// Events one stream read returns at most.
const READ_COUNT: usize = 1000;
const MAX_BACKOFF: Duration = Duration::from_secs(2);

static DATA_ERRORS: Every = Every::new(10_000);
static STILL_DOWN: Every = Every::new(30_000);

pub struct FleetSync {
    fleet: Arc<Fleet>,
    control: Arc<Control>,
}

/// Local changes not yet published.
#[derive(Default)]
struct Pending {
    /// Cluster → partition key → (clone id, learned at, ms since the epoch).
    partitions: HashMap<String, HashMap<u64, (String, u64)>>,
    servers: HashMap<String, ServerValue>,
    hints: Vec<(String, String)>,
}

enum End {
    Shutdown,
    /// The session ended; `synced` when it had been in sync.
    Lost {
        why: String,
        synced: bool,
    },
}

fn lost(why: impl std::fmt::Display, synced: bool) -> End {
    End::Lost {
        why: why.to_string(),
        synced,
    }
}

/// `r`, with an error that leaves the connection usable logged and turned into `None`.
fn data_ok<T>(r: Result<T, Failure>, what: &str) -> Result<Option<T>, Failure> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(Failure::Data(e)) => {
            data_error(what, &e);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A Redis error that leaves the connection usable is logged and skipped.
pub(super) fn data_error(what: &str, e: &str) {
    if let Some(n) = DATA_ERRORS.due(now_ms()) {
        log::error!("fleet: Redis refused {what}: {e} ({n} such errors in the last 10 s)");
    }
}

impl FleetSync {
    pub fn new(fleet: Arc<Fleet>, control: Arc<Control>) -> FleetSync {
        FleetSync { fleet, control }
    }

    /// Moves this instance's new changes into `p`.
    fn collect(&self, p: &mut Pending) {
        let snapshot = self.control.snapshot().load_full();
        for router in snapshot.clusters.iter().filter(|r| r.is_websphere()) {
            let Some(table) = router.partitions() else {
                continue;
            };
            // A reload may have built a new table (another size): record on it too.
            table.record_changes();
            let (changes, dropped) = table.take_changes();
            if dropped > 0 {
                log::warn!(
                    "fleet: cluster {}: {dropped} partition changes came faster than they could be published; they are published with the whole table at the next reconnect",
                    router.name
                );
            }
            if changes.is_empty() {
                continue;
            }
            let entries = p.partitions.entry(router.name.clone()).or_default();
            for c in changes {
                if let Some(id) = router.clone_id_of_tag(c.clone) {
                    entries.insert(c.key, (id.to_string(), c.at_ms));
                }
            }
        }
        for (field, value) in lock(&self.fleet.outbox).drain(..) {
            p.servers.insert(field, value);
        }
        let hints = self.fleet.hints.take_outbox();
        p.hints.extend(hints);
        p.hints.truncate(1024);
    }

    /// Applies what Redis kept instead of a value this instance published.
    fn refused(&self, kind: &str, cluster: &str, field: &str, newer: &[u8]) {
        metrics::REJECTED.with_label_values(&["stale"]).inc();
        let applied = match kind {
            "s" => apply::server(&self.fleet, &self.control, field.as_bytes(), newer),
            _ => {
                let snapshot = self.control.snapshot().load_full();
                match snapshot.clusters.iter().find(|r| r.name == cluster) {
                    Some(router) => apply::partition(&self.fleet, router, field.as_bytes(), newer),
                    None => Applied::Unknown,
                }
            }
        };
        applied.count(if kind == "s" { "server" } else { "partition" });
    }

    /// Publishes `pairs` to `hash`; a value Redis refuses is replaced here by its newer one.
    async fn publish(
        &self,
        redis: &mut Redis,
        (hash, kind, cluster): (&str, &str, &str),
        pairs: &[(String, String)],
    ) -> Result<(), Failure> {
        if pairs.is_empty() {
            return Ok(());
        }
        let keys = &self.fleet.keys;
        match redis
            .publish(keys, hash, kind, cluster, wall_ms(), pairs)
            .await
        {
            Ok(answers) => {
                let label = if kind == "s" { "server" } else { "partition" };
                for ((field, _), answer) in pairs.iter().zip(answers) {
                    match answer {
                        None => metrics::PUBLISHED.with_label_values(&[label]).inc(),
                        Some(newer) => self.refused(kind, cluster, field, &newer),
                    }
                }
                Ok(())
            }
            Err(Failure::Data(e)) => {
                data_error(&format!("an update of {hash}"), &e);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Publishes everything in `p`; what a link failure interrupts stays in `p`.
    async fn flush(&self, redis: &mut Redis, p: &mut Pending) -> Result<(), Failure> {
        let keys = &self.fleet.keys;
        if !p.servers.is_empty() {
            let pairs: Vec<(String, String)> = p
                .servers
                .iter()
                .map(|(f, v)| (f.clone(), v.encode()))
                .collect();
            self.publish(redis, (&keys.servers(), "s", ""), &pairs)
                .await?;
            p.servers.clear();
        }
        let clusters: Vec<String> = p.partitions.keys().cloned().collect();
        for cluster in clusters {
            let entries = &p.partitions[&cluster];
            let pairs: Vec<(String, String)> = entries
                .iter()
                .map(|(&key, (clone, at))| {
                    let value = PartitionValue {
                        version: self.fleet.stamp(*at),
                        clone: clone.clone(),
                        instance: self.fleet.instance().to_string(),
                    };
                    (keys::partition_field(key), value.encode())
                })
                .collect();
            self.publish(redis, (&keys.partitions(&cluster), "p", &cluster), &pairs)
                .await?;
            p.partitions.remove(&cluster);
        }
        while let Some((cluster, server)) = p.hints.first().cloned() {
            let instance = self.fleet.instance();
            match redis
                .event(keys, "down", &cluster, &server, instance, wall_ms())
                .await
            {
                Ok(()) => metrics::PUBLISHED.with_label_values(&["hint"]).inc(),
                Err(Failure::Data(e)) => data_error("a health hint", &e),
                Err(e) => return Err(e),
            }
            p.hints.remove(0);
        }
        Ok(())
    }

    /// Publishes, at version 0, what this instance holds and Redis lacks (`held`: the
    /// partition keys Redis has, per cluster), and its operators' changes.
    async fn republish(
        &self,
        redis: &mut Redis,
        held: &[(String, HashSet<u64>)],
    ) -> Result<usize, Failure> {
        let keys = &self.fleet.keys;
        let snapshot = self.control.snapshot().load_full();
        let mut n = 0;
        for (cluster, in_redis) in held {
            let Some(router) = snapshot.clusters.iter().find(|r| &r.name == cluster) else {
                continue;
            };
            let Some(table) = router.partitions() else {
                continue;
            };
            let pairs: Vec<(String, String)> = table
                .entries_to_save(true)
                .into_iter()
                .filter(|e| !in_redis.contains(&e.key))
                .filter_map(|e| {
                    let value = PartitionValue {
                        version: 0,
                        clone: router.clone_id_of_tag(e.clone)?.to_string(),
                        instance: self.fleet.instance().to_string(),
                    };
                    Some((keys::partition_field(e.key), value.encode()))
                })
                .collect();
            n += pairs.len();
            self.publish(redis, (&keys.partitions(cluster), "p", cluster), &pairs)
                .await?;
        }
        // Operators' changes held here: with their versions when known, else version 0.
        let known = lock(&self.fleet.servers).clone();
        let mut pairs = Vec::new();
        for router in snapshot.clusters.iter() {
            for s in router.servers() {
                let field = keys::server_field(&router.name, &s.config.name);
                let value = match known.get(&field) {
                    Some(v) => v.clone(),
                    None if s.live.is_overridden() => ServerValue {
                        version: 0,
                        state: Some(s.live.state()),
                        weight: s.live.weight(),
                        instance: self.fleet.instance().to_string(),
                    },
                    None => continue,
                };
                pairs.push((field, value.encode()));
            }
        }
        n += pairs.len();
        self.publish(redis, (&keys.servers(), "s", ""), &pairs)
            .await?;
        Ok(n)
    }

    /// Writes this instance's heartbeat and reads the others'.
    async fn heartbeat(&self, redis: &mut Redis) -> Result<(), Failure> {
        let keys = &self.fleet.keys;
        let snapshot = self.control.snapshot().load_full();
        let held: usize = snapshot
            .clusters
            .iter()
            .filter_map(|r| r.partitions().map(|t| t.len()))
            .sum();
        let beat = format!("{}|{held}|{}", wall_ms(), std::process::id());
        let instances = keys.instances();
        let me = self.fleet.instance();
        data_ok(redis.set_field(&instances, me, &beat).await, "a heartbeat")?;
        let beats = data_ok(redis.hash(&instances).await, "a heartbeat")?;
        let mut peers = Vec::new();
        for (name, value) in beats.unwrap_or_default() {
            let value = String::from_utf8_lossy(&value);
            let mut parts = value.split('|');
            let seen_ms = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
            let partitions = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
            peers.push(Peer {
                name: String::from_utf8_lossy(&name).into_owned(),
                seen_ms,
                partitions,
            });
        }
        peers.sort_by(|a, b| a.name.cmp(&b.name));
        *lock(&self.fleet.peers) = peers;
        Ok(())
    }

    /// Applies a batch of events other instances published.
    fn apply_events(&self, events: Vec<Event>) {
        let snapshot = self.control.snapshot().load_full();
        let me = self.fleet.instance();
        let own = |v: &[u8]| v.rsplit(|&b| b == b'|').next() == Some(me.as_bytes());
        let now = wall_ms();
        for ev in events {
            let (kind, applied) = match ev.kind.as_str() {
                "p" if own(&ev.value) => continue,
                "s" if own(&ev.value) => continue,
                "down" if ev.value == me.as_bytes() => continue,
                "p" => match snapshot.clusters.iter().find(|r| r.name == ev.cluster) {
                    Some(r) => (
                        "partition",
                        apply::partition(&self.fleet, r, ev.field.as_bytes(), &ev.value),
                    ),
                    None => ("partition", Applied::Unknown),
                },
                "s" => (
                    "server",
                    apply::server(&self.fleet, &self.control, ev.field.as_bytes(), &ev.value),
                ),
                "down" => {
                    let from = String::from_utf8_lossy(&ev.value);
                    log::info!(
                        "fleet: {from} marked {}/{} down; checking it here now",
                        ev.cluster,
                        ev.field
                    );
                    self.fleet.hints.received(&ev.cluster, &ev.field);
                    ("hint", Applied::Changed)
                }
                _ => ("event", Applied::Garbage),
            };
            applied.count(kind);
            if ev.at_ms > 0 && applied != Applied::Garbage {
                let lag = now.saturating_sub(ev.at_ms);
                self.fleet
                    .lag_ms
                    .store(lag, std::sync::atomic::Ordering::Relaxed);
                metrics::LAG.set(lag as f64 / 1000.0);
            }
        }
    }

    /// One session with Redis, until it fails or tether stops.
    async fn session(&self, shutdown: &mut ShutdownWatch, p: &mut Pending) -> End {
        let s = &self.fleet.settings;
        let keys = &self.fleet.keys;
        let token = format!("{}-{}-{}", s.instance, std::process::id(), wall_ms());
        let setup = async {
            let mut redis = Redis::connect(s).await?;
            let (epoch, fresh) = redis.epoch(keys, &token).await?;
            if fresh {
                log::info!(
                    "fleet: {} holds no state under {{{}}}: publishing this instance's",
                    s.url,
                    s.key_prefix
                );
            }
            let after = redis.last_id(keys).await?;
            self.collect(p);
            self.flush(&mut redis, p).await?;
            let (servers, partitions, held) =
                start::load_with(&mut redis, &self.fleet, &self.control).await?;
            let republished = self.republish(&mut redis, &held).await?;
            self.heartbeat(&mut redis).await?;
            let reader = Redis::connect_reader(s).await?;
            log::info!(
                "fleet: instance {} in sync with {} (applied {servers} server changes and {partitions} partitions, published {republished} entries Redis lacked)",
                s.instance,
                s.url
            );
            Ok::<_, Failure>((redis, reader, epoch, after))
        };
        let (mut redis, reader, epoch, after) = tokio::select! {
            r = setup => match r {
                Ok(x) => x,
                Err(e) => return lost(e, false),
            },
            _ = shutdown.changed() => return End::Shutdown,
        };
        self.fleet.set_up(true);
        let (tx, mut rx) = mpsc::channel(4);
        let reading = tokio::spawn(read_events(reader, keys.clone(), after, tx));
        let _stop_reading = AbortOnDrop(reading);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks = 0u32;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return End::Shutdown,
                batch = rx.recv() => match batch {
                    Some(Ok(events)) => self.apply_events(events),
                    Some(Err(e)) => return lost(e, true),
                    None => return lost("the stream reader stopped", true),
                },
                _ = tick.tick() => {
                    self.collect(p);
                    if let Err(e) = self.flush(&mut redis, p).await {
                        return lost(e, true);
                    }
                    ticks += 1;
                    if ticks.is_multiple_of(HEARTBEAT_TICKS) {
                        if let Err(e) = self.heartbeat(&mut redis).await {
                            return lost(e, true);
                        }
                        match redis.epoch(keys, &token).await {
                            Ok((now, fresh)) if fresh || now != epoch => {
                                return lost("Redis lost the fleet's state (restarted empty or flushed)", true)
                            }
                            Ok(_) => {}
                            Err(e) => return lost(e, true),
                        }
                    }
                }
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads the event stream from `after` on and hands batches to the session. A full batch
/// whose successor events may have been trimmed away (this instance fell more than the
/// stream's length behind) ends the session, so the next one loads everything.
async fn read_events(
    mut reader: Redis,
    keys: keys::Keys,
    mut after: String,
    tx: mpsc::Sender<Result<Vec<Event>, Failure>>,
) {
    loop {
        let events = match reader.read(&keys, &after, READ_COUNT).await {
            Ok(e) => e,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        let Some(last) = events.last() else {
            continue;
        };
        if events.len() == READ_COUNT {
            let first = reader.first_id(&keys).await.unwrap_or_default();
            if keys::stream_id(&first) > keys::stream_id(&after) && after != "0-0" {
                let gap = Failure::Link("fell behind the event stream".into());
                let _ = tx.send(Err(gap)).await;
                return;
            }
        }
        after = last.id.clone();
        if tx.send(Ok(events)).await.is_err() {
            return;
        }
    }
}

#[async_trait]
impl BackgroundService for FleetSync {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut pending = Pending::default();
        let mut backoff = TICK;
        let mut was_up = true;
        loop {
            match self.session(&mut shutdown, &mut pending).await {
                End::Shutdown => {
                    self.fleet.set_up(false);
                    return;
                }
                End::Lost { why, synced } => {
                    self.fleet.set_up(false);
                    metrics::RECONNECTS.inc();
                    if synced {
                        backoff = TICK;
                    }
                    if synced || was_up {
                        log::warn!(
                            "fleet: {} unreachable ({why}); requests go on with this instance's state; reconnecting",
                            self.fleet.settings.url
                        );
                    } else if STILL_DOWN.due(now_ms()).is_some() {
                        log::warn!(
                            "fleet: {} still unreachable ({why})",
                            self.fleet.settings.url
                        );
                    }
                    was_up = false;
                }
            }
            // Wait before trying again, still collecting this instance's changes.
            let until = tokio::time::Instant::now() + backoff;
            while tokio::time::Instant::now() < until {
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep(TICK) => self.collect(&mut pending),
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}
