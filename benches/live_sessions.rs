//! What counting live sessions costs a request (goal under 50 ns): the routing
//! decision of a request carrying one of 10,000 or a million live sessions, with the
//! cluster's session table on (`decide_keyed` and `track` at the response) and off
//! (`session_table_max: 0`, `decide_with`), and in a fleet (the per-minute sketch too);
//! requests are spread at random over the sessions, so the table is read from memory, not
//! cache. Prints nanoseconds per request, the difference, and the table's memory
//! (`cargo bench --bench live_sessions`).

use http::header::{HeaderMap, HeaderValue, COOKIE};
use std::hint::black_box;
use std::time::Instant;
use tether::routing::fleet_seen::SeenFilter;
use tether::routing::{ClusterRouter, Decision, Tried};

const SERVERS: usize = 8;

fn router(table_max: usize) -> ClusterRouter {
    let mut yaml = String::from(
        "listeners:\n  - { name: web, address: \"127.0.0.1:8080\", cluster: c }\n\
         clusters:\n  - name: c\n",
    );
    yaml += &format!("    session_table_max: {table_max}\n    servers:\n");
    for i in 0..SERVERS {
        yaml += &format!(
            "      - {{ name: s{i}, address: \"10.0.0.{}:8080\" }}\n",
            i + 1
        );
    }
    let config = tether::config::parse(&yaml, "bench").expect("valid config");
    ClusterRouter::new(&config.clusters[0], None)
}

/// Cookie headers of `n` sessions, each routed to one of the servers.
fn requests(n: usize) -> Vec<HeaderMap> {
    (0..n)
        .map(|i| {
            let value = format!(
                "theme=dark; JSESSIONID={:032X}.s{}; lang=en",
                (i as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835),
                i % SERVERS
            );
            let mut h = HeaderMap::new();
            h.insert(COOKIE, HeaderValue::from_str(&value).unwrap());
            h
        })
        .collect()
}

/// A request order that jumps around the sessions (a multiplicative walk).
fn order(n: usize, count: usize) -> Vec<usize> {
    (0..count)
        .map(|i| (i.wrapping_mul(2_654_435_761)) % n)
        .collect()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    // A table that stays in cache, and one that does not.
    for sessions in [10_000, 1_000_000] {
        run(sessions, "");
    }
    // A fleet member also sets a register of its per-minute HyperLogLog per request.
    tether::routing::join_fleet("bench");
    run(1_000_000, ", in a fleet (HyperLogLog sketch too)");
}

fn run(sessions: usize, fleet: &str) {
    let reqs = requests(sessions);
    let walk = order(sessions, 2_000_000);
    let tried = Tried::default();
    let now = tether::routing::now_ms();
    let off = router(0);
    let before = rss_kib();
    let on = router(sessions);
    // Fill the table: every session seen once.
    for h in &reqs {
        let (d, key) = on.decide_keyed(b"/", h, &tried, now, None);
        let Decision::Route { server, .. } = d else {
            panic!("{d:?}")
        };
        on.track(key, std::iter::empty(), server, now);
    }
    let grown = rss_kib().saturating_sub(before);
    let table = on.live_sessions().unwrap();
    let counted: u64 = table.scan().iter().map(|s| s.live).sum();
    let mut best = [f64::MAX; 2];
    for _ in 0..5 {
        for (which, r) in [(0, &off), (1, &on)] {
            let start = Instant::now();
            for &i in &walk {
                let (d, key) = r.decide_keyed(b"/", &reqs[i], &tried, now, None);
                if let Decision::Route { server, .. } = d {
                    r.track(key, std::iter::empty(), server, now);
                }
                black_box(d);
            }
            let ns = start.elapsed().as_nanos() as f64 / walk.len() as f64;
            best[which] = best[which].min(ns);
        }
    }
    println!(
        "live sessions: {sessions} sessions over {SERVERS} servers, requests in random order{fleet}"
    );
    println!("  decision, table off      {:>6.0} ns per request", best[0]);
    println!("  decision + table on      {:>6.0} ns per request", best[1]);
    let added = best[1] - best[0];
    let verdict = if added < 50.0 { "under" } else { "OVER" };
    println!("  counting adds            {added:>6.0} ns ({verdict} the goal of 50 ns)");
    println!(
        "  table: {:.2} MiB of slots for {sessions} sessions, RSS grew {:.1} MiB; counted {counted} live ({:+} against the truth), {} evicted",
        table.bytes() as f64 / (1 << 20) as f64,
        grown as f64 / 1024.0,
        counted as i64 - sessions as i64,
        table.evicted_total()
    );
    if !fleet.is_empty() {
        // drain_rescue in a fleet: what the fleet task does per publishing, off the request
        // path (a scan of the table, then one Bloom filter per server).
        let start = Instant::now();
        let live = table.fingerprints();
        let scanned = start.elapsed();
        let filters: Vec<Vec<u8>> = live
            .iter()
            .map(|fps| SeenFilter::of(fps, false).encode())
            .collect();
        let built = start.elapsed() - scanned;
        let bytes: usize = filters.iter().map(Vec::len).sum();
        println!(
            "  drain_rescue filters: scan {:.1} ms, {SERVERS} Bloom filters {:.1} ms, {:.2} MiB ({:.1} bytes a session)",
            scanned.as_secs_f64() * 1e3,
            built.as_secs_f64() * 1e3,
            bytes as f64 / (1 << 20) as f64,
            bytes as f64 / sessions as f64
        );
    }
}
