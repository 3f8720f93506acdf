//! The heap as jemalloc, tether's allocator, sees it, read at each scrape
//! (`tether_heap_bytes{kind}`): `allocated`, the bytes tether's objects hold; `active`,
//! the pages those objects sit in; `resident`, what jemalloc holds in memory (its own
//! metadata and freed pages not returned yet included); `metadata`, jemalloc's own; `dirty`,
//! freed pages it has not returned yet. Beside `process_resident_memory_bytes`
//! it tells tether's own objects from the allocator's slack. And the live objects of each
//! of jemalloc's small size classes (`tether_heap_objects{size}`): what the heap is made
//! of (`bench/run` divides their growth by its open connections: the objects of one).
//! Registered by the binary, whose allocator jemalloc is (a library user's allocator may
//! be another).

use pingora_prometheus::prometheus::core::{Collector, Desc};
use pingora_prometheus::prometheus::{self, proto, IntGaugeVec, Opts};
use tikv_jemalloc_ctl::{epoch, raw, stats};

struct Heap {
    bytes: IntGaugeVec,
    objects: IntGaugeVec,
}

/// jemalloc's index for "all arenas together" (`MALLCTL_ARENAS_ALL`).
const ALL_ARENAS: u32 = 4096;

/// Reads a `usize` or `u32` statistic by name (a NUL-terminated mallctl name).
fn read<T: Copy>(name: &str) -> Option<T> {
    // SAFETY: each name used here is a jemalloc statistic of type `T` (jemalloc's
    // manual, "MALLCTL NAMESPACE"): `arenas.nbins` is `unsigned`, the others `size_t`.
    unsafe { raw::read::<T>(name.as_bytes()).ok() }
}

impl Heap {
    /// The live objects of each small size class (jemalloc's bins), as of the last epoch.
    fn objects(&self) {
        let Some(bins) = read::<u32>("arenas.nbins\0") else {
            return;
        };
        for bin in 0..bins {
            let size = read::<usize>(&format!("arenas.bin.{bin}.size\0"));
            let live = read::<usize>(&format!("stats.arenas.{ALL_ARENAS}.bins.{bin}.curregs\0"));
            if let (Some(size), Some(live)) = (size, live) {
                let live = i64::try_from(live).unwrap_or(i64::MAX);
                self.objects
                    .with_label_values(&[&size.to_string()])
                    .set(live);
            }
        }
    }
}

impl Collector for Heap {
    fn desc(&self) -> Vec<&Desc> {
        let mut desc = self.bytes.desc();
        desc.extend(self.objects.desc());
        desc
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        // jemalloc's statistics are a snapshot taken when its epoch advances.
        if epoch::advance().is_ok() {
            // Freed pages not returned yet, counted in pages of all arenas.
            let page = read::<usize>("arenas.page\0").unwrap_or(4096);
            let dirty = read::<usize>(&format!("stats.arenas.{ALL_ARENAS}.pdirty\0"));
            let read = [
                ("allocated", stats::allocated::read().ok()),
                ("active", stats::active::read().ok()),
                ("resident", stats::resident::read().ok()),
                ("metadata", stats::metadata::read().ok()),
                ("dirty", dirty.map(|pages| pages * page)),
            ];
            for (kind, value) in read {
                if let Some(value) = value {
                    let value = i64::try_from(value).unwrap_or(i64::MAX);
                    self.bytes.with_label_values(&[kind]).set(value);
                }
            }
            self.objects();
        }
        let mut families = self.bytes.collect();
        families.extend(self.objects.collect());
        families
    }
}

/// Puts the heap's figures in the default registry.
pub fn register() {
    let opts = Opts::new(
        "tether_heap_bytes",
        "Heap bytes as jemalloc sees them: allocated (tether's objects), active (their pages), resident (all jemalloc holds)",
    );
    let bytes = IntGaugeVec::new(opts, &["kind"]).expect("tether_heap_bytes");
    let opts = Opts::new(
        "tether_heap_objects",
        "Live heap objects of each of jemalloc's small size classes (size: bytes per object)",
    );
    let objects = IntGaugeVec::new(opts, &["size"]).expect("tether_heap_objects");
    let heap = Heap { bytes, objects };
    if let Err(e) = prometheus::default_registry().register(Box::new(heap)) {
        log::warn!("cannot register the heap metrics: {e}");
    }
}
