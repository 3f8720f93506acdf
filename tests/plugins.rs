//! Routing plugins over real sockets: `route_lookup` against a real HTTP look-up service,
//! and `route_table` from a CSV file.

mod common;

use common::lookup::Lookup;
use common::{engine_requests, scratch_dir, server_line, tomcats, Opts, Tether};
use std::time::{Duration, Instant};
use tether::cli::sim::HttpClient;

/// Tether whose listener runs `route_lookup` (key from `X-User`) against `lookup`.
fn start(sims: &[tether::cli::sim::TomcatSim], lookup: &Lookup, extra: &str) -> Tether {
    start_answering(sims, lookup, "{ header: X-Route }", extra)
}

fn start_answering(
    sims: &[tether::cli::sim::TomcatSim],
    lookup: &Lookup,
    answer: &str,
    extra: &str,
) -> Tether {
    start_logging(sims, lookup, answer, extra, None)
}

fn start_logging(
    sims: &[tether::cli::sim::TomcatSim],
    lookup: &Lookup,
    answer: &str,
    extra: &str,
    log: Option<&'static str>,
) -> Tether {
    // The plugin sits on the listener, so the listener line is written by hand here.
    let mut cluster = String::from("    servers:\n");
    for s in sims {
        cluster.push_str(&server_line(s, ""));
    }
    let plugin = format!(
        "      - name: route_lookup\n        key: {{ header: X-User }}\n        url: \"http://{}/route/{{key}}\"\n        answer: {answer}\n{extra}",
        lookup.addr()
    );
    Tether::start_with(Opts {
        cluster,
        listener_plugins: plugin,
        metrics: true,
        log,
        ..Opts::default()
    })
}

async fn as_user(t: &Tether, user: &str, cookie: Option<&str>) -> tether::cli::sim::Response {
    let mut headers = vec![("X-User", user)];
    if let Some(c) = cookie {
        headers.push(("Cookie", c));
    }
    t.client().get("/", &headers).await.unwrap()
}

