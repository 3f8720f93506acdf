//! Ejection that keeps sessions: a server that answers 5xx in a row
//! takes no new sessions while its own still reach it; if they keep failing it is marked
//! down and they fail over; the ejection ends, and never ejects more than allowed.

mod common;

use common::{cluster_yaml, new_sessions, scrape, tomcats, Browser, Opts, Tether};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_server_loses_new_sessions_first_and_its_own_only_if_they_keep_failing() {
    let sims = tomcats(3).await;
    let t = Tether::start_with(Opts {
        cluster: cluster_yaml(
            "    recover_after: 60s\n    outlier: { consecutive_5xx: 3, ejection: 2s, max_ejected_percent: 34 }\n",
            &sims,
        ),
        admin: true,
        metrics: true,
        ..Opts::default()
    });
    // A session on tc1.
    let mut b = Browser::new(&t);
    while b.get("/").await.1 != "tc1" {
        b = Browser::new(&t);
    }
    // tc1 answers 500 three times in a row (to its own session): ejected.
    sims[0].set_status(500);
    for _ in 0..3 {
        assert_eq!(b.get("/").await, (500, "tc1".to_string()));
    }
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    let tc1 = &json["clusters"][0]["servers"][0];
    assert!(tc1["ejected_for_seconds"].as_u64().is_some(), "{json}");
    assert_eq!(tc1["health"], "up", "ejected, not down");
    // New sessions avoid it; it recovers, and its session still reaches it.
    let fresh = new_sessions(&t, 30).await;
    assert_eq!(fresh.get("tc1"), None, "{fresh:?}");
    sims[0].set_status(0);
    assert_eq!(
        b.get("/").await,
        (200, "tc1".to_string()),
        "its session stays home"
    );
    // A second server failing is not ejected: 2 of 3 is over 34 %.
    sims[1].set_status(500);
    let mut c = Browser::new(&t);
    while c.get("/").await.1 != "tc2" {
        c = Browser::new(&t);
    }
    for _ in 0..3 {
        c.get("/").await;
    }
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    assert_eq!(
        json["clusters"][0]["servers"][1]["ejected_for_seconds"],
        serde_json::Value::Null
    );
    sims[1].set_status(0);
    // The ejection ends after its time: tc1 takes new sessions again.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let back = new_sessions(&t, 30).await;
    assert_eq!(back.get("tc1"), Some(&10), "{back:?}");
    // Ejected again, and failing on: marked down, and the session fails over.
    sims[0].set_status(500);
    for _ in 0..3 {
        assert_eq!(b.get("/").await.0, 500);
    }
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    let left = json["clusters"][0]["servers"][0]["ejected_for_seconds"].as_u64();
    assert!(
        left.is_some_and(|s| s >= 3),
        "the second ejection lasts twice as long: {json}"
    );
    for _ in 0..3 {
        assert_eq!(
            b.get("/").await,
            (500, "tc1".to_string()),
            "still its own server"
        );
    }
    let (status, server) = b.get("/").await;
    assert_ne!(server, "tc1", "down now: failed over ({status})");
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    assert_eq!(
        json["clusters"][0]["servers"][0]["health"], "down",
        "{json}"
    );
    let m = scrape(t.metrics.unwrap()).await;
    assert!(
        m.contains("tether_outlier_ejections_total{cluster=\"shop\"} 2"),
        "{m}"
    );
}

/// A server that takes each request and closes the connection without a word.
async fn mute_server() -> std::net::SocketAddr {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_to_answer_is_ejected_after_consecutive_errors() {
    let sims = tomcats(1).await;
    let mute = mute_server().await;
    let mut cluster = cluster_yaml(
        "    outlier: { consecutive_5xx: 100, consecutive_errors: 2, ejection: 30s }\n",
        &sims,
    );
    cluster.push_str(&format!("      - {{ name: mute, address: \"{mute}\" }}\n"));
    let t = Tether::start_with(Opts {
        cluster,
        admin: true,
        ..Opts::default()
    });
    // POSTs: not sent again, so each failure to answer is the client's 502.
    let mut failed = 0;
    for _ in 0..10 {
        let resp = t.client().request("POST", "/", &[], b"x").await.unwrap();
        if resp.status != 200 {
            assert_eq!(resp.status, 502);
            failed += 1;
        }
    }
    assert_eq!(
        failed, 2,
        "two failures to answer, then no new session goes there"
    );
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    let mute = &json["clusters"][0]["servers"][1];
    assert!(mute["ejected_for_seconds"].as_u64().is_some(), "{json}");
}

/// A GET (idempotent) that a server took and dropped without a byte of answer goes to
/// another server, as nginx's `proxy_next_upstream error` sends it: the client sees no
/// error, and the server is marked down as after a failed connect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_that_a_server_dropped_goes_to_another_and_the_server_is_marked_down() {
    let sims = tomcats(1).await;
    let mute = mute_server().await;
    let mut cluster = cluster_yaml("", &sims);
    cluster.push_str(&format!("      - {{ name: mute, address: \"{mute}\" }}\n"));
    let t = Tether::start_with(Opts {
        cluster,
        admin: true,
        ..Opts::default()
    });
    for _ in 0..10 {
        let resp = t.client().get("/", &[]).await.unwrap();
        assert_eq!(
            resp.status,
            200,
            "{:?}",
            String::from_utf8_lossy(&resp.body)
        );
    }
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    let mute = &json["clusters"][0]["servers"][1];
    assert_eq!(mute["health"], "down", "{json}");
}
