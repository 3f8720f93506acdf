//! Stickiness, weights and session id sources through a real tether process.

mod common;

use common::{server_line, tomcats, Browser, Opts, Tether};
use std::collections::HashMap;

fn cluster(sims: &[tether::cli::sim::TomcatSim], extras: &[&str]) -> String {
    let mut c = String::from("    servers:\n");
    for (i, sim) in sims.iter().enumerate() {
        c.push_str(&server_line(sim, extras.get(i).copied().unwrap_or("")));
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_of_50_sessions_stays_on_its_server() {
    let sims = tomcats(3).await;
    let t = Tether::start(&cluster(&sims, &[]));
    let mut browsers: Vec<Browser> = (0..50).map(|_| Browser::new(&t)).collect();
    let mut home = Vec::new();
    for b in &mut browsers {
        let (status, server) = b.get("/app/").await;
        assert_eq!(status, 200);
        home.push(server);
    }
    let mut stayed = 0;
    for round in 0..20 {
        for (b, home) in browsers.iter_mut().zip(&home) {
            let (status, server) = b.get(&format!("/app/page{round}")).await;
            assert_eq!(status, 200);
            stayed += (server == *home) as u32;
        }
    }
    assert_eq!(
        stayed, 1000,
        "all 1,000 sticky requests reach the session's server"
    );
    // Each session's counter on its server went up to 21: the session itself was kept.
    let total: usize = sims.iter().map(|s| s.session_count()).sum();
    assert_eq!(total, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_sessions_follow_the_weights() {
    let sims = tomcats(3).await;
    let t = Tether::start(&cluster(&sims, &["weight: 1", "weight: 1", "weight: 2"]));
    let mut count: HashMap<String, u32> = HashMap::new();
    let mut client = t.client();
    for _ in 0..400 {
        let resp = client.get("/", &[]).await.unwrap();
        assert_eq!(resp.status, 200);
        *count
            .entry(resp.header("x-server").unwrap().to_string())
            .or_default() += 1;
    }
    // Smooth weighted round robin is exact over every period of 4 new sessions.
    assert_eq!(count["tc1"], 100, "{count:?}");
    assert_eq!(count["tc2"], 100, "{count:?}");
    assert_eq!(count["tc3"], 200, "{count:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_session_id_beats_the_cookie() {
    let sims = tomcats(3).await;
    let t = Tether::start(&cluster(&sims, &[]));
    let mut c = t.client();
    let cases = [
        // (path, cookie, expected server)
        ("/app;jsessionid=AAA.tc2", "JSESSIONID=BBB.tc3", "tc2"),
        ("/app;jsessionid=AAA.tc1?x=1", "JSESSIONID=BBB.tc3", "tc1"),
        ("/app", "JSESSIONID=BBB.tc3", "tc3"),
        ("/app", "other=1; JSESSIONID=\"CCC.tc2\"", "tc2"),
        ("/app", "JSESSIONID=OLD.gone; JSESSIONID=NEW.tc1", "tc1"),
        (
            "/app",
            "XJSESSIONID=X.tc1; JSESSIONIDX=Y.tc1; JSESSIONID=Z.tc3",
            "tc3",
        ),
    ];
    for (path, cookie, want) in cases {
        for _ in 0..5 {
            let resp = c.get(path, &[("Cookie", cookie)]).await.unwrap();
            assert_eq!(resp.header("x-server"), Some(want), "{path} {cookie}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_route_is_hashed_to_one_server_consistently() {
    let sims = tomcats(3).await;
    let t = Tether::start(&cluster(&sims, &[]));
    let mut c = t.client();
    for i in 0..20 {
        let cookie = format!("JSESSIONID=ORPHAN{i}.removed-node");
        let first = c.get("/", &[("Cookie", &cookie)]).await.unwrap();
        let first = first.header("x-server").unwrap().to_string();
        for _ in 0..5 {
            let again = c.get("/", &[("Cookie", &cookie)]).await.unwrap();
            assert_eq!(again.header("x-server"), Some(first.as_str()), "{cookie}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_headers_reach_the_server_and_connections_are_reused() {
    let sims = tomcats(1).await;
    let t = Tether::start(&cluster(&sims, &[]));
    let mut c = t.client();
    for _ in 0..50 {
        let resp = c
            .request(
                "GET",
                "/",
                &[("Host", b"shop.example"), ("X-Forwarded-For", b"192.0.2.7")],
                b"",
            )
            .await
            .unwrap();
        assert_eq!(resp.status, 200);
    }
    let headers = sims[0].last_request_headers();
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(
        get("x-forwarded-for").as_deref(),
        Some("192.0.2.7, 127.0.0.1")
    );
    assert_eq!(get("x-forwarded-proto").as_deref(), Some("http"));
    assert_eq!(get("x-forwarded-host").as_deref(), Some("shop.example"));
    assert!(
        sims[0].connections() <= 3,
        "50 sequential requests used {} upstream connections",
        sims[0].connections()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_headers_false_passes_the_clients_headers_unchanged_after_a_reload() {
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: cluster(&sims, &[]),
        admin: true,
        ..Opts::default()
    });
    let mut c = t.client();
    let sent: &[(&str, &[u8])] = &[("Host", b"shop.example"), ("X-Forwarded-For", b"192.0.2.7")];
    let seen = |name: &str| {
        sims[0]
            .last_request_headers()
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(c.request("GET", "/", sent, b"").await.unwrap().status, 200);
    assert_eq!(
        seen("x-forwarded-for").as_deref(),
        Some("192.0.2.7, 127.0.0.1")
    );

    let text = std::fs::read_to_string(t.config_path()).unwrap();
    let off = text.replacen(
        "    cluster: shop\n",
        "    cluster: shop\n    forwarded_headers: false\n",
        1,
    );
    assert_ne!(off, text);
    std::fs::write(t.config_path(), off).unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["needs_upgrade"], serde_json::json!([]), "{json}");

    assert_eq!(c.request("GET", "/", sent, b"").await.unwrap().status, 200);
    assert_eq!(
        seen("x-forwarded-for").as_deref(),
        Some("192.0.2.7"),
        "the client's header, as sent"
    );
    assert_eq!(seen("x-forwarded-proto"), None);
    assert_eq!(seen("x-forwarded-host"), None);
    assert_eq!(seen("host").as_deref(), Some("shop.example"));
}
