//! Look-up metrics of the routing plugins, in Prometheus' default registry (which tether
//! serves): `tether_route_lookups_total{plugin, result}`,
//! `tether_route_lookup_duration_seconds{plugin}` and
//! `tether_route_lookup_circuit_open{plugin}`. Handles are resolved per plugin instance.

use once_cell::sync::Lazy;
use prometheus::{
    register_histogram_vec, register_int_counter_vec, register_int_gauge_vec, Histogram,
    HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
};

static LOOKUPS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_route_lookups_total",
        "Routing plugin look-ups by result: hit (cache or table), miss (asked the API, or not in the table), error, timeout, rejected (named an unknown target), cached_error (a recent failure for the key, not asked again), short_circuit (circuit breaker open, not asked).",
        &["plugin", "result"]
    )
    .expect("register tether_route_lookups_total")
});

static DURATION: Lazy<HistogramVec> = Lazy::new(|| {
    register_histogram_vec!(
        "tether_route_lookup_duration_seconds",
        "Time of look-ups that asked the look-up service.",
        &["plugin"],
        vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]
    )
    .expect("register tether_route_lookup_duration_seconds")
});

// A gauge, not a 0/1 flag: several `route_lookup` instances (listeners, clusters) share the
// label, so it counts the open breakers.
static CIRCUIT_OPEN: Lazy<IntGaugeVec> = Lazy::new(|| {
    register_int_gauge_vec!(
        "tether_route_lookup_circuit_open",
        "Look-up plugins whose circuit breaker is open: their service failed repeatedly and is not asked until a probe succeeds.",
        &["plugin"]
    )
    .expect("register tether_route_lookup_circuit_open")
});

/// The open-breaker gauge of a plugin (only `route_lookup` has a breaker).
pub fn circuit_open(plugin: &str) -> IntGauge {
    CIRCUIT_OPEN.with_label_values(&[plugin])
}

/// How a look-up ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Hit,
    Miss,
    Error,
    Timeout,
    Rejected,
    /// A failure of this key is still cached: the fallback, without asking.
    CachedError,
    /// The circuit breaker is open: the fallback, without asking.
    ShortCircuit,
}

const NAMES: [&str; 7] = [
    "hit",
    "miss",
    "error",
    "timeout",
    "rejected",
    "cached_error",
    "short_circuit",
];

pub struct LookupMetrics {
    results: [IntCounter; 7],
    duration: Histogram,
}

impl LookupMetrics {
    pub fn new(plugin: &str) -> Self {
        LookupMetrics {
            results: NAMES.map(|r| LOOKUPS.with_label_values(&[plugin, r])),
            duration: DURATION.with_label_values(&[plugin]),
        }
    }

    pub fn count(&self, outcome: Outcome) {
        self.results[outcome as usize].inc();
    }

    pub fn observe(&self, seconds: f64) {
        self.duration.observe(seconds);
    }
}
