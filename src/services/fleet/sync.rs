//! The fleet's sync task: publishes this instance's changes, applies the others', and
//! reconnects (republishing what it holds) whenever Redis comes back.
//!
//! One session, while Redis answers:
//! 1. read the fleet's epoch token (set it when Redis holds none: it started empty);
//! 2. note the event stream's last id, so nothing published from now on is missed;
//! 3. publish what changed here while disconnected (newer versions win in Redis);
//! 4. load everything Redis holds (operators' changes, partition tables) and apply it;
//! 5. publish what this instance holds and Redis lacks (Redis restarted empty, or this
//!    instance learned it before joining): partitions at version 0, so they never override
//!    anything, operators' changes with the versions they were made with;
//! 6. then, every 100 ms, publish local changes; apply the stream's events as a reader task
//!    delivers them; every second, write a heartbeat and check the epoch token.
//!
//! Any link failure ends the session; local changes keep being collected (bounded by the
//! number of distinct partitions) and the next session publishes them.

use super::apply::{self, Applied};
use super::conflict::Change;
use super::keys;
use super::publish::Pending;
use super::redis_io::{data_ok, Event, Failure, Redis};
use super::rescue::RescueWatch;
use super::{lock, metrics, start, FleetSync, Peer};
use crate::base::every::Every;
use crate::routing::{now_ms, wall_ms};
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::time::Duration;
use tokio::sync::mpsc;

const TICK: Duration = Duration::from_millis(100);
/// Ticks between heartbeats (and epoch checks).
const HEARTBEAT_TICKS: u32 = 10;
/// Events one stream read returns at most.
const READ_COUNT: usize = 1000;
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// A heartbeat at most this old is an instance alive, which takes its share of the bounds
/// the fleet shares (five heartbeats).
const ALIVE: Duration = Duration::from_secs(5);
/// A heartbeat this old is an instance that stopped: it leaves the list (and Redis).
const FORGET_PEER: Duration = Duration::from_secs(600);

static STILL_DOWN: Every = Every::new(30_000);

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

impl FleetSync {
    /// Reads the fleet's heartbeats (noticing another process that wrote this instance's
    /// since its last beat), writes this instance's, and forgets instances silent for
    /// [`FORGET_PEER`].
    async fn heartbeat(&self, redis: &mut Redis) -> Result<(), Failure> {
        let keys = &self.fleet.keys;
        let snapshot = self.control.snapshot().load_full();
        let held: usize = snapshot
            .clusters
            .iter()
            .filter_map(|r| r.partitions().map(|t| t.len()))
            .sum();
        let instances = keys.instances();
        let me = self.fleet.instance();
        let beats = data_ok(redis.hash(&instances).await, "a heartbeat")?.unwrap_or_default();
        let now = wall_ms();
        let mut peers = Vec::new();
        let mut gone = Vec::new();
        let mut mine = None;
        for (name, value) in beats {
            let beat = keys::Beat::parse(&value);
            if name == me.as_bytes() {
                mine = Some(beat.clone());
            } else if now.saturating_sub(beat.ms) > FORGET_PEER.as_millis() as u64 {
                gone.push(name);
                continue;
            }
            peers.push(Peer {
                name: String::from_utf8_lossy(&name).into_owned(),
                seen_ms: beat.ms,
                partitions: beat.partitions,
            });
        }
        self.watch_name(mine.as_ref());
        let beat = keys::Beat {
            ms: now,
            partitions: held as u64,
            pid: std::process::id(),
            origin: self.fleet.origin().to_string(),
        };
        data_ok(
            redis.set_field(&instances, me, &beat.encode()).await,
            "a heartbeat",
        )?;
        data_ok(redis.del_fields(&instances, &gone).await, "a heartbeat")?;
        if !peers.iter().any(|p| p.name == me) {
            peers.push(Peer {
                name: me.to_string(),
                seen_ms: now,
                partitions: held as u64,
            });
        }
        peers.sort_by(|a, b| a.name.cmp(&b.name));
        let alive = peers
            .iter()
            .filter(|p| now.saturating_sub(p.seen_ms) <= ALIVE.as_millis() as u64)
            .count();
        *lock(&self.fleet.peers) = peers;
        if crate::routing::set_fleet_size(alive as u32) {
            log::info!("fleet: {alive} instances alive; bounds shared by the fleet (max_inflight_per: fleet) are divided by {alive}");
            for router in snapshot.clusters.iter() {
                router.share_bounds();
            }
        }
        Ok(())
    }

