//! Per-client limits (`client_limits`) over a real tether: a client over
//! its request rate is answered 429 with `Retry-After` while another is served; a
//! connection flood from one address is capped while other addresses connect; allowed
//! networks are not limited; the PROXY protocol's client is the one counted; refusals are
//! counted in the metrics and logged; a reload changes the limits. Clients are distinct
//! loopback addresses (127.0.0.2, 127.0.0.3, …).

mod common;

use common::{scrape, server_line, tomcats, Opts, Tether};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A keep-alive connection from `from` to `to`.
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(from.parse().unwrap(), 0))
        .unwrap();
    sock.connect(to).await.unwrap()
}

/// One answer on a keep-alive connection: its status and head (`0` when the connection
/// was closed instead).
async fn request(s: &mut TcpStream, path: &str) -> (u16, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: shop\r\n\r\n");
    if s.write_all(req.as_bytes()).await.is_err() {
        return (0, String::new());
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = header_of(&head, "content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                match s.read(&mut chunk).await {
                    Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                    _ => break,
                }
            }
            let status = head
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            return (status, head);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return (0, String::new()),
        }
    }
}

fn header_of(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// Is the connection closed by tether (without an answer) within a second?
async fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_secs(1), s.read(&mut b)).await,
        Ok(Ok(0) | Err(_))
    )
}

async fn start(listener_extra: &str) -> (Vec<tether::cli::sim::TomcatSim>, Tether) {
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        listener_extra: listener_extra.to_string(),
        metrics: true,
        admin: true,
        ..Opts::default()
    });
    (sims, t)
}

