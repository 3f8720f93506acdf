//! The heap as jemalloc, tether's allocator, sees it, read at each scrape
//! (`tether_heap_bytes{kind}`): `allocated`, the bytes tether's objects hold; `active`,
//! the pages those objects sit in; `resident`, what jemalloc holds in memory (its own
//! metadata and freed pages not returned yet included). Beside `process_resident_memory_bytes`
//! it tells tether's own objects from the allocator's slack. Registered by the binary, whose
//! allocator jemalloc is (a library user's allocator may be another).

use pingora_prometheus::prometheus::core::{Collector, Desc};
use pingora_prometheus::prometheus::{self, proto, IntGaugeVec, Opts};
use tikv_jemalloc_ctl::{epoch, stats};

struct Heap {
    bytes: IntGaugeVec,
}

impl Collector for Heap {
    fn desc(&self) -> Vec<&Desc> {
        self.bytes.desc()
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        // jemalloc's statistics are a snapshot taken when its epoch advances.
        if epoch::advance().is_ok() {
            let read = [
                ("allocated", stats::allocated::read()),
                ("active", stats::active::read()),
                ("resident", stats::resident::read()),
            ];
            for (kind, value) in read {
                if let Ok(value) = value {
                    let value = i64::try_from(value).unwrap_or(i64::MAX);
                    self.bytes.with_label_values(&[kind]).set(value);
                }
            }
        }
        self.bytes.collect()
    }
}

/// Puts the heap's figures in the default registry.
pub fn register() {
    let opts = Opts::new(
        "tether_heap_bytes",
        "Heap bytes as jemalloc sees them: allocated (tether's objects), active (their pages), resident (all jemalloc holds)",
    );
    let bytes = IntGaugeVec::new(opts, &["kind"]).expect("tether_heap_bytes");
    if let Err(e) = prometheus::default_registry().register(Box::new(Heap { bytes })) {
        log::warn!("cannot register the heap metrics: {e}");
    }
}