    /// Says so when another live process keeps writing this instance's heartbeat.
    fn watch_name(&self, found: Option<&keys::Beat>) {
        let change = lock(&self.fleet.clash).observe(found, self.fleet.origin(), now_ms());
        let me = self.fleet.instance();
        match change {
            Some(Change::Began(other)) => {
                metrics::NAME_CONFLICT.set(1);
                log::error!(
                    "fleet: another tether (pid {} on this or another host, origin {}) runs with this instance's name {me} on {} {{{}}}; both still apply each other's changes, but status, heartbeats and \"changed by\" mix them up: give each instance its own state_dir or shared_state.instance",
                    other.pid,
                    other.origin,
                    self.fleet.settings.url,
                    self.fleet.settings.key_prefix
                );
            }
            Some(Change::Ended(other)) => {
                metrics::NAME_CONFLICT.set(0);
                log::warn!(
                    "fleet: the other tether named {me} (pid {}) has stopped writing its heartbeat",
                    other.pid
                );
            }
            None => {}
        }
    }

    /// Tells every partition table whether the fleet feeds it now: a request waits for a
    /// partition the fleet may know only while it does (`routing/partitions/feed.rs`).
    fn feed_tables(&self, fed: bool) {
        for r in self.control.snapshot().load().clusters.iter() {
            if let Some(t) = r.partitions() {
                t.feed().set_fed(fed);
            }
        }
    }

    /// Applies a batch of events other instances published.
    fn apply_events(&self, events: Vec<Event>) {
        let snapshot = self.control.snapshot().load_full();
        let me = self.fleet.instance();
        let origin = self.fleet.origin();
        // This process's own events, told by their origin. Events without one come from
        // tether versions before origins, which named the writer only.
        let own = |ev: &Event| match ev.origin.as_str() {
            "" => match ev.kind.as_str() {
                "down" => ev.value == me.as_bytes(),
                _ => ev.value.rsplit(|&b| b == b'|').next() == Some(me.as_bytes()),
            },
            o => o == origin,
        };
        let now = wall_ms();
        for ev in events {
            if own(&ev) {
                continue;
            }
            let (kind, applied) = match ev.kind.as_str() {
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
            // From when the change was made (its version, a clock in ms), not when it was
            // published: that includes the wait for the publish tick. Republished entries
            // (version 0) say nothing about lag.
            let made = match kind {
                "hint" => ev.at_ms,
                _ => keys::version_of(&ev.value).unwrap_or(0),
            };
            if made > 0 && applied != Applied::Garbage {
                let lag = now.saturating_sub(made);
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
        let token = format!(
            "{}-{}-{}",
            self.fleet.instance(),
            self.fleet.origin(),
            wall_ms()
        );
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
                self.fleet.instance(),
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
        self.feed_tables(true);
        // Room for bursts while a flush waits on Redis: the reader keeps reading meanwhile.
        let (tx, mut rx) = mpsc::channel(64);
        let reading = tokio::spawn(read_events(reader, keys.clone(), after, tx));
        let _stop_reading = AbortOnDrop(reading);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks = 0u32;
        let mut rescue_watch = RescueWatch::default();
        loop {
            tokio::select! {
                _ = shutdown.changed() => return End::Shutdown,
                batch = rx.recv() => match batch {
                    Some(Ok(events)) => self.apply_events(events),
                    Some(Err(e)) => return lost(e, true),
                    None => return lost("the stream reader stopped", true),
                },
                _ = tick.tick() => {
                    // A reload may have made new tables.
                    self.feed_tables(true);
                    self.collect(p);
                    if let Err(e) = self.flush(&mut redis, p).await {
                        return lost(e, true);
                    }
                    ticks += 1;
                    if ticks.is_multiple_of(HEARTBEAT_TICKS) {
                        let counted = self.sync_sessions(&mut redis).await;
                        let rescue = self.sync_rescue(&mut redis, &mut rescue_watch).await;
                        for (what, r) in [("session counts", counted), ("drain rescue", rescue)] {
                            match r {
                                Ok(()) => {}
                                Err(e @ Failure::Link(_)) => return lost(e, true),
                                Err(Failure::Data(why)) => log::warn!("fleet: {what}: {why}"),
                            }
                        }
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
                    self.feed_tables(false);
                    return;
                }
                End::Lost { why, synced } => {
                    self.fleet.set_up(false);
                    self.feed_tables(false);
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
