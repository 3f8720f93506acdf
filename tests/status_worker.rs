//! mod_jk's status worker's jobs over the admin API: `recover` a server marked down now,
//! `reset` the counters `/status` shows; and the per-server counters an operator read in
//! jkstatus (errors, reply timeouts, the peak in flight) on `/status` and in the metrics.

mod common;

use common::servers::status_of;
use common::{tomcats, Opts, Tether};
use std::time::Duration;

fn start(cluster: String) -> Tether {
    Tether::start_with(Opts {
        cluster,
        admin: true,
        metrics: true,
        ..Opts::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_puts_a_server_marked_down_back_at_once() {
    let sims = tomcats(2).await;
    // No health check, and a long recover_after: without `recover`, tc1 stays out a minute.
    let t = start(common::cluster_yaml("    recover_after: 60s\n", &sims));
    let tc1 = [("Cookie", "JSESSIONID=A.tc1")];
    sims[0].stop().await;
    let mut c = t.client();
    let r = c.get("/", &tc1).await.unwrap();
    assert_eq!(r.header("x-server"), Some("tc2"), "failed over");
    assert_eq!(status_of(&t, "tc1").await["health"], "down");
    sims[0].restart().await.unwrap();
    let r = c.get("/", &tc1).await.unwrap();
    assert_eq!(r.header("x-server"), Some("tc2"), "still marked down");
    let (status, json) = t
        .admin("POST", "/clusters/shop/servers/tc1/recover", None, b"")
        .await;
    assert_eq!(
        (status, &json["recovered"]),
        (200, &serde_json::json!(true))
    );
    assert_eq!(status_of(&t, "tc1").await["health"], "up");
    let r = c.get("/", &tc1).await.unwrap();
    assert_eq!(r.header("x-server"), Some("tc1"), "its sessions come back");
    let (_, json) = t
        .admin("POST", "/clusters/shop/servers/tc1/recover", None, b"")
        .await;
    assert_eq!(json["recovered"], false, "it was up");
    let (status, _) = t
        .admin("POST", "/clusters/shop/servers/nope/recover", None, b"")
        .await;
    assert_eq!(status, 404);
    // Bytes each way, heads and bodies, as jkstatus counted them.
    let before = status_of(&t, "tc1").await;
    let body = vec![b'x'; 10_000];
    let r = c
        .request("POST", "/", &[("Cookie", b"JSESSIONID=A.tc1")], &body)
        .await
        .unwrap();
    assert_eq!(r.header("x-server"), Some("tc1"));
    let after = status_of(&t, "tc1").await;
    let grew = |field: &str| after[field].as_u64().unwrap() - before[field].as_u64().unwrap();
    assert!(
        (10_000..11_000).contains(&grew("bytes_to_server")),
        "{before} {after}"
    );
    assert!(
        grew("bytes_from_server") as usize >= r.body.len(),
        "{after}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_reply_timeouts_and_the_peak_are_counted_and_reset() {
    // A server that takes requests and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    common::servers::fixed(silent, None);
    let cluster = format!(
        "    read_timeout: 200ms\n    servers:\n      - {{ name: slow, address: \"{addr}\", route: slow }}\n"
    );
    let t = start(cluster);
    let asks: Vec<_> = (0..3)
        .map(|_| {
            let addr = t.addr;
            tokio::spawn(async move {
                let mut client = tether::cli::sim::HttpClient::new(addr);
                client.get("/", &[]).await.unwrap().status
            })
        })
        .collect();
    for a in asks {
        assert_eq!(a.await.unwrap(), 504);
    }
    let s = status_of(&t, "slow").await;
    assert_eq!(
        (
            &s["requests"],
            &s["errors"],
            &s["reply_timeouts"],
            &s["inflight"]
        ),
        (
            &serde_json::json!(3),
            &serde_json::json!(3),
            &serde_json::json!(3),
            &serde_json::json!(0)
        ),
        "{s}"
    );
    assert_eq!(s["inflight_peak"], 3, "three at once: {s}");
    assert_eq!(s["bytes_from_server"], 0, "no answer: {s}");
    let scrape = common::scrape(t.metrics.unwrap()).await;
    let timeouts =
        r#"tether_server_failed_requests_total{cluster="shop",reason="timeout",server="slow"} 3"#;
    assert!(scrape.contains(timeouts), "{scrape}");
    assert!(
        scrape.contains(r#"tether_server_inflight_peak{cluster="shop",server="slow"} 3"#),
        "{scrape}"
    );
    let (status, json) = t
        .admin("POST", "/clusters/shop/servers/slow/reset", None, b"")
        .await;
    assert_eq!((status, &json["reset"]), (200, &serde_json::json!(true)));
    let s = status_of(&t, "slow").await;
    for field in [
        "requests",
        "errors",
        "reply_timeouts",
        "inflight_peak",
        "failures",
        "bytes_to_server",
    ] {
        assert_eq!(s[field], 0, "{field}: {s}");
    }
    // Prometheus's counters never go back: a rate over a reset stays right.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let scrape = common::scrape(t.metrics.unwrap()).await;
    assert!(scrape.contains(timeouts), "{scrape}");
}
