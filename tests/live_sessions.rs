//! Live sessions per server (issue 26, item 1): counted from the servers' `Set-Cookie` and
//! the requests that carry a session, until `session_timeout` after the last request, in
//! `GET /status` and the metrics, on both HTTP/1 paths.

mod common;

use common::{cluster_yaml, scrape, tomcats, Browser, Opts, Tether};
use std::time::{Duration, Instant};

fn live(json: &serde_json::Value, server: &str) -> (u64, u64) {
    let s = json["clusters"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server)
        .unwrap_or_else(|| panic!("no server {server}: {json}"));
    let live = s["sessions"]["live"].as_u64().unwrap();
    let created = s["sessions"]["created"].as_u64().unwrap();
    (live, created)
}

fn sample(metrics: &str, name: &str, server: &str) -> f64 {
    let prefix = format!("{name}{{cluster=\"shop\",server=\"{server}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sessions_are_counted_per_server_until_their_timeout() {
    let sims = tomcats(2).await;
    let t = Tether::start_with(Opts {
        cluster: cluster_yaml("    session_timeout: 2s\n", &sims),
        admin: true,
        metrics: true,
        ..Opts::default()
    });
    // Ten browsers, each given a session by the server that served it.
    let mut browsers = Vec::new();
    let mut homes = std::collections::HashMap::<String, u64>::new();
    for _ in 0..10 {
        let mut b = Browser::new(&t);
        let (status, server) = b.get("/").await;
        assert_eq!(status, 200);
        *homes.entry(server).or_default() += 1;
        browsers.push(b);
    }
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    for (server, n) in &homes {
        assert_eq!(live(&json, server), (*n, *n), "{server}: {json}");
        let empty = json["clusters"][0]["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == server.as_str())
            .unwrap()["sessions"]["empty_by"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(empty.ends_with('Z') && empty.len() == 20, "{empty}");
    }
    let m = scrape(t.metrics.unwrap()).await;
    for (server, n) in &homes {
        assert_eq!(
            sample(&m, "tether_server_live_sessions", server),
            *n as f64,
            "{m}"
        );
        assert_eq!(
            sample(&m, "tether_server_sessions_created_total", server),
            *n as f64
        );
    }
    // Requests of the sessions keep them live and create nothing; one browser stops.
    let quiet = browsers.pop().unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2600) {
        for b in browsers.iter_mut() {
            assert_eq!(b.get("/").await.0, 200);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    let total: u64 = homes.keys().map(|s| live(&json, s).0).sum();
    let created: u64 = homes.keys().map(|s| live(&json, s).1).sum();
    assert_eq!(total, 9, "the quiet browser's session expired: {json}");
    assert_eq!(created, 10, "no session was created twice");
    assert_eq!(json["clusters"][0]["live_sessions"]["live"], 9);
    drop(quiet);
    // Nobody comes: every session expires.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    for server in homes.keys() {
        assert_eq!(live(&json, server).0, 0, "{json}");
    }
}
