//! Gauges read from live state at scrape time: server health, state, weight, requests
//! in flight, their bound and queue, live sessions (a scan of each cluster's session table), and each WebSphere
//! partition table's size and `$WSPT` counters; and the engine's connections that wait
//! with their buffers.

use crate::config::ServerState;
use crate::routing::Health;
use crate::state::snapshot::SharedSnapshot;
use pingora_prometheus::prometheus::core::{Collector, Desc};
use pingora_prometheus::prometheus::proto::MetricFamily;
use pingora_prometheus::prometheus::{IntCounterVec, IntGaugeVec, Opts};
use std::sync::Mutex;

struct Families {
    up: IntGaugeVec,
    state: IntGaugeVec,
    weight: IntGaugeVec,
    inflight: IntGaugeVec,
    peak: IntGaugeVec,
    max_inflight: IntGaugeVec,
    queued: IntGaugeVec,
    table_size: IntGaugeVec,
    learned: IntCounterVec,
    rejected: IntCounterVec,
    evicted: IntCounterVec,
    live_sessions: IntGaugeVec,
    empty_in: IntGaugeVec,
    created: IntCounterVec,
    sessions_evicted: IntCounterVec,
    rescued: IntCounterVec,
    bytes: IntCounterVec,
    ejected: IntGaugeVec,
    fleet_live: IntGaugeVec,
    ejections: IntCounterVec,
    buffered_idle: IntGaugeVec,
}

/// A Prometheus collector over the current routing snapshot.
pub struct LiveCollector {
    snapshot: SharedSnapshot,
    families: Mutex<Families>,
    descs: Vec<Desc>,
}

