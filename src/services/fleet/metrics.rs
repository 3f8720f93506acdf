//! The fleet's metrics: whether Redis is reachable, how late others' changes arrive, and
//! what was published, applied and rejected, and whether another instance has this one's
//! name.

use once_cell::sync::Lazy;
use pingora_prometheus::prometheus::{
    register_gauge, register_int_counter, register_int_counter_vec, register_int_gauge, Gauge,
    IntCounter, IntCounterVec, IntGauge,
};

pub static UP: Lazy<IntGauge> = Lazy::new(|| {
    register_int_gauge!(
        "tether_shared_state_up",
        "1 while this instance is connected to the fleet's Redis and in sync, else 0."
    )
    .expect("register tether_shared_state_up")
});

pub static LAG: Lazy<Gauge> = Lazy::new(|| {
    register_gauge!(
        "tether_shared_state_lag_seconds",
        "For the last change applied from another instance: time from its being learned or made there (its version) to its applying here."
    )
    .expect("register tether_shared_state_lag_seconds")
});

pub static PUBLISHED: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_shared_state_published_total",
        "Entries this instance wrote to Redis, by kind (partition, server, hint).",
        &["kind"]
    )
    .expect("register tether_shared_state_published_total")
});

pub static APPLIED: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_shared_state_applied_total",
        "Entries from other instances applied here, by kind (partition, server, hint).",
        &["kind"]
    )
    .expect("register tether_shared_state_applied_total")
});

pub static REJECTED: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_shared_state_rejected_total",
        "Entries not applied, by reason: stale (Redis held a newer one), garbage (unreadable), unknown (a cluster, server or clone this instance does not have).",
        &["reason"]
    )
    .expect("register tether_shared_state_rejected_total")
});

pub static RECONNECTS: Lazy<IntCounter> = Lazy::new(|| {
    register_int_counter!(
        "tether_shared_state_reconnects_total",
        "Connections to the fleet's Redis opened again after one failed or was lost."
    )
    .expect("register tether_shared_state_reconnects_total")
});

pub static NAME_CONFLICT: Lazy<IntGauge> = Lazy::new(|| {
    register_int_gauge!(
        "tether_shared_state_name_conflict",
        "1 while another live tether instance writes this instance's heartbeat (the two share a fleet name), else 0."
    )
    .expect("register tether_shared_state_name_conflict")
});

/// Registers every family now, so that they are scraped from the start.
pub fn init() {
    UP.set(0);
    NAME_CONFLICT.set(0);
    Lazy::force(&LAG);
    Lazy::force(&RECONNECTS);
    for kind in ["partition", "server", "hint"] {
        PUBLISHED.with_label_values(&[kind]);
        APPLIED.with_label_values(&[kind]);
    }
    for reason in ["stale", "garbage", "unknown"] {
        REJECTED.with_label_values(&[reason]);
    }
}
