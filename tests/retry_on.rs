//! `retry_on` as operators configure retries (HAProxy's `retry-on`, nginx's
//! `proxy_next_upstream`, the plug-in's `ServerIOTimeoutRetry`): a server that does not
//! answer in time, one that answers junk, a listed status, each sends an idempotent request
//! to the next server without marking the first down; others only with
//! `retry_non_idempotent`; never past `retry_timeout`; the defaults keep a timeout a 504.

mod common;

use common::{tomcats, Opts, Tether};
use std::net::SocketAddr;

/// A server that reads requests and answers each with `answer` (never, when `None`).
async fn fake(answer: Option<&'static [u8]>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    common::servers::fixed(listener, answer.map(<[u8]>::to_vec));
    addr
}

/// tether with `settings` in front of server `bad` (route `bad`) at `bad_addr` and the
/// simulated `tc1`.
fn tether(settings: &str, bad_addr: SocketAddr, good: &tether::cli::sim::TomcatSim) -> Tether {
    let cluster = format!(
        "{settings}    read_timeout: 300ms\n    recover_after: 60s\n    servers:\n      - {{ name: bad, address: \"{bad_addr}\", route: bad }}\n{}",
        common::server_line(good, "")
    );
    Tether::start_with(Opts {
        cluster,
        admin: true,
        metrics: true,
        ..Opts::default()
    })
}

const BAD: [(&str, &[u8]); 1] = [("Cookie", b"JSESSIONID=S.bad")];

async fn ask(t: &Tether, method: &str) -> (u16, Option<String>) {
    let r = t.client().request(method, "/x", &BAD, b"").await.unwrap();
    (r.status, r.header("x-server").map(str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_timeout_goes_to_the_next_server_when_listed() {
    let sims = tomcats(1).await;
    let silent = fake(None).await;
    // By default a server that does not answer in time is a 504.
    let t = tether("", silent, &sims[0]);
    assert_eq!(ask(&t, "GET").await, (504, None));
    drop(t);
    let t = tether(
        "    retry_on: [connect_failure, response_timeout]\n",
        silent,
        &sims[0],
    );
    assert_eq!(
        ask(&t, "GET").await,
        (200, Some("tc1".into())),
        "failed over"
    );
    let (_, health, _) = t.server_status(None, "bad").await;
    assert_eq!(
        health, "up",
        "slow is not down (the plug-in's positive ServerIOTimeout)"
    );
    assert_eq!(
        ask(&t, "POST").await,
        (504, None),
        "a POST is not sent twice"
    );
    let scrape = common::scrape(t.metrics.unwrap()).await;
    assert!(
        scrape.contains(r#"tether_routing_decisions_total{cluster="shop",outcome="failover"} 1"#),
        "a session's retry elsewhere is a failover: {scrape}"
    );
    drop(t);
    let t = tether(
        "    retry_on: [response_timeout]\n    retry_non_idempotent: true\n",
        silent,
        &sims[0],
    );
    assert_eq!(
        ask(&t, "POST").await,
        (200, Some("tc1".into())),
        "the operator allowed it"
    );
    drop(t);
    // No second try once `retry_timeout` passed since the request began.
    let t = tether(
        "    retry_on: [response_timeout]\n    retry_timeout: 200ms\n",
        silent,
        &sims[0],
    );
    assert_eq!(ask(&t, "GET").await, (504, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_and_listed_statuses_go_to_the_next_server_the_last_answer_relayed() {
    let sims = tomcats(1).await;
    let junk = fake(Some(b"HELLO THERE\r\n\r\n")).await;
    let t = tether("", junk, &sims[0]);
    assert_eq!(ask(&t, "GET").await.0, 502, "junk is a 502 by default");
    drop(t);
    let t = tether("    retry_on: [junk_response, 503]\n", junk, &sims[0]);
    assert_eq!(ask(&t, "GET").await, (200, Some("tc1".into())));
    drop(t);
    let busy = fake(Some(
        b"HTTP/1.1 503 Service Unavailable\r\nX-Server: bad\r\nContent-Length: 4\r\n\r\nbusy",
    ))
    .await;
    let t = tether("    retry_on: [503]\n", busy, &sims[0]);
    assert_eq!(ask(&t, "GET").await, (200, Some("tc1".into())));
    let (_, health, _) = t.server_status(None, "bad").await;
    assert_eq!(health, "up", "a retry_on status does not mark down");
    // When the last try answers a listed status too, that answer is relayed.
    sims[0].set_status(503);
    assert_eq!(ask(&t, "GET").await, (503, Some("tc1".into())));
    // A POST is not sent again: the first answer is relayed.
    assert_eq!(ask(&t, "POST").await, (503, Some("bad".into())));
}

#[test]
fn bad_retry_settings_are_refused() {
    for (setting, needle) in [
        ("retry_on: [sometimes]", "clusters[0].retry_on[0]"),
        ("retry_on: [200]", "clusters[0].retry_on[0]"),
        ("retry_timeout: 2h", "clusters[0].retry_timeout"),
    ] {
        let dir = common::scratch_dir("retry-check");
        let yaml = format!(
            "listeners:\n  - {{ name: web, address: \"127.0.0.1:1\", cluster: shop }}\nclusters:\n  - name: shop\n    {setting}\n    servers:\n      - {{ name: a, address: \"127.0.0.1:2\" }}\n"
        );
        let (code, stderr) = common::tether_t(&dir, &yaml);
        assert!(code != Some(0), "{setting}");
        assert!(stderr.contains(needle), "{setting}: {stderr}");
    }
}
