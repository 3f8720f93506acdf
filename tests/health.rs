//! Active health checks and passive marking, observed through real traffic and `/status`.

mod common;

use common::{new_sessions, tomcats, Opts, Tether};
use std::time::{Duration, Instant};

fn cluster(sims: &[tether::cli::sim::TomcatSim], health: &str) -> String {
    common::cluster_yaml(health, sims)
}

fn start(cluster: String) -> Tether {
    Tether::start_with(Opts {
        cluster,
        admin: true,
        ..Opts::default()
    })
}

/// Polls `/status` until `server`'s health is `want`; returns how long it took.
async fn wait_health(t: &Tether, server: &str, want: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let (_, health, _) = t.server_status(None, server).await;
        if health == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "{server} not {want} after {limit:?}:\n{}",
            t.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_leaves_rotation_within_one_interval_and_comes_back() {
    let sims = tomcats(3).await;
    let hc = "    health_check: { kind: tcp, interval: 300ms, timeout: 200ms, rise: 1, fall: 1 }\n";
    let t = start(cluster(&sims, hc));
    wait_health(&t, "tc2", "up", Duration::from_secs(2)).await;
    sims[1].stop().await;
    // No request is sent: only the check can notice. One interval plus the timeout.
    let took = wait_health(&t, "tc2", "down", Duration::from_secs(3)).await;
    eprintln!("tc2 marked down {took:?} after it was killed (interval 300ms)");
    let seen = new_sessions(&t, 30).await;
    assert_eq!(
        seen.get("tc2"),
        None,
        "no new session on a down server: {seen:?}"
    );
    assert_eq!(sims[1].requests(), 0);

    sims[1].restart().await.unwrap();
    wait_health(&t, "tc2", "up", Duration::from_secs(3)).await;
    let seen = new_sessions(&t, 30).await;
    assert_eq!(seen.get("tc2"), Some(&10), "back in rotation: {seen:?}");
    let log = t.log();
    assert_eq!(
        log.matches("tc2: health check failed").count(),
        1,
        "one log line per transition:\n{log}"
    );
    // Out of rotation at the first failed check, so within one interval (fall: 1).
    assert!(log.contains("tc2: health check failed 1 times"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_checks_use_path_and_expected_status_with_rise_and_fall() {
    let sims = tomcats(2).await;
    let hc = "    health_check: { kind: http, path: /probe, expect: 200-299, interval: 200ms, timeout: 150ms, rise: 2, fall: 2 }\n";
    let t = start(cluster(&sims, hc));
    wait_health(&t, "tc1", "up", Duration::from_secs(2)).await;
    // The application answers 503 while its port stays open: only an HTTP check sees it.
    sims[0].set_status(503);
    let took = wait_health(&t, "tc1", "down", Duration::from_secs(3)).await;
    assert!(
        took >= Duration::from_millis(150),
        "fall: 2 needs two failed checks ({took:?})"
    );
    let seen = new_sessions(&t, 10).await;
    assert_eq!(seen.get("tc1"), None, "{seen:?}");
    sims[0].set_status(0);
    wait_health(&t, "tc1", "up", Duration::from_secs(3)).await;
    let seen = new_sessions(&t, 10).await;
    assert_eq!(seen.get("tc1"), Some(&5), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_marking_works_without_active_checks() {
    let sims = tomcats(2).await;
    let t = start(cluster(&sims, "    recover_after: 60s\n"));
    sims[0].stop().await;
    let (_, health, _) = t.server_status(None, "tc1").await;
    assert_eq!(health, "up", "nothing has noticed yet");
    let seen = new_sessions(&t, 10).await;
    assert_eq!(
        seen.get("tc2"),
        Some(&10),
        "the connect failure was retried on tc2: {seen:?}"
    );
    let (_, health, _) = t.server_status(None, "tc1").await;
    assert_eq!(health, "down", "marked down at the first connect failure");
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    let tc1 = &json["clusters"][0]["servers"][0];
    assert_eq!(
        tc1["failures"], 1,
        "one failure, then no more attempts: {json}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_on_status_retries_idempotent_requests_on_the_next_server() {
    let sims = tomcats(2).await;
    let t = start(cluster(
        &sims,
        "    fail_on_status: [503]\n    recover_after: 60s\n",
    ));
    sims[0].set_status(503);
    let mut c = t.client();
    // tc1 is first in the rotation; its 503 is never seen by a GET.
    for _ in 0..6 {
        let resp = c.get("/", &[]).await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("x-server"), Some("tc2"));
    }
    let (_, health, _) = t.server_status(None, "tc1").await;
    assert_eq!(
        health, "down",
        "like mod_jk, the failing server is put in error"
    );
    // A POST is not sent twice: tc2's 503 is dropped for tether's own (mod_jk's), and tc2
    // is marked down all the same.
    sims[1].set_status(503);
    let before = sims.iter().map(|s| s.requests()).sum::<u64>();
    let resp = c
        .request("POST", "/", &[("Cookie", b"JSESSIONID=x.tc2")], b"data")
        .await
        .unwrap();
    assert_eq!(resp.status, 503, "a POST is never sent twice");
    assert_eq!(sims.iter().map(|s| s.requests()).sum::<u64>(), before + 1);
    assert_eq!(
        resp.header("x-server"),
        None,
        "the server's answer is dropped"
    );
    let (_, health, _) = t.server_status(None, "tc2").await;
    assert_eq!(
        health, "down",
        "marked down whether or not the request goes on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_negative_fail_on_status_fails_the_try_without_marking_the_server_down() {
    let sims = tomcats(2).await;
    let t = start(cluster(&sims, "    fail_on_status: [-404]\n"));
    sims[0].set_status(404);
    let mut c = t.client();
    for _ in 0..4 {
        let resp = c.get("/", &[("Cookie", "JSESSIONID=x.tc1")]).await.unwrap();
        assert_eq!(
            (resp.status, resp.header("x-server")),
            (200, Some("tc2")),
            "tc1's 404 sends the GET on"
        );
    }
    let (_, health, _) = t.server_status(None, "tc1").await;
    assert_eq!(health, "up", "mod_jk's negative code: the server stays up");
    let resp = c
        .request("POST", "/", &[("Cookie", b"JSESSIONID=x.tc1")], b"data")
        .await
        .unwrap();
    assert_eq!((resp.status, resp.header("x-server")), (503, None));
}