fn gauge(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

fn counter(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

impl LiveCollector {
    pub fn new(snapshot: SharedSnapshot) -> Self {
        let server = &["cluster", "server"];
        let families = Families {
            up: gauge("tether_server_up", "1 when the server is healthy, 0 when marked down.", server),
            state: gauge(
                "tether_server_state",
                "1 for the server's current administrative state (active, draining, stopped).",
                &["cluster", "server", "state"],
            ),
            weight: gauge("tether_server_weight", "The server's current weight for new sessions.", server),
            inflight: gauge("tether_inflight_requests", "Requests being proxied to the server now.", server),
            peak: gauge(
                "tether_server_inflight_peak",
                "The most requests in flight to the server at once since tether started or its counters were reset (the admin API's reset).",
                server,
            ),
            max_inflight: gauge(
                "tether_server_max_inflight",
                "The server's max_inflight: requests this instance has in flight to it at most (0: no bound).",
                server,
            ),
            queued: gauge(
                "tether_queued_requests",
                "Requests waiting now for a slot on the server (at its max_inflight); server=\"\": new sessions waiting for a slot on any server of the cluster.",
                server,
            ),
            table_size: gauge(
                "tether_partition_table_entries",
                "Partitions in a WebSphere cluster's partition table.",
                &["cluster"],
            ),
            learned: counter(
                "tether_wspt_entries_learned_total",
                "$WSPT entries that added or changed a partition.",
                &["cluster"],
            ),
            rejected: counter(
                "tether_wspt_rejected_total",
                "$WSPT values or entries refused (malformed, oversized, unknown clone, over the per-response quota).",
                &["cluster"],
            ),
            evicted: counter(
                "tether_partition_evictions_total",
                "Partitions evicted to make room in a full partition table.",
                &["cluster"],
            ),
            live_sessions: gauge(
                "tether_server_live_sessions",
                "Sessions live on the server: seen within the cluster's session_timeout.",
                server,
            ),
            empty_in: gauge(
                "tether_server_sessions_empty_seconds",
                "Seconds until the server's last live session expires if no request comes (0: none live).",
                server,
            ),
            created: counter(
                "tether_server_sessions_created_total",
                "Sessions first seen on the server (created there, or first seen by this process).",
                server,
            ),
            rescued: counter(
                "tether_drain_rescued_total",
                "Requests whose session named this draining server, where it was not live, balanced as new sessions (drain_rescue).",
                server,
            ),
            bytes: counter(
                "tether_server_bytes_total",
                "Bytes on the server's connections, by direction (to_server, from_server): heads and bodies on tether's own front ends, bodies on Pingora's proxy.",
                &["cluster", "server", "direction"],
            ),
            fleet_live: gauge(
                "tether_server_fleet_live_sessions",
                "In a fleet: sessions live on the server counting every instance (Redis HyperLogLogs, minute resolution).",
                server,
            ),
            ejected: gauge(
                "tether_server_ejected",
                "1 while the server takes no new sessions after answering 5xx in a row (outlier), else 0.",
                server,
            ),
            ejections: counter(
                "tether_outlier_ejections_total",
                "Servers ejected from new sessions for answering 5xx in a row (outlier).",
                &["cluster"],
            ),
            sessions_evicted: counter(
                "tether_live_sessions_evicted_total",
                "Live sessions dropped from a full session table (counts then undercount).",
                &["cluster"],
            ),
            buffered_idle: gauge(
                "tether_engine_buffered_idle_connections",
                "Kept-alive HTTP/1 engine connections waiting for their next request with their \
                 buffers (at most server.idle_buffers_per_thread per worker thread, for a second).",
                &[],
            ),
        };
        let descs = [
            families.up.desc(),
            families.state.desc(),
            families.weight.desc(),
            families.inflight.desc(),
            families.peak.desc(),
            families.max_inflight.desc(),
            families.queued.desc(),
            families.table_size.desc(),
            families.learned.desc(),
            families.rejected.desc(),
            families.evicted.desc(),
            families.live_sessions.desc(),
            families.empty_in.desc(),
            families.created.desc(),
            families.sessions_evicted.desc(),
            families.rescued.desc(),
            families.bytes.desc(),
            families.ejected.desc(),
            families.fleet_live.desc(),
            families.ejections.desc(),
            families.buffered_idle.desc(),
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        LiveCollector {
            snapshot,
            families: Mutex::new(families),
            descs,
        }
    }
}

impl Collector for LiveCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let f = self.families.lock().unwrap_or_else(|e| e.into_inner());
        let all = [
            &f.up,
            &f.state,
            &f.weight,
            &f.inflight,
            &f.peak,
            &f.max_inflight,
            &f.queued,
            &f.table_size,
            &f.live_sessions,
            &f.empty_in,
            &f.ejected,
            &f.fleet_live,
            &f.buffered_idle,
        ];
        all.iter().for_each(|v| v.reset());
        let counters = [
            &f.learned,
            &f.rejected,
            &f.evicted,
            &f.created,
            &f.sessions_evicted,
            &f.rescued,
            &f.ejections,
            &f.bytes,
        ];
        counters.iter().for_each(|v| v.reset());
        let waiting = crate::front::engine::waiting_with_buffers();
        f.buffered_idle
            .with_label_values::<&str>(&[])
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
        let snapshot = self.snapshot.load();
        for router in snapshot.clusters.iter() {
            let c = router.name.as_str();
            for s in router.servers() {
                let name = s.config.name.as_str();
                let up = matches!(s.live.health(), Health::Up);
                f.up.with_label_values(&[c, name]).set(up as i64);
                let now = s.live.state();
                for state in [
                    ServerState::Active,
                    ServerState::Draining,
                    ServerState::Stopped,
                ] {
                    f.state
                        .with_label_values(&[c, name, state.name()])
                        .set((state == now) as i64);
                }
                f.weight
                    .with_label_values(&[c, name])
                    .set(s.live.weight() as i64);
                f.inflight
                    .with_label_values(&[c, name])
                    .set(s.live.inflight() as i64);
                f.peak
                    .with_label_values(&[c, name])
                    .set(s.live.peak() as i64);
                let [to, from] = s.live.bytes().now();
                f.bytes
                    .with_label_values(&[c, name, "to_server"])
                    .inc_by(to);
                f.bytes
                    .with_label_values(&[c, name, "from_server"])
                    .inc_by(from);
                let slots = s.live.slots();
                f.max_inflight
                    .with_label_values(&[c, name])
                    .set(i64::from(slots.limit()));
                f.queued
                    .with_label_values(&[c, name])
                    .set(i64::from(slots.queued()));
                f.ejected
                    .with_label_values(&[c, name])
                    .set(s.live.ejected(crate::routing::now_ms()) as i64);
            }
            if router.servers().iter().any(|s| s.live.slots().limit() > 0) {
                f.queued
                    .with_label_values(&[c, ""])
                    .set(i64::from(router.waiting.queued()));
            }
            f.ejections
                .with_label_values(&[c])
                .inc_by(router.ejections());
            if let Some(t) = router.live_sessions() {
                for (i, counts) in t.scan().iter().enumerate() {
                    let name = router.servers()[i].config.name.as_str();
                    f.live_sessions
                        .with_label_values(&[c, name])
                        .set(counts.live as i64);
                    f.empty_in
                        .with_label_values(&[c, name])
                        .set(counts.empty_in_s as i64);
                    f.created
                        .with_label_values(&[c, name])
                        .inc_by(t.created_total(i));
                    f.rescued
                        .with_label_values(&[c, name])
                        .inc_by(t.rescued_total(i));
                    if let Some((n, _)) = t.sketch().and_then(|s| s.fleet(i)) {
                        f.fleet_live.with_label_values(&[c, name]).set(n as i64);
                    }
                }
                f.sessions_evicted
                    .with_label_values(&[c])
                    .inc_by(t.evicted_total());
            }
            if let Some(t) = router.partitions() {
                f.table_size.with_label_values(&[c]).set(t.len() as i64);
                f.learned.with_label_values(&[c]).inc_by(t.learned());
                f.rejected.with_label_values(&[c]).inc_by(t.rejected());
                f.evicted.with_label_values(&[c]).inc_by(t.evicted());
            }
        }
        let mut out: Vec<MetricFamily> = all.iter().flat_map(|v| v.collect()).collect();
        out.extend(counters.iter().flat_map(|v| v.collect()));
        out
    }
}
