//! Metrics and the access log, checked for real: `promtool check metrics` on a scrape, a real
//! Prometheus scraping tether, and every query of the Grafana dashboard returning data.

mod common;

use common::prometheus::{promtool, Prometheus};
use common::{scratch_dir, server_line, tomcats, Opts, Tether};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tether::cli::sim::{HttpClient, WasCluster, WebSphereSim};

async fn scrape(t: &Tether) -> String {
    let mut c = HttpClient::new(t.metrics.expect("metrics listener"));
    let resp = c.get("/metrics", &[]).await.unwrap();
    assert_eq!(resp.status, 200);
    String::from_utf8(resp.body).unwrap()
}

/// Scrapes until `series` reads `want` (5 s at most), then returns that scrape. Pingora
/// runs the `logging` phase, which counts a request, after the response has gone out, so
/// a client can hold its last answer a moment before the count includes it.
async fn scrape_when(t: &Tether, series: &str, want: f64) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = scrape(t).await;
        if sample(&text, series) == Some(want) {
            // A scrape reads the families one after another while requests finish: the
            // last request may show in `series` and not yet in a family read before it.
            // Every update made before this scrape shows in the next one.
            return scrape(t).await;
        }
        if Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The value of the first sample whose line starts with `series` (name and labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Metric names in a scrape (from `# TYPE` lines).
fn exported_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_passes_promtool_and_counts_what_happened() {
    let sims = tomcats(3).await;
    let mut cluster = String::from("    recover_after: 60s\n    servers:\n");
    for s in &sims {
        cluster.push_str(&server_line(s, ""));
    }
    let t = Tether::start_with(Opts {
        cluster,
        metrics: true,
        access_log: true,
        ..Opts::default()
    });
    let mut c = t.client();
    for _ in 0..30 {
        assert_eq!(c.get("/", &[]).await.unwrap().status, 200);
    }
    for i in 0..10 {
        let cookie = format!("JSESSIONID=S{i}.tc1");
        assert_eq!(
            c.get("/", &[("Cookie", &cookie)]).await.unwrap().status,
            200
        );
    }
    sims[1].stop().await;
    for i in 0..5 {
        let cookie = format!("JSESSIONID=F{i}.tc2");
        assert_eq!(
            c.get("/", &[("Cookie", &cookie)]).await.unwrap().status,
            200
        );
    }
    let text = scrape_when(
        &t,
        r#"tether_request_duration_seconds_count{cluster="shop"}"#,
        45.0,
    )
    .await;
    let (ok, out) = promtool(&["check", "metrics"], text.as_bytes());
    assert!(ok, "promtool check metrics failed:\n{out}\n{text}");

    let v = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
    let ok_by = |server: &str| {
        v(&format!(
            r#"tether_requests_total{{cluster="shop",server="{server}",status_class="2xx"}}"#
        ))
    };
    // 10 new sessions each, tc1's 10 sticky requests, and tc2's 5 failed over elsewhere.
    assert_eq!(ok_by("tc1") + ok_by("tc2") + ok_by("tc3"), 45.0);
    assert_eq!(ok_by("tc2"), 10.0);
    assert!(ok_by("tc1") >= 20.0);
    // tc1's 10, and the first request for tc2 (not yet known to be dead), whose retry is a
    // failover decision of its own.
    assert_eq!(
        v(r#"tether_routing_decisions_total{cluster="shop",outcome="route_hit"}"#),
        11.0
    );
    assert_eq!(
        v(r#"tether_routing_decisions_total{cluster="shop",outcome="new_session"}"#),
        30.0
    );
    assert!(v(r#"tether_routing_decisions_total{cluster="shop",outcome="failover"}"#) >= 5.0);
    assert_eq!(
        v(r#"tether_upstream_connect_failures_total{cluster="shop",server="tc2"}"#),
        1.0
    );
    // The first request for tc2 may go out on the pooled keep-alive connection the stopped
    // server has just closed: that attempt is retried on tc2 (a closed idle connection says
    // nothing about the server), whose connect then fails: 2 retries. When Pingora's pool
    // saw the close first, only the connect is retried: 1.
    let retries = v(r#"tether_retries_total{cluster="shop"}"#);
    assert!(retries == 1.0 || retries == 2.0, "retries: {retries}");
    assert_eq!(v(r#"tether_server_up{cluster="shop",server="tc2"}"#), 0.0);
    assert_eq!(
        v(r#"tether_server_state{cluster="shop",server="tc1",state="active"}"#),
        1.0
    );
    assert_eq!(
        v(r#"tether_request_duration_seconds_count{cluster="shop"}"#),
        45.0
    );
    assert!(v(r#"tether_upstream_connect_duration_seconds_count{cluster="shop"}"#) >= 2.0);
    assert!(text.contains("tether_build_info{version=\""), "{text}");
    // Prometheus's standard process metrics, with values for this process.
    assert!(
        sample(&text, "process_cpu_seconds_total").is_some(),
        "{text}"
    );
    for name in [
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(
            sample(&text, name).is_some_and(|v| v > 0.0),
            "{name} exported:\n{text}"
        );
    }
    // The heap as jemalloc sees it: objects within their pages, within what it holds.
    let heap = |kind: &str| v(&format!("tether_heap_bytes{{kind=\"{kind}\"}}"));
    let (allocated, active, resident) = (heap("allocated"), heap("active"), heap("resident"));
    assert!(
        allocated > 0.0 && allocated <= active && active <= resident,
        "{allocated} {active} {resident}"
    );
    // What jemalloc holds beside the objects' pages: its own metadata (some of it mapped
    // but not touched yet) and freed pages not returned yet, each within what it holds.
    let (metadata, dirty) = (heap("metadata"), heap("dirty"));
    assert!(
        metadata > 0.0 && metadata < resident && active + dirty <= resident,
        "active {active}, metadata {metadata}, dirty {dirty} of {resident}"
    );
    // Its small objects by size class, read at the same moment: within `allocated`.
    let objects: f64 = text
        .lines()
        .filter_map(|l| l.strip_prefix("tether_heap_objects{size=\""))
        .map(|rest| {
            let (size, count) = rest.split_once("\"} ").unwrap();
            size.parse::<f64>().unwrap() * count.parse::<f64>().unwrap()
        })
        .sum();
    assert!(
        objects > 0.0 && objects <= allocated,
        "{objects} of {allocated}"
    );
    // No label carries a path or a session id.
    assert!(
        !text.contains("S1.tc1") && !text.contains("/shop"),
        "{text}"
    );

    // The access log: one JSON line per request, written off the request path.
    let path = t.dir.join("access.log");
    let deadline = Instant::now() + Duration::from_secs(5);
    let lines = loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        // Only complete lines: the writer may be between two writes of one line.
        let text = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() >= 45 || Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(lines.len(), 45);
    let failover = lines
        .iter()
        .find(|l| l["outcome"] == "failover")
        .expect("a failover line");
    assert_eq!(failover["attempts"], 2, "{failover}");
    assert_eq!(failover["cluster"], "shop");
    assert_eq!(failover["status"], 200);
    assert_eq!(failover["method"], "GET");
    assert!(
        failover["server"] == "tc1" || failover["server"] == "tc3",
        "{failover}"
    );
    for field in ["time", "client", "path", "duration_ms"] {
        assert!(!failover[field].is_null(), "{field} in {failover}");
    }
}

/// Every `expr` in the dashboard, with Grafana's variables filled in.
fn dashboard_queries() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/grafana/dashboards/tether.json"
    );
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            out.push(
                expr.replace("$__rate_interval", "1m")
                    .replace("$cluster", ".*"),
            );
        }
    }
    out
}

/// `tether_*` metric names an expression uses, as exported (histogram suffixes removed).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("tether_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        names.push(base.to_string());
        rest = &tail[end..];
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_tether_and_every_dashboard_query_returns_data() {
    let was = WasCluster::new();
    let mut sims = Vec::new();
    for (n, parts) in [(1, ["101", "102"]), (2, ["201", "202"])] {
        sims.push(
            WebSphereSim::start(&was, &format!("was{n}"), &format!("c{n}"), &parts)
                .await
                .unwrap(),
        );
    }
    let mut cluster =
        String::from("    session_style: websphere\n    recover_after: 60s\n    servers:\n");
    for s in &sims {
        cluster.push_str(&format!(
            "      - {{ name: {}, address: \"{}\", clone_id: {} }}\n",
            s.name(),
            s.addr(),
            s.clone_id()
        ));
    }
    // A second listener with TLS, for the TLS panels.
    let dir = scratch_dir("prometheus");
    let pki = common::pki::Pki::new(&dir.join("pki"));
    let tls_port = common::free_port();
    // A fleet of one, for the fleet panels.
    let redis = common::redis::Redis::start(&dir.join("redis"));
    let t = Tether::start_with(Opts {
        cluster,
        metrics: true,
        admin: true,
        top: common::fleet::shared_state(&redis.url(), "a", ""),
        extra_listeners: format!(
            "  - name: tls\n    address: \"127.0.0.1:{tls_port}\"\n    cluster: shop\n    tls: {{ cert: {}, key: {} }}\n",
            pki.path("a.crt"),
            pki.path("a.key")
        ),
        ..Opts::default()
    });
    for http in ["--http1.1", "--http2"] {
        let out = std::process::Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "--retry",
                "5",
                "--retry-connrefused",
            ])
            .args(["--cacert", &pki.path("ca.pem"), http])
            .args(["--resolve", &format!("a.test:{tls_port}:127.0.0.1")])
            .arg(format!("https://a.test:{tls_port}/"))
            .status()
            .unwrap();
        assert!(out.success(), "curl over TLS {http}");
    }
    let prom = Prometheus::start(&dir, t.metrics.unwrap());

    // Traffic that exercises every panel: new sessions, sticky requests, a failover with
    // $WSFO, a good and a bad reload.
    let mut cookies = Vec::new();
    for _ in 0..20 {
        let resp = t.client().get("/", &[]).await.unwrap();
        cookies.push(format!(
            "JSESSIONID={}",
            resp.set_cookie("JSESSIONID").unwrap()
        ));
    }
    let mut c = t.client();
    for cookie in &cookies {
        c.get("/", &[("Cookie", cookie)]).await.unwrap();
    }
    sims[0].stop().await;
    for cookie in &cookies {
        assert_eq!(c.get("/", &[("Cookie", cookie)]).await.unwrap().status, 200);
    }
    assert_eq!(t.admin("POST", "/reload", None, b"").await.0, 200);
    let good = std::fs::read_to_string(t.config_path()).unwrap();
    std::fs::write(
        t.config_path(),
        good.replace("clone_id: c2", "clone_id: c1"),
    )
    .unwrap();
    assert_eq!(t.admin("POST", "/reload", None, b"").await.0, 400);
    std::fs::write(t.config_path(), good).unwrap();

    let exported = exported_names(&scrape(&t).await);
    let queries = dashboard_queries();
    assert!(queries.len() >= 14, "{queries:?}");

    // (a) every metric a panel uses is one tether exports.
    for q in &queries {
        for name in metric_names(q) {
            assert!(
                exported.contains(&name),
                "the dashboard uses {name}, which tether does not export"
            );
        }
    }
    // (b) every expression parses: as recording rules, checked by promtool.
    let mut rules = String::from("groups:\n  - name: tether-dashboard\n    rules:\n");
    for (i, q) in queries.iter().enumerate() {
        rules.push_str(&format!(
            "      - record: tether:dashboard_{i}\n        expr: {}\n",
            serde_json::to_string(q).unwrap()
        ));
    }
    let rules_file = dir.join("rules.yml");
    std::fs::write(&rules_file, &rules).unwrap();
    let (ok, out) = promtool(&["check", "rules", rules_file.to_str().unwrap()], b"");
    assert!(ok, "promtool check rules:\n{out}\n{rules}");

    // (c) after traffic, each returns data from the real Prometheus.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut missing: Vec<&String> = queries.iter().collect();
    while !missing.is_empty() {
        let mut still = Vec::new();
        for q in missing {
            if prom.query(q).await.is_empty() {
                still.push(q);
            }
        }
        missing = still;
        if !missing.is_empty() {
            assert!(
                Instant::now() < deadline,
                "no data from Prometheus for: {missing:#?}"
            );
            // Keep some traffic flowing so rates have samples.
            let _ = c.get("/", &[("Cookie", &cookies[0])]).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let up = prom.query("tether_server_up{server=\"was1\"}").await;
    assert_eq!(up[0]["value"][1], "0", "Prometheus saw was1 down: {up:?}");
    drop(prom);
    let _ = std::fs::remove_dir_all(dir);
}
