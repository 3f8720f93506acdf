//! Criterion benchmarks of `route_table`: loading a 1,000,000-entry CSV file (the issue asks
//! for under 2 s) and looking a key up, against a plain `HashMap<String, _>` baseline.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;
use tether_plugins::route_table::load;
use tether_plugins::KnownTargets;

const ENTRIES: usize = 1_000_000;

fn targets() -> KnownTargets {
    KnownTargets::new([("shop", vec!["n1", "n2", "n3"]), ("was", vec!["w1", "w2"])])
}

fn write_csv() -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("tether-bench-users-{}.csv", std::process::id()));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(out, "key,target").unwrap();
    let names = ["shop/n1", "shop/n2", "shop/n3", "was", "was/w2"];
    for i in 0..ENTRIES {
        writeln!(out, "user{i:07},{}", names[i % names.len()]).unwrap();
    }
    path
}

fn route_table(c: &mut Criterion) {
    let path = write_csv();
    let targets = targets();
    // One timed load up front, printed as a plain figure.
    let start = Instant::now();
    let table = load(&path, &targets).expect("valid table");
    println!(
        "route_table: loaded {} entries in {:?}",
        table.len(),
        start.elapsed()
    );

    let mut g = c.benchmark_group("route_table");
    g.sample_size(10);
    g.bench_function("load_1M_csv", |b| {
        b.iter(|| load(black_box(&path), &targets).unwrap().len())
    });
    g.finish();

    let baseline: HashMap<String, usize> = (0..ENTRIES)
        .map(|i| (format!("user{i:07}"), i % 5))
        .collect();
    let keys: Vec<String> = (0..1024)
        .map(|i| format!("user{:07}", (i * 977) % ENTRIES))
        .collect();
    let mut k = 0usize;
    c.bench_function("route_table_lookup_1M", |b| {
        b.iter(|| {
            k = (k + 1) & 1023;
            table.get(black_box(keys[k].as_str())).copied()
        })
    });
    c.bench_function("std_hashmap_lookup_1M_baseline", |b| {
        b.iter(|| {
            k = (k + 1) & 1023;
            baseline.get(black_box(keys[k].as_str())).copied()
        })
    });
    let _ = std::fs::remove_file(path);
}

criterion_group!(benches, route_table);
criterion_main!(benches);
