//! HTTP/2 from the client side: one connection carrying many sessions' streams at once,
//! each sent to its own session's server (h2c with prior knowledge here; h2 over TLS is in
//! `tests/tls.rs`), and HTTP/1.1 still served on the same listener.

mod common;

use common::{server_line, tomcats, Opts, Tether};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_http2_connection_carries_many_sessions_each_to_its_server() {
    let sims = tomcats(3).await;
    let mut cluster = String::from("    servers:\n");
    for s in &sims {
        cluster.push_str(&server_line(s, ""));
    }
    let t = Tether::start_with(Opts {
        cluster,
        listener_extra: "    h2c: true\n".into(),
        metrics: true,
        ..Opts::default()
    });
    let tcp = tokio::net::TcpStream::connect(t.addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    // 90 streams in flight at once: 30 sessions of each server, interleaved.
    let mut streams = Vec::new();
    for i in 0..90 {
        let mut client = client.clone().ready().await.unwrap();
        let route = format!("tc{}", i % 3 + 1);
        let req = http::Request::builder()
            .uri(format!("http://shop.example/item/{i}"))
            .header("cookie", format!("JSESSIONID=S{i:04}.{route}"))
            .body(())
            .unwrap();
        let (response, _) = client.send_request(req, true).unwrap();
        streams.push((route, response));
    }
    for (route, response) in streams {
        let response = tokio::time::timeout(Duration::from_secs(10), response)
            .await
            .expect("answered")
            .unwrap();
        assert_eq!(response.status(), 200);
        let server = response
            .headers()
            .get("x-server")
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(server, route, "each stream to its own session's server");
    }
    for s in &sims {
        assert_eq!(s.requests(), 30);
    }
    // HTTP/1.1 on the same listener still works.
    let r = t.client().get("/", &[]).await.unwrap();
    assert_eq!(r.status, 200);
    let scrape = common::scrape(t.metrics.unwrap()).await;
    assert!(
        scrape.contains(r#"tether_http_requests_total{listener="web",version="2"} 90"#),
        "{scrape}"
    );
}
