//! Criterion benchmarks of WebSphere affinity: `$WSPT` parsing and learning, and partition
//! look-ups in a table of 1,000,000 entries (against a std `HashMap` baseline in the same
//! run), plus the whole routing decision for a partition hit.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use http::header::{HeaderMap, HeaderValue, COOKIE};
use std::collections::HashMap;
use tether::routing::{clone_tag, ClusterRouter, Decision, Outcome, PartitionTable, Tried};

const ENTRIES: usize = 1_000_000;

fn websphere_router(max: usize) -> ClusterRouter {
    let yaml = format!(
        "listeners: [{{ name: web, address: 127.0.0.1:1, cluster: was }}]\n\
         clusters:\n  - name: was\n    session_style: websphere\n    websphere: {{ partition_table_max: {max} }}\n    servers:\n\
         \x20     - {{ name: was1, address: 127.0.0.1:9081, clone_id: v544d0o0 }}\n\
         \x20     - {{ name: was2, address: 127.0.0.1:9082, clone_id: v544d0o1 }}\n\
         \x20     - {{ name: was3, address: 127.0.0.1:9083, clone_id: v544d0o2 }}\n"
    );
    let config = tether::config::parse(&yaml, "bench").expect("valid config");
    ClusterRouter::new(&config.clusters[0], None)
}

/// A `$WSPT` value of `n` entries, like a server owning `n` partitions sends.
fn wspt_value(n: usize) -> String {
    (0..n)
        .map(|i| format!("{}=v544d0o{}", -1_000_000 + (i as i64) * 7919, i % 3))
        .collect::<Vec<_>>()
        .join(", ")
}

fn wspt(c: &mut Criterion) {
    let mut g = c.benchmark_group("wspt");
    // 400 entries of this shape is about as much as fits in the 8 KiB limit.
    for n in [2usize, 64, 400] {
        let value = wspt_value(n);
        let parsed = tether::routing::parse_wspt(value.as_bytes()).map(|e| e.count());
        assert_eq!(parsed, Ok(n), "the bench must measure accepted values");
        g.bench_with_input(BenchmarkId::new("parse", n), &value, |b, v| {
            b.iter(|| tether::routing::parse_wspt(black_box(v.as_bytes())).map(|e| e.count()))
        });
        let router = websphere_router(100_000);
        router.learn_wspt(value.as_bytes());
        // Steady state: every response re-announces partitions the table already has.
        g.bench_with_input(BenchmarkId::new("learn_unchanged", n), &value, |b, v| {
            b.iter(|| router.learn_wspt(black_box(v.as_bytes())))
        });
    }
    g.finish();
}

fn lookups(c: &mut Criterion) {
    let partitions: Vec<String> = (0..ENTRIES)
        .map(|i| (i as i64 * 7919 - 4_000_000_000).to_string())
        .collect();
    let clones = [
        clone_tag(b"v544d0o0"),
        clone_tag(b"v544d0o1"),
        clone_tag(b"v544d0o2"),
    ];

    let table = PartitionTable::new(ENTRIES);
    let baseline: HashMap<String, u32> = partitions
        .iter()
        .enumerate()
        .map(|(i, p)| (p.clone(), clones[i % 3]))
        .collect();
    for (i, p) in partitions.iter().enumerate() {
        table.insert(p.as_bytes(), clones[i % 3]);
    }
    assert_eq!(table.len(), ENTRIES);

    let mut g = c.benchmark_group("partition_lookup_1M");
    let probe: Vec<&[u8]> = (0..1024)
        .map(|i| partitions[(i * 977) % ENTRIES].as_bytes())
        .collect();
    let mut k = 0usize;
    g.bench_function("tether_table_hit", |b| {
        b.iter(|| {
            k = (k + 1) & 1023;
            table.get(black_box(probe[k]))
        })
    });
    g.bench_function("std_hashmap_hit_baseline", |b| {
        b.iter(|| {
            k = (k + 1) & 1023;
            baseline
                .get(black_box(std::str::from_utf8(probe[k]).unwrap()))
                .copied()
        })
    });
    g.bench_function("tether_table_miss", |b| {
        b.iter(|| table.get(black_box(b"424242424242")))
    });
    g.finish();

    // The whole decision for a request whose session names a partition, 1M-entry table.
    let router = websphere_router(ENTRIES);
    let t = router.partitions().unwrap();
    for (i, p) in partitions.iter().enumerate() {
        t.insert(p.as_bytes(), clones[i % 3]);
    }
    let sid = format!("0000A2MB4IJozU_VM8IffsMNfdR:{}", partitions[ENTRIES / 2]);
    let mut headers = HeaderMap::new();
    let cookie = format!("theme=dark; JSESSIONID={sid}; lang=en");
    headers.insert(COOKIE, HeaderValue::from_str(&cookie).unwrap());
    let tried = Tried::default();
    match router.decide(b"/app", &headers, &tried, 1) {
        Decision::Route { outcome, .. } => assert_eq!(outcome, Outcome::PartitionHit),
        other => panic!("unexpected {other:?}"),
    }
    c.bench_function("decide_partition_hit_1M", |b| {
        b.iter(|| router.decide(black_box(b"/app"), black_box(&headers), &tried, 1))
    });
}

criterion_group!(benches, wspt, lookups);
criterion_main!(benches);
