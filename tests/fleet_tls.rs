//! The fleet's Redis over TLS (`rediss://` with `shared_state.ca_file`): instances sync
//! through a real TLS-only `redis-server`, and one that does not trust Redis's certificate
//! stays out of the fleet and keeps serving requests.

mod common;

use common::fleet::*;
use common::pki::Pki;
use common::redis::Redis;
use common::scratch_dir;
use std::time::Duration;

/// A TLS-only Redis on loopback whose certificate the test CA (`ca.pem`) signed.
fn tls_redis(dir: &std::path::Path, pki: &Pki) -> Redis {
    Redis::start_tls(
        &dir.join("redis"),
        &pki.path("loopback.crt"),
        &pki.path("loopback.key"),
        &pki.path("ca.pem"),
    )
}

/// `shared_state.ca_file` (indented 2) naming `file` of `pki`.
fn ca_file(pki: &Pki, file: &str) -> String {
    format!("  ca_file: {}\n", pki.path(file))
}

/// `fleet.up` of `GET /status`.
async fn fleet_up(t: &common::Tether) -> serde_json::Value {
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    json["fleet"]["up"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_change_reaches_the_other_instance_over_tls() {
    let dir = scratch_dir("fleet-tls");
    let pki = Pki::new(&dir.join("pki"));
    let redis = tls_redis(&dir, &pki);
    let (_cluster, sims) = was_cluster().await;
    let ca = ca_file(&pki, "ca.pem");
    let a = instance(&sims, &redis.tls_url(), "a", &ca);
    let b = instance(&sims, &redis.tls_url(), "b", &ca);
    let took = until("both in sync over TLS", Duration::from_secs(5), || async {
        metric(&a, "tether_shared_state_up").await == 1.0
            && metric(&b, "tether_shared_state_up").await == 1.0
    })
    .await;
    println!("both instances in sync over TLS within {took:?}");
    assert!(
        a.log()
            .contains(&format!("in sync with {}", redis.tls_url())),
        "{}",
        a.log()
    );

    let (status, _) = a
        .admin("POST", "/clusters/shop/servers/was1/drain", None, b"")
        .await;
    assert_eq!(status, 200);
    let took = until(
        "the drain reaches b through Redis over TLS",
        Duration::from_secs(3),
        || async { b.server_status(None, "was1").await.0 == "draining" },
    )
    .await;
    println!("drain applied on b within {took:?}");
    let (_, json) = b.admin("GET", "/status", None, b"").await;
    assert_eq!(
        json["clusters"][0]["servers"][0]["fleet_change"]["by"], "a",
        "b says who drained it: {json}"
    );
    assert_eq!(json["fleet"]["up"], true);
    // The change is in Redis itself (read over TLS by redis-cli).
    let held = redis.cli(&["HGET", "{test}:servers", "shop/was1"]);
    assert!(
        held.contains("draining") && held.ends_with("|a\n"),
        "{held}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_does_not_trust_redis_stays_out_and_serves_alone() {
    let dir = scratch_dir("fleet-tls-ca");
    let pki = Pki::new(&dir.join("pki"));
    let redis = tls_redis(&dir, &pki);
    let (_cluster, sims) = was_cluster().await;
    // `other-ca.pem` did not sign Redis's certificate.
    let t = instance(&sims, &redis.tls_url(), "a", &ca_file(&pki, "other-ca.pem"));

    // The load before listening failed (startup_timeout is 2 s; it failed at once), and
    // the sync task has failed, waited and failed again since.
    let log = t.log();
    assert!(
        log.contains("is unreachable at start (invalid peer certificate: UnknownIssuer)"),
        "the start names the certificate problem: {log}"
    );
    until(
        "the sync task fails twice",
        Duration::from_secs(5),
        || async { metric(&t, "tether_shared_state_reconnects_total").await >= 2.0 },
    )
    .await;
    assert!(
        t.log()
            .contains("unreachable (invalid peer certificate: UnknownIssuer); requests go on"),
        "{}",
        t.log()
    );
    assert_eq!(metric(&t, "tether_shared_state_up").await, 0.0);
    assert_eq!(fleet_up(&t).await, false);
    let beats = redis.cli(&["HKEYS", "{test}:instances"]);
    assert!(
        beats.trim().is_empty(),
        "no heartbeat reached Redis: {beats}"
    );

    // Requests go on with this instance's own state; an operator's change applies here.
    for (cookie, home) in sessions(&t, 6).await {
        assert_eq!(visit(&t, &cookie).await.0, home);
    }
    let (status, _) = t
        .admin("POST", "/clusters/shop/servers/was1/drain", None, b"")
        .await;
    assert_eq!(status, 200);
    assert_eq!(t.server_status(None, "was1").await.0, "draining");
    let _ = std::fs::remove_dir_all(&dir);
}
