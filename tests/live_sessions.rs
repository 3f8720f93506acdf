//! Live sessions per server: counted from the servers' `Set-Cookie` and
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

/// Two sessions on `tc1` (its only server at first), made through `t`.
async fn two_sessions(t: &Tether) -> Vec<Browser> {
    let mut browsers = Vec::new();
    for _ in 0..2 {
        let mut b = Browser::new(t);
        assert_eq!(b.get("/").await, (200, "tc1".to_string()));
        browsers.push(b);
    }
    browsers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_waits_ends_when_the_last_session_has_expired() {
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: cluster_yaml("    session_timeout: 2s\n", &sims),
        admin: true,
        ..Opts::default()
    });
    let _browsers = two_sessions(&t).await;
    let (status, json) = t
        .admin("GET", "/clusters/shop/servers/tc1/sessions", None, b"")
        .await;
    assert_eq!(status, 200);
    assert_eq!(json["live_sessions"], 2, "{json}");
    // The admin call: answered once the sessions are gone, and the server stopped.
    let start = Instant::now();
    let (status, json) = t
        .admin(
            "POST",
            "/clusters/shop/servers/tc1/drain?wait=10s&then=stop",
            None,
            b"",
        )
        .await;
    let waited = start.elapsed();
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        (json["empty"].as_bool(), json["state"].as_str()),
        (Some(true), Some("stopped"))
    );
    assert!(
        waited >= Duration::from_millis(1000),
        "it waited for the sessions: {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "and no longer: {waited:?}");
    // Bad queries change nothing.
    let (status, _) = t
        .admin(
            "POST",
            "/clusters/shop/servers/tc1/drain?wait=soon",
            None,
            b"",
        )
        .await;
    assert_eq!(status, 400);
    let (_, json) = t
        .admin("GET", "/clusters/shop/servers/tc1/sessions", None, b"")
        .await;
    assert_eq!(json["state"], "stopped");
}

