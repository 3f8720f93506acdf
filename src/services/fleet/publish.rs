//! Publishing this instance's changes: collecting them from the partition tables and the
//! admin API, writing them to Redis (newer versions win there), and taking Redis's newer
//! value where ours lost. Part of the sync task (`sync.rs`).

use super::apply::{self, Applied};
use super::keys::{self, PartitionValue, ServerValue};
use super::redis_io::{data_error, Failure, Redis};
use super::FleetSync;
use super::{lock, metrics};
use crate::routing::wall_ms;
use std::collections::HashMap;

/// Local changes not yet published.
#[derive(Default)]
pub(super) struct Pending {
    /// Cluster → partition key → (clone id, learned at, ms since the epoch).
    partitions: HashMap<String, HashMap<u64, (String, u64)>>,
    servers: HashMap<String, ServerValue>,
    hints: Vec<(String, String)>,
}

impl FleetSync {
    /// Moves this instance's new changes into `p`.
    pub(super) fn collect(&self, p: &mut Pending) {
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
            // Bounded while Redis is away: past the table's size, what a `$WSPT` flood
            // adds is junk, and whatever the table still holds at the next session is
            // published then anyway (at version 0, as everything Redis lacks).
            let cap = table.max();
            for c in changes {
                if entries.len() >= cap && !entries.contains_key(&c.key) {
                    continue;
                }
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
            .publish(
                keys,
                (hash, kind, cluster),
                (wall_ms(), self.fleet.origin()),
                pairs,
            )
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
    pub(super) async fn flush(&self, redis: &mut Redis, p: &mut Pending) -> Result<(), Failure> {
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
                .event(
                    keys,
                    ("down", &cluster, &server, instance),
                    (wall_ms(), self.fleet.origin()),
                )
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

    /// Publishes what this instance holds and Redis lacks (`held`: what Redis had when it
    /// was loaded): partitions at version 0, operators' changes with their versions.
    pub(super) async fn republish(
        &self,
        redis: &mut Redis,
        held: &super::start::InRedis,
    ) -> Result<usize, Failure> {
        let keys = &self.fleet.keys;
        let snapshot = self.control.snapshot().load_full();
        let mut n = 0;
        for (cluster, in_redis) in &held.partitions {
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
                if held.servers.contains(field.as_bytes()) {
                    continue;
                }
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
}
