//! End-to-end tests of `TomcatSim`, driven through `HttpClient` and raw sockets.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{send_raw, HttpClient, Response, TomcatSim};

fn count(resp: &Response) -> u64 {
    resp.header("x-session-count").unwrap().parse().unwrap()
}

#[tokio::test]
async fn session_is_created_then_kept_via_cookie() {
    let sim = TomcatSim::start("tc1", "r1").await.unwrap();
    let mut client = HttpClient::new(sim.addr());
    let first = client.get("/app", &[]).await.unwrap();
    let id = first.set_cookie("JSESSIONID").unwrap();
    assert!(id.ends_with(".r1"), "{id}");
    assert_eq!(first.header("x-session-id"), Some(id.as_str()));
    assert_eq!(first.header("x-server"), Some("tc1"));
    assert_eq!(
        first.body_str(),
        format!("server=tc1 session={id} count=1\n")
    );
    assert_eq!(count(&first), 1);

    let cookie = format!("theme=dark; JSESSIONID={id}");
    for expected in [2, 3] {
        let resp = client.get("/app", &[("Cookie", &cookie)]).await.unwrap();
        assert_eq!(count(&resp), expected);
        assert_eq!(
            resp.set_cookie("JSESSIONID"),
            None,
            "no new cookie for a known session"
        );
    }
    assert_eq!((sim.session_count(), sim.requests()), (1, 3));
}

#[tokio::test]
async fn session_is_kept_via_path_parameter() {
    let sim = TomcatSim::start("tc1", "r1").await.unwrap();
    let mut client = HttpClient::new(sim.addr());
    let id = client
        .get("/", &[])
        .await
        .unwrap()
        .set_cookie("JSESSIONID")
        .unwrap();
    for expected in [2, 3] {
        let path = format!("/shop/cart;jsessionid={id}?item=7");
        let resp = client.get(&path, &[]).await.unwrap();
        assert_eq!(
            (resp.header("x-session-id"), count(&resp)),
            (Some(id.as_str()), expected)
        );
    }
}

#[tokio::test]
async fn foreign_session_gets_a_new_one() {
    let (a, b) = (
        TomcatSim::start("a", "ra").await.unwrap(),
        TomcatSim::start("b", "rb").await.unwrap(),
    );
    let id_a = HttpClient::new(a.addr())
        .get("/", &[])
        .await
        .unwrap()
        .set_cookie("JSESSIONID")
        .unwrap();
    let cookie = format!("JSESSIONID={id_a}");
    let resp = HttpClient::new(b.addr())
        .get("/", &[("Cookie", &cookie)])
        .await
        .unwrap();
    let id_b = resp.set_cookie("JSESSIONID").unwrap();
    assert!(id_b.ends_with(".rb") && id_b != id_a);
    assert_eq!(
        (count(&resp), b.session_count(), a.session_count()),
        (1, 1, 1)
    );
}

// Multi-threaded, as the proxy's integration tests will be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_closes_port_and_connections_and_restart_keeps_sessions() {
    let sim = TomcatSim::start("tc1", "r1").await.unwrap();
    let addr = sim.addr();
    let mut client = HttpClient::new(addr);
    let id = client
        .get("/", &[])
        .await
        .unwrap()
        .set_cookie("JSESSIONID")
        .unwrap();
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    let _ = idle.read(&mut [0; 256]).await.unwrap();

    sim.stop().await;
    assert!(!sim.is_running());
    let refused = TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    // The open keep-alive connection is gone too: EOF or reset, never a hang.
    assert!(matches!(idle.read(&mut [0; 16]).await, Ok(0) | Err(_)));

    sim.restart().await.unwrap();
    assert!(sim.is_running() && sim.addr() == addr);
    let cookie = format!("JSESSIONID={id}");
    assert_eq!(
        count(&client.get("/", &[("Cookie", &cookie)]).await.unwrap()),
        2
    );
    sim.stop().await;
    sim.stop().await; // stopping twice is harmless
}

#[tokio::test]
async fn keep_alive_reuses_one_connection_and_close_is_honoured() {
    let sim = TomcatSim::start("tc1", "r1").await.unwrap();
    let mut client = HttpClient::new(sim.addr());
    for _ in 0..3 {
        client
            .request("POST", "/form", &[], b"a=1&b=2")
            .await
            .unwrap();
    }
    assert_eq!((sim.connections(), sim.requests()), (1, 3));

    let resp = client.get("/", &[("Connection", "close")]).await.unwrap();
    assert_eq!(resp.header("connection"), Some("close"));
    client.get("/", &[]).await.unwrap();
    assert_eq!(sim.connections(), 2);
}

#[tokio::test]
async fn health_is_not_counted_and_creates_no_session() {
    let sim = TomcatSim::start("tc1", "r1").await.unwrap();
    let resp = HttpClient::new(sim.addr())
        .get("/health", &[("X-Probe", "1")])
        .await
        .unwrap();
    assert_eq!((resp.status, resp.body_str()), (200, "ok\n"));
    assert_eq!(resp.set_cookie("JSESSIONID"), None);
    assert_eq!((sim.requests(), sim.session_count()), (0, 0));
    assert!(sim.last_request_headers().is_empty());
}

#[tokio::test]
async fn last_request_headers_records_raw_values() {
    let sim = TomcatSim::start("tc1", "r1").await.unwrap();
    let mut client = HttpClient::new(sim.addr());
    let headers: [(&str, &[u8]); 2] = [("X-Custom", b"hello"), ("X-Binary", b"caf\xe9")];
    client.request("GET", "/", &headers, b"").await.unwrap();
    let seen = sim.last_request_headers();
    assert!(seen.contains(&("x-custom".to_string(), b"hello".to_vec())));
    assert!(seen.contains(&("x-binary".to_string(), b"caf\xe9".to_vec())));
    assert!(seen.iter().any(|(name, _)| name == "host"));
}

#[tokio::test]
async fn chunked_request_body_is_consumed() {
    let sim = TomcatSim::start("tc1", "r1").await.unwrap();
    let raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    assert_eq!(send_raw(sim.addr(), raw).await.unwrap().status, 200);
}

#[tokio::test]
async fn oversized_or_malformed_heads_are_rejected() {
    let sim = TomcatSim::start("tc1", "r1").await.unwrap();
    let huge = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "x".repeat(70 * 1024));
    assert_eq!(
        send_raw(sim.addr(), huge.as_bytes()).await.unwrap().status,
        431
    );
    let many: String = (0..101).map(|i| format!("X-H{i}: v\r\n")).collect();
    let many = format!("GET / HTTP/1.1\r\n{many}\r\n");
    assert_eq!(
        send_raw(sim.addr(), many.as_bytes()).await.unwrap().status,
        431
    );
    assert_eq!(
        send_raw(sim.addr(), b"GARBAGE\r\n\r\n")
            .await
            .unwrap()
            .status,
        400
    );
    assert_eq!(sim.requests(), 0);
}

#[tokio::test]
async fn head_has_no_body_and_expect_continue_is_answered() {
    let sim = TomcatSim::start("tc1", "r1").await.unwrap();
    let mut client = HttpClient::new(sim.addr());
    let head = client.request("HEAD", "/", &[], b"").await.unwrap();
    assert!(head.body.is_empty() && head.header("content-length") != Some("0"));
    let expect: [(&str, &[u8]); 1] = [("Expect", b"100-continue")];
    let resp = client.request("POST", "/", &expect, b"data").await.unwrap();
    assert_eq!((resp.status, sim.connections()), (200, 1));
}