fn metric(text: &str, limit: &str) -> f64 {
    let name = format!("tether_client_limit_refusals_total{{limit=\"{limit}\",listener=\"web\"}}");
    text.lines()
        .find_map(|l| l.strip_prefix(&name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Replaces the listener's `client_limits` line and reloads (through the admin API, which
/// answers once the new config is in use).
async fn reload(t: &Tether, limits: &str) {
    let conf = std::fs::read_to_string(t.config_path()).unwrap();
    let start = conf
        .find("    client_limits:")
        .expect("a client_limits line");
    let end = start + conf[start..].find('\n').unwrap() + 1;
    let next = format!("{}{limits}{}", &conf[..start], &conf[end..]);
    std::fs::write(t.config_path(), next).unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_its_rate_gets_429_while_others_are_served() {
    let (_sims, t) =
        start("    client_limits: { requests: 5, per: 1m, allow: [\"127.0.0.4\"] }\n").await;
    let mut a = connect_from("127.0.0.2", t.addr).await;
    for i in 0..5 {
        assert_eq!(
            request(&mut a, &format!("/a{i}")).await.0,
            200,
            "request {i}"
        );
    }
    let (status, head) = request(&mut a, "/a5").await;
    assert_eq!(status, 429, "{head}");
    let retry: u64 = header_of(&head, "retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=120).contains(&retry), "Retry-After {retry}");
    // The connection stays usable (and the client stays refused).
    assert_eq!(request(&mut a, "/a6").await.0, 429);
    // A new connection from the same client is the same client.
    let mut a2 = connect_from("127.0.0.2", t.addr).await;
    assert_eq!(request(&mut a2, "/a7").await.0, 429);
    // Another client is served; an allowed one is never limited.
    let mut b = connect_from("127.0.0.3", t.addr).await;
    assert_eq!(request(&mut b, "/b").await.0, 200);
    let mut c = connect_from("127.0.0.4", t.addr).await;
    for i in 0..20 {
        assert_eq!(request(&mut c, &format!("/c{i}")).await.0, 200);
    }
    let text = scrape(t.metrics.unwrap()).await;
    assert_eq!(metric(&text, "requests"), 3.0, "{text}");
    assert!(
        t.log().contains("client 127.0.0.2 over 5 requests per 60s"),
        "{}",
        t.log()
    );
    // A reload raising the limit lets the client in again (its count is kept: 5 of 7).
    reload(&t, "    client_limits: { requests: 7, per: 1m }\n").await;
    assert_eq!(request(&mut a, "/a8").await.0, 200);
    assert_eq!(request(&mut a, "/a9").await.0, 200);
    assert_eq!(request(&mut a, "/a10").await.0, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_from_one_address_is_capped_while_others_connect() {
    let (_sims, t) = start("    client_limits: { connections: 3 }\n").await;
    let mut flood = Vec::new();
    for _ in 0..10 {
        flood.push(connect_from("127.0.0.2", t.addr).await);
    }
    let mut held = Vec::new();
    let mut refused = 0;
    for mut s in flood {
        match request(&mut s, "/flood").await.0 {
            200 => held.push(s),
            0 => refused += 1,
            other => panic!("status {other}"),
        }
    }
    assert_eq!((held.len(), refused), (3, 7));
    // Other addresses connect meanwhile.
    let mut other = connect_from("127.0.0.3", t.addr).await;
    assert_eq!(request(&mut other, "/other").await.0, 200);
    // One of the three closes: there is room for one more (once tether has seen the
    // close), not two.
    held.pop();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut s = connect_from("127.0.0.2", t.addr).await;
        if request(&mut s, "/again").await.0 == 200 {
            held.push(s);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed connection is counted out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut over = connect_from("127.0.0.2", t.addr).await;
    assert_eq!(
        request(&mut over, "/over").await.0,
        0,
        "three are open again"
    );
    let text = scrape(t.metrics.unwrap()).await;
    assert!(metric(&text, "connections") >= 7.0, "{text}");
    assert!(
        t.log().contains("client 127.0.0.2 over 3 open connections"),
        "{}",
        t.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_protocols_client_is_the_one_counted() {
    let (_sims, t) = start(
        "    proxy_protocol: { from: [\"127.0.0.1\"] }\n    client_limits: { connections: 1 }\n",
    )
    .await;
    // Three connections from one balancer: two for one client, one for another.
    let header = |client: &str| format!("PROXY TCP4 {client} 127.0.0.1 40000 80\r\n");
    let mut first = connect_from("127.0.0.1", t.addr).await;
    first
        .write_all(header("198.51.100.1").as_bytes())
        .await
        .unwrap();
    assert_eq!(request(&mut first, "/one").await.0, 200);
    let mut second = connect_from("127.0.0.1", t.addr).await;
    second
        .write_all(header("198.51.100.1").as_bytes())
        .await
        .unwrap();
    assert!(closed(&mut second).await, "the client's second connection");
    let mut third = connect_from("127.0.0.1", t.addr).await;
    third
        .write_all(header("198.51.100.2").as_bytes())
        .await
        .unwrap();
    assert_eq!(request(&mut third, "/two").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_and_removes_connection_limits() {
    let (_sims, t) = start("    client_limits: { requests: 1000 }\n").await;
    let mut one = connect_from("127.0.0.2", t.addr).await;
    let mut two = connect_from("127.0.0.2", t.addr).await;
    assert_eq!(request(&mut one, "/1").await.0, 200);
    assert_eq!(request(&mut two, "/2").await.0, 200);
    reload(&t, "    client_limits: { connections: 1 }\n").await;
    // Connections opened before the limit are not counted; new ones are.
    let mut three = connect_from("127.0.0.2", t.addr).await;
    assert_eq!(request(&mut three, "/3").await.0, 200);
    let mut four = connect_from("127.0.0.2", t.addr).await;
    assert!(closed(&mut four).await, "over the new limit");
    assert_eq!(request(&mut one, "/1b").await.0, 200);
}

#[test]
fn bad_limits_are_named() {
    let base = "listeners:\n  - name: web\n    address: \"127.0.0.1:8080\"\n    cluster: c\n";
    let tail =
        "clusters:\n  - name: c\n    servers:\n      - { name: s1, address: \"127.0.0.1:9001\" }\n";
    let errors = |limits: &str| {
        tether::config::parse(
            &format!("{base}    client_limits: {limits}\n{tail}"),
            "t.yaml",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
    };
    let e = errors("{ allow: [\"10.0.0.0/8\"] }");
    assert!(
        e.contains("listeners[0].client_limits.connections")
            && e.contains("set `connections`, `requests` or both"),
        "{e}"
    );
    let e = errors("{ requests: 0, connections: 2000000 }");
    assert!(
        e.contains("client_limits.requests: must be between 1 and 1000000"),
        "{e}"
    );
    assert!(
        e.contains("client_limits.connections: must be between 1 and 1000000"),
        "{e}"
    );
    let e =
        errors("{ requests: 5, per: 2h, ipv6_prefix: 8, ipv4_prefix: 33, allow: [\"nonsense\"] }");
    for field in ["per", "ipv6_prefix", "ipv4_prefix", "allow[0]"] {
        assert!(
            e.contains(&format!("client_limits.{field}")),
            "{field}: {e}"
        );
    }
    let e = errors("{ connections: 5, per: 10s }");
    assert!(
        e.contains("client_limits.per: is the window of `requests`"),
        "{e}"
    );
    let e = errors("{ requests: 5, burst: 3 }");
    assert!(e.contains("burst"), "{e}");
    let c = tether::config::parse(
        &format!(
            "{base}    client_limits: {{ requests: 5, per: 10s, allow: [\"10.1.2.3/8\"] }}\n{tail}"
        ),
        "t.yaml",
    )
    .unwrap();
    let l = c.listeners[0].client_limits.as_ref().unwrap();
    assert_eq!(
        (l.connections, l.requests, l.per),
        (None, Some(5), Duration::from_secs(10))
    );
    assert_eq!((l.ipv4_prefix, l.ipv6_prefix, l.clients), (32, 64, 100_000));
    assert_eq!(l.allow[0].to_string(), "10.0.0.0/8");
}
