//! Look-up metrics of the routing plugins, in Prometheus' default registry (which tether
//! serves): `tether_route_lookups_total{plugin, result}` and
//! `tether_route_lookup_duration_seconds{plugin}`. Handles are resolved per plugin instance.

use once_cell::sync::Lazy;
use prometheus::{
    register_histogram_vec, register_int_counter_vec, Histogram, HistogramVec, IntCounter,
    IntCounterVec,
};

static LOOKUPS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_route_lookups_total",
        "Routing plugin look-ups by result: hit (cache or table), miss (asked the API, or not in the table), error, timeout, rejected (named an unknown target).",
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

/// How a look-up ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Hit,
    Miss,
    Error,
    Timeout,
    Rejected,
}

const NAMES: [&str; 5] = ["hit", "miss", "error", "timeout", "rejected"];

pub struct LookupMetrics {
    results: [IntCounter; 5],
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