/// `tether_route_lookups_total` of `route_lookup` for one result, from a scrape.
async fn lookups(t: &Tether, result: &str) -> f64 {
    let series =
        format!(r#"tether_route_lookups_total{{plugin="route_lookup",result="{result}"}}"#);
    scrape(t, &series).await
}

/// The value of one series (name and labels, exactly), from a scrape.
async fn scrape(t: &Tether, series: &str) -> f64 {
    let resp = HttpClient::new(t.metrics.unwrap())
        .get("/metrics", &[])
        .await
        .unwrap();
    let text = resp.body_str();
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_go_where_the_api_says_and_sessions_still_win() {
    let sims = tomcats(3).await;
    let lookup = Lookup::start(&[
        ("001", "shop/tc1"),
        ("002", "shop/tc2"),
        ("003", "shop/tc1"),
    ])
    .await;
    let t = start(&sims, &lookup, "");
    for (user, server) in [
        ("001", "tc1"),
        ("002", "tc2"),
        ("003", "tc1"),
        ("001", "tc1"),
        ("002", "tc2"),
    ] {
        for _ in 0..3 {
            assert_eq!(
                as_user(&t, user, None).await.header("x-server"),
                Some(server),
                "user {user}"
            );
        }
    }
    // Answers are cached: one call per user.
    assert_eq!(lookup.calls(), 3);
    // A request that carries a session of the cluster keeps its affinity.
    let resp = as_user(&t, "001", Some("JSESSIONID=S1.tc3")).await;
    assert_eq!(
        resp.header("x-server"),
        Some("tc3"),
        "the session's server wins over the plugin"
    );
    // No key: the listener's cluster, normal balancing.
    let resp = t.client().get("/", &[]).await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(lookups(&t, "miss").await, 3.0);
    // On tether's engine (the default) the plugins ran there: nothing was handed over.
    if std::env::var("TETHER_HTTP1").as_deref() != Ok("proxy") {
        let m = HttpClient::new(t.metrics.unwrap())
            .get("/metrics", &[])
            .await
            .unwrap()
            .body_str()
            .to_string();
        let served = (
            engine_requests(&m, "engine"),
            engine_requests(&m, "handover"),
        );
        assert_eq!(served, (17, 0), "{m}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_down_unknown_targets_and_slow_answers_fall_back() {
    let sims = tomcats(2).await;
    let lookup = Lookup::start(&[
        ("001", "shop/tc2"),
        ("666", "10.6.6.6:80"),
        ("667", "othercluster"),
    ])
    .await;
    let t = start(&sims, &lookup, "        timeout: 200ms\n");
    // Unknown targets are rejected, never used: the request is balanced normally.
    for user in ["666", "667"] {
        let resp = as_user(&t, user, None).await;
        assert_eq!(resp.status, 200);
    }
    assert_eq!(lookups(&t, "rejected").await, 2.0);

    // A slow API: the request falls back within the timeout, others keep flowing.
    as_user(&t, "001", None).await; // cache 001 first
    lookup.set_delay(Duration::from_secs(3));
    let t2 = t.addr;
    let slow = tokio::spawn(async move {
        let start = Instant::now();
        let resp = HttpClient::new(t2)
            .get("/", &[("X-User", "999")])
            .await
            .unwrap();
        (resp.status, start.elapsed())
    });
    for _ in 0..20 {
        assert_eq!(
            as_user(&t, "001", None).await.header("x-server"),
            Some("tc2"),
            "cached users keep flowing"
        );
    }
    let (status, took) = slow.await.unwrap();
    assert_eq!(status, 200, "fell back to balancing");
    assert!(
        took < Duration::from_secs(3),
        "did not wait for the slow API ({took:?})"
    );
    assert_eq!(lookups(&t, "timeout").await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_down_with_fallback_reject_answers_503() {
    let sims = tomcats(1).await;
    let lookup = Lookup::start(&[]).await;
    // Point the plugin at a port where nothing listens.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut dead_lookup = lookup.clone();
    dead_lookup.addr = Some(dead);
    let t = start(&sims, &dead_lookup, "        fallback: reject\n");
    let resp = as_user(&t, "001", None).await;
    assert_eq!(resp.status, 503);
    assert!(
        resp.body_str().contains("routing service"),
        "{}",
        resp.body_str()
    );
    assert_eq!(lookups(&t, "error").await, 1.0);
    let t_balance = start(&sims, &dead_lookup, "");
    assert_eq!(
        as_user(&t_balance, "001", None).await.status,
        200,
        "fallback: balance"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_requests_for_one_new_key_make_one_call() {
    let sims = tomcats(2).await;
    let lookup = Lookup::start(&[("042", "shop/tc2")]).await;
    lookup.set_delay(Duration::from_millis(100));
    let t = start(&sims, &lookup, "");
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let addr = t.addr;
            tokio::spawn(async move {
                let resp = HttpClient::new(addr)
                    .get("/", &[("X-User", "042")])
                    .await
                    .unwrap();
                resp.header("x-server").unwrap_or_default().to_string()
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), "tc2");
    }
    assert_eq!(
        lookup.calls(),
        1,
        "concurrent look-ups of one key share one call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_answer_is_asked_again() {
    let sims = tomcats(2).await;
    let lookup = Lookup::start(&[("001", "shop/tc1"), ("404", "")]).await;
    let t = start(
        &sims,
        &lookup,
        "        cache: { ttl: 300ms, negative_ttl: 300ms }\n",
    );
    assert_eq!(
        as_user(&t, "001", None).await.header("x-server"),
        Some("tc1")
    );
    lookup.set("001", "shop/tc2");
    assert_eq!(
        as_user(&t, "001", None).await.header("x-server"),
        Some("tc1"),
        "cached"
    );
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(
        as_user(&t, "001", None).await.header("x-server"),
        Some("tc2"),
        "asked again after the TTL"
    );
    assert_eq!(lookup.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_table_file_routes_users() {
    let sims = tomcats(3).await;
    let dir = scratch_dir("route-table");
    let file = dir.join("users.csv");
    std::fs::write(&file, "key,target\n001,shop/tc3\n002,shop/tc1\n").unwrap();
    let mut cluster = String::from("    servers:\n");
    for s in &sims {
        cluster.push_str(&server_line(s, ""));
    }
    let t = Tether::start_with(Opts {
        cluster,
        listener_plugins: format!(
            "      - {{ name: route_table, key: {{ cookie: user }}, file: {} }}\n",
            file.display()
        ),
        admin: true,
        ..Opts::default()
    });
    let mut c = t.client();
    for _ in 0..3 {
        let r = c.get("/", &[("Cookie", "user=001")]).await.unwrap();
        assert_eq!(r.header("x-server"), Some("tc3"));
        let r = c.get("/", &[("Cookie", "user=002")]).await.unwrap();
        assert_eq!(r.header("x-server"), Some("tc1"));
    }
    // Reloaded with the config.
    std::fs::write(&file, "001,shop/tc2\n").unwrap();
    assert_eq!(t.admin("POST", "/reload", None, b"").await.0, 200);
    let r = c.get("/", &[("Cookie", "user=001")]).await.unwrap();
    assert_eq!(r.header("x-server"), Some("tc2"));
    // A table naming an unknown target is a config error; the running table stays.
    std::fs::write(&file, "001,evil.example:80\n").unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 400);
    assert!(
        json.to_string().contains("not a configured cluster"),
        "{json}"
    );
    let r = c.get("/", &[("Cookie", "user=001")]).await.unwrap();
    assert_eq!(r.header("x-server"), Some("tc2"));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_can_come_from_a_json_body() {
    let sims = tomcats(3).await;
    let lookup = Lookup::start(&[("001", "shop/tc3"), ("002", "shop")]).await;
    lookup.answer_json();
    let t = start_answering(&sims, &lookup, "{ json: target }", "");
    for _ in 0..3 {
        assert_eq!(
            as_user(&t, "001", None).await.header("x-server"),
            Some("tc3")
        );
    }
    // A cluster without a server: balanced inside it.
    assert_eq!(as_user(&t, "002", None).await.status, 200);
    assert_eq!(lookup.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_api_is_asked_once_per_key_and_then_not_until_it_answers() {
    let sims = tomcats(2).await;
    let users = ["001", "002", "003", "004"];
    let lookup = Lookup::start(&users.map(|u| (u, "shop/tc2"))).await;
    lookup.set_delay(Duration::from_secs(3));
    let timeout = Duration::from_millis(300);
    let t = start_logging(
        &sims,
        &lookup,
        "{ header: X-Route }",
        "        timeout: 300ms\n        circuit: { failures: 2, cooldown: 1s }\n",
        Some("info"),
    );
    let timed = |user: &'static str| {
        let t = &t;
        async move {
            let start = Instant::now();
            let resp = as_user(t, user, None).await;
            assert_eq!(resp.status, 200, "fallback: balance");
            start.elapsed()
        }
    };
    let open = r#"tether_route_lookup_circuit_open{plugin="route_lookup"}"#;
    // The first request of a key waits for the timeout; the next ones get the cached
    // failure at once.
    assert!(timed("001").await >= timeout);
    for _ in 0..3 {
        let took = timed("001").await;
        assert!(took < timeout, "the failure is cached ({took:?})");
    }
    assert_eq!(lookup.calls(), 1);
    assert_eq!(lookups(&t, "cached_error").await, 3.0);
    // The second failure in a row opens the breaker: other keys are not asked.
    assert!(timed("002").await >= timeout);
    assert_eq!(scrape(&t, open).await, 1.0);
    let took = timed("003").await;
    assert!(took < timeout, "short-circuited ({took:?})");
    assert_eq!(lookup.calls(), 2);
    assert_eq!(lookups(&t, "short_circuit").await, 1.0);
    // The API is back: after the cool-down one probe asks, and the breaker closes.
    lookup.set_delay(Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        as_user(&t, "004", None).await.header("x-server"),
        Some("tc2")
    );
    assert_eq!(lookup.calls(), 3);
    assert_eq!(scrape(&t, open).await, 0.0);
    // One log line when it opens, one when it closes; none per request.
    let log = t.log();
    assert_eq!(log.matches("failed 2 times in a row").count(), 1, "{log}");
    assert_eq!(log.matches("answers again").count(), 1, "{log}");
}