/// Right after a start, no session seen is not yet no session: a drain that waits for the
/// server to be empty waits until tether has watched a whole session timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_right_after_a_start_waits_until_tether_knows_every_session() {
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: cluster_yaml("    session_timeout: 3s\n", &sims),
        admin: true,
        ..Opts::default()
    });
    let (_, json) = t
        .admin("GET", "/clusters/shop/servers/tc1/sessions", None, b"")
        .await;
    assert_eq!(json["knows_all"], false, "{json}");
    let start = Instant::now();
    let (status, json) = t
        .admin(
            "POST",
            "/clusters/shop/servers/tc1/drain?wait=10s",
            None,
            b"",
        )
        .await;
    let waited = start.elapsed();
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        (json["empty"].as_bool(), json["knows_all"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(
        waited >= Duration::from_millis(1000),
        "it waited to know: {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "and no longer: {waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tether_drain_waits_prints_and_exits_by_what_happened() {
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: cluster_yaml("    session_timeout: 2s\n", &sims),
        admin: true,
        ..Opts::default()
    });
    let conf = t.dir.join("tether.yaml");
    let drain = move |args: &[&str]| {
        let out = std::process::Command::new(common::tether_bin())
            .arg("-c")
            .arg(&conf)
            .arg("drain")
            .args(args)
            .args(["--every", "200ms"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    // A session kept alive by its browser: the wait times out (exit 1), still draining.
    let mut browsers = two_sessions(&t).await;
    let keeper = {
        let mut b = browsers.pop().unwrap();
        tokio::spawn(async move {
            for _ in 0..12 {
                b.get("/").await;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let out = tokio::task::spawn_blocking({
        let drain = drain.clone();
        move || drain(&["shop/tc1", "--wait", "--timeout", "1s"])
    })
    .await
    .unwrap();
    assert_eq!(out.0, Some(1), "{}", out.1);
    assert!(out.1.contains("2 live sessions, empty by 20"), "{}", out.1);
    keeper.await.unwrap();
    // Nobody comes any more: it ends when they expire, and stops the server.
    let start = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        drain(&["shop/tc1", "--wait", "--timeout", "10s", "--then", "stop"])
    })
    .await
    .unwrap();
    assert_eq!(out.0, Some(0), "{}", out.1);
    assert!(out.1.contains("no live session left"), "{}", out.1);
    assert!(out.1.ends_with("shop/tc1: stopped\n"), "{}", out.1);
    assert!(start.elapsed() < Duration::from_secs(5));
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    assert_eq!(json["clusters"][0]["servers"][0]["state"], "stopped");
    // A target it cannot drain: exit 2, with the reason.
    let out = std::process::Command::new(common::tether_bin())
        .arg("-c")
        .arg(t.dir.join("tether.yaml"))
        .args(["drain", "shop/nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("404"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_rescue_balances_stale_cookies_only_once_tether_knows_every_session() {
    let sims = tomcats(2).await;
    let t = Tether::start_with(Opts {
        cluster: cluster_yaml("    session_timeout: 2s\n    drain_rescue: true\n", &sims),
        admin: true,
        metrics: true,
        ..Opts::default()
    });
    let stale = |id: &str| format!("JSESSIONID={id}.tc1");
    let server_for = |cookie: String| {
        let t = &t;
        async move {
            let resp = t
                .client()
                .get("/", &[("Cookie", cookie.as_str())])
                .await
                .unwrap();
            resp.header("x-server").unwrap().to_string()
        }
    };
    // A live session on tc1, kept alive.
    let mut live = Browser::new(&t);
    let mut home = String::new();
    while home != "tc1" {
        live = Browser::new(&t);
        home = live.get("/").await.1;
    }
    let (status, _) = t
        .admin("POST", "/clusters/shop/servers/tc1/drain", None, b"")
        .await;
    assert_eq!(status, 200);
    // tether has not watched for a whole session_timeout: a cookie it has not seen may be
    // a session it missed, so it goes to the draining server as without drain_rescue.
    assert_eq!(server_for(stale("EARLY")).await, "tc1");
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2300) {
        assert_eq!(live.get("/").await.1, "tc1");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Now it knows: a stale cookie is balanced as a new session; the live one stays home.
    assert_eq!(server_for(stale("STALE")).await, "tc2");
    assert_eq!(
        live.get("/").await.1,
        "tc1",
        "a live session keeps its draining server"
    );
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    assert_eq!(
        json["clusters"][0]["servers"][0]["sessions"]["rescued"], 1,
        "{json}"
    );
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!(sample(&m, "tether_drain_rescued_total", "tc1"), 1.0, "{m}");
}

#[test]
fn drain_rescue_is_refused_where_it_cannot_know() {
    let dir = common::scratch_dir("drain-rescue-config");
    for (top, extra, why) in [
        (
            "",
            "    session_table_max: 0\n    drain_rescue: true\n",
            "needs the live session count",
        ),
        (
            "",
            "    sticky: false\n    drain_rescue: true\n",
            "needs the live session count",
        ),
    ] {
        let (code, err) = common::tether_t(
            &dir,
            &format!(
                "{top}listeners:\n  - {{ name: web, address: \"127.0.0.1:1\", cluster: shop }}\n\
                 clusters:\n  - name: shop\n{extra}    servers:\n      - {{ name: a, address: \"127.0.0.1:2\" }}\n"
            ),
        );
        assert_eq!(code, Some(1));
        assert!(err.contains("drain_rescue") && err.contains(why), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balance_by_sessions_evens_out_a_skewed_cluster() {
    let sims = tomcats(2).await;
    let t = Tether::start_with(Opts {
        cluster: cluster_yaml("    balance: sessions\n", &sims),
        admin: true,
        ..Opts::default()
    });
    // tc2 is away while 20 sessions are made: all on tc1.
    let (status, _) = t
        .admin("POST", "/clusters/shop/servers/tc2/stop", None, b"")
        .await;
    assert_eq!(status, 200);
    let skewed = common::new_sessions(&t, 20).await;
    assert_eq!(skewed.get("tc1"), Some(&20));
    t.admin("POST", "/clusters/shop/servers/tc2/activate", None, b"")
        .await;
    // New sessions go to the emptier server until the two are even, then alternate.
    let catch_up = common::new_sessions(&t, 20).await;
    assert_eq!(catch_up.get("tc2"), Some(&20), "{catch_up:?}");
    let even = common::new_sessions(&t, 40).await;
    let (a, b) = (
        even.get("tc1").copied().unwrap_or(0),
        even.get("tc2").copied().unwrap_or(0),
    );
    assert!(a.abs_diff(b) <= 2, "{even:?}");
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    let (l1, l2) = (live(&json, "tc1").0, live(&json, "tc2").0);
    assert!(l1.abs_diff(l2) <= 2 && l1 + l2 == 80, "{json}");
}

#[test]
fn balance_by_sessions_needs_the_count() {
    let (code, err) = common::tether_t(
        &common::scratch_dir("balance-sessions-config"),
        "listeners:\n  - { name: web, address: \"127.0.0.1:1\", cluster: shop }\n\
         clusters:\n  - name: shop\n    balance: sessions\n    session_table_max: 0\n    servers:\n\
         \x20     - { name: a, address: \"127.0.0.1:2\" }\n",
    );
    assert_eq!(code, Some(1));
    assert!(
        err.contains("clusters[0].balance") && err.contains("needs the live session count"),
        "{err}"
    );
}
