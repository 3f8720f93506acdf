//! Scripts' metrics, in Prometheus' default registry: `tether_script_calls_total{script,
//! phase}`, `tether_script_errors_total{script, phase, kind}` (kind: error, budget, memory)
//! and `tether_script_duration_seconds{script, phase}`. Handles are resolved per script.

use super::phase::PHASES;
use super::vm::Kind;
use once_cell::sync::Lazy;
use prometheus::{
    register_histogram_vec, register_int_counter_vec, Histogram, HistogramVec, IntCounter,
    IntCounterVec,
};

static CALLS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_script_calls_total",
        "Calls of a script's phase functions.",
        &["script", "phase"]
    )
    .expect("register tether_script_calls_total")
});

static ERRORS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_script_errors_total",
        "Failed calls of a script's phase functions, by kind: error (the script raised one or returned what tether cannot use), budget (stopped at its time budget), memory (its VM reached its memory limit).",
        &["script", "phase", "kind"]
    )
    .expect("register tether_script_errors_total")
});

static DURATION: Lazy<HistogramVec> = Lazy::new(|| {
    register_histogram_vec!(
        "tether_script_duration_seconds",
        "Time of a script's phase calls.",
        &["script", "phase"],
        vec![1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 5e-3, 0.025]
    )
    .expect("register tether_script_duration_seconds")
});

const KINDS: [Kind; 3] = [Kind::Error, Kind::Budget, Kind::Memory];

/// One script's handles, per phase.
pub struct ScriptMetrics {
    calls: Vec<IntCounter>,
    duration: Vec<Histogram>,
    errors: Vec<[IntCounter; 3]>,
}

impl ScriptMetrics {
    pub fn new(script: &str) -> ScriptMetrics {
        let phases = PHASES.iter().map(|p| p.name());
        ScriptMetrics {
            calls: phases
                .clone()
                .map(|p| CALLS.with_label_values(&[script, p]))
                .collect(),
            duration: phases
                .clone()
                .map(|p| DURATION.with_label_values(&[script, p]))
                .collect(),
            errors: phases
                .map(|p| KINDS.map(|k| ERRORS.with_label_values(&[script, p, k.name()])))
                .collect(),
        }
    }

    pub fn called(&self, phase: usize, seconds: f64) {
        self.calls[phase].inc();
        self.duration[phase].observe(seconds);
    }

    pub fn failed(&self, phase: usize, kind: Kind) {
        self.errors[phase][kind as usize].inc();
    }
}
