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

/// A stop (SIGTERM) with a stream in flight: the client is told to go away (GOAWAY), the
/// stream's answer still comes whole, then the connection ends and so does tether.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_answers_the_streams_in_flight_then_ends_the_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A server that answers 400 ms after a request came.
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = server.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = server.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                tokio::time::sleep(Duration::from_millis(400)).await;
                let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow";
                let _ = s.write_all(answer).await;
            });
        }
    });
    let mut t = Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: s1, address: \"{address}\" }}\n"),
        listener_extra: "    h2c: true\n".into(),
        grace: 10,
        ..Opts::default()
    });
    let tcp = tokio::net::TcpStream::connect(t.addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
    let connection = tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    let req = http::Request::get("http://shop/slow").body(()).unwrap();
    let (response, _) = client.send_request(req, true).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pid = t.pid().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), response)
        .await
        .expect("answered")
        .expect("the stream in flight is answered");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut got = Vec::new();
    while let Some(data) = body.data().await {
        got.extend_from_slice(&data.expect("the whole body"));
    }
    assert_eq!(got, b"slow");
    // The connection ends cleanly (GOAWAY, not a reset), and tether exits.
    let ended = tokio::time::timeout(Duration::from_secs(5), connection)
        .await
        .expect("the connection ends");
    assert!(ended.unwrap().is_ok(), "the connection ended with an error");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while t.alive() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!t.alive(), "tether still runs");
}
