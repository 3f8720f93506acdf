//! Servers named by DNS (`resolver:`), against a simulated nameserver: a name that does
//! not resolve leaves its server down (the config still loads, the other servers serve,
//! the status says why) instead of refusing the config; a name's new address takes effect
//! without a reload; a name that stops resolving keeps its last address.

mod common;

use common::servers::status_of;
use common::{Opts, Tether};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, UdpSocket};

type Names = Arc<Mutex<HashMap<String, Ipv4Addr>>>;

/// A nameserver on loopback answering A queries from `names` (TTL 0), NXDOMAIN for the
/// others, and no address for AAAA.
async fn nameserver(names: Names) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            if let Some(answer) = answer(&buf[..n], &names) {
                let _ = socket.send_to(&answer, from).await;
            }
        }
    });
    addr
}

/// The answer to one query (RFC 1035 §4.1).
fn answer(query: &[u8], names: &Names) -> Option<Vec<u8>> {
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *query.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_lowercase());
        at += len;
    }
    let question = query.get(12..at + 4)?;
    let qtype = u16::from_be_bytes([query[at], query[at + 1]]);
    let found = names.lock().unwrap().get(&labels.join(".")).copied();
    let mut out = query[..2].to_vec();
    let rcode = if found.is_some() { 0 } else { 3 };
    let a = found.filter(|_| qtype == 1);
    out.extend_from_slice(&[
        0x81,
        0x80 | rcode,
        0,
        1,
        0,
        u8::from(a.is_some()),
        0,
        0,
        0,
        0,
    ]);
    out.extend_from_slice(question);
    if let Some(ip) = a {
        out.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
        out.extend_from_slice(&ip.octets());
    }
    Some(out)
}

/// An HTTP server on `ip:port` answering every request with `X-Server: name`.
async fn server(ip: Ipv4Addr, port: u16, name: &'static str) -> Option<SocketAddr> {
    let listener = TcpListener::bind((IpAddr::V4(ip), port)).await.ok()?;
    let addr = listener.local_addr().unwrap();
    let answer = format!("HTTP/1.1 200 OK\r\nX-Server: {name}\r\nContent-Length: 2\r\n\r\nok");
    common::servers::fixed(listener, Some(answer.into_bytes()));
    Some(addr)
}

/// Two servers on one port of two loopback addresses, as one name moving between hosts.
async fn two_hosts() -> (SocketAddr, SocketAddr) {
    let (a_ip, b_ip) = (Ipv4Addr::new(127, 0, 0, 2), Ipv4Addr::new(127, 0, 0, 3));
    loop {
        let a = server(a_ip, 0, "a").await.unwrap();
        if let Some(b) = server(b_ip, a.port(), "b").await {
            return (a, b);
        }
    }
}

async fn served_by(t: &Tether, cookie: &str) -> (u16, String) {
    let r = t.client().get("/", &[("Cookie", cookie)]).await.unwrap();
    (r.status, r.header("x-server").unwrap_or("").to_string())
}

/// Waits up to 10 s for `f` to hold.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_servers_follow_their_names_without_a_reload() {
    let (a, b) = two_hosts().await;
    let names: Names = Arc::default();
    names
        .lock()
        .unwrap()
        .insert("app.tether.test".into(), Ipv4Addr::new(127, 0, 0, 2));
    let dns = nameserver(names.clone()).await;
    let port = a.port();
    let t = Tether::start_with(Opts {
        top: format!("resolver:\n  nameservers: [\"{dns}\"]\n  interval: 200ms\n  timeout: 1s\n"),
        cluster: format!(
            "    servers:\n      - {{ name: app, address: \"app.tether.test:{port}\", route: app }}\n      - {{ name: ghost, address: \"ghost.tether.test:{port}\", route: ghost }}\n"
        ),
        admin: true,
        metrics: true,
        ..Opts::default()
    });
    eventually("app resolves", || async {
        status_of(&t, "app").await["health"] == "up"
    })
    .await;
    assert_eq!(status_of(&t, "app").await["address"], a.to_string());
    // The name that does not resolve: its server is down and says why; its sessions go
    // to the server that resolved, and nothing goes to a made-up address.
    let ghost = status_of(&t, "ghost").await;
    assert_eq!(ghost["health"], "down", "{ghost}");
    let why = ghost["down_reason"].as_str().unwrap_or_default();
    assert!(
        why.contains("ghost.tether.test") && why.contains("does not resolve"),
        "{ghost}"
    );
    for _ in 0..5 {
        assert_eq!(served_by(&t, "JSESSIONID=x.ghost").await, (200, "a".into()));
        assert_eq!(served_by(&t, "JSESSIONID=x.app").await, (200, "a".into()));
    }
    // The name moves: requests follow within a few intervals, no reload.
    names
        .lock()
        .unwrap()
        .insert("app.tether.test".into(), Ipv4Addr::new(127, 0, 0, 3));
    eventually("app's new address is used", || async {
        served_by(&t, "JSESSIONID=x.app").await == (200, "b".into())
    })
    .await;
    assert_eq!(status_of(&t, "app").await["address"], b.to_string());
    let scrape = common::scrape(t.metrics.unwrap()).await;
    assert!(
        !scrape.contains("tether_config_reloads_total{result=\"success\"} 1"),
        "no reload: {scrape}"
    );
    // The name stops resolving: the server keeps its last address.
    names.lock().unwrap().clear();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(served_by(&t, "JSESSIONID=x.app").await, (200, "b".into()));
    assert_eq!(status_of(&t, "app").await["health"], "up");
    // The ghost comes to life: it serves its own sessions.
    names
        .lock()
        .unwrap()
        .insert("ghost.tether.test".into(), Ipv4Addr::new(127, 0, 0, 2));
    eventually("ghost resolves", || async {
        served_by(&t, "JSESSIONID=x.ghost").await == (200, "a".into())
            && status_of(&t, "ghost").await["health"] == "up"
    })
    .await;
}

#[test]
fn a_config_whose_names_wait_for_the_resolver_is_valid() {
    let dir = common::scratch_dir("dns-check");
    let yaml = "resolver: { nameservers: [\"127.0.0.1:1\"] }\nlisteners:\n  - { name: web, address: \"127.0.0.1:1\", cluster: shop }\nclusters:\n  - name: shop\n    servers:\n      - { name: a, address: \"nowhere.tether.test:8080\" }\n";
    let (code, stderr) = common::tether_t(&dir, yaml);
    assert_eq!(code, Some(0), "{stderr}");
    for (bad, needle) in [
        (
            "resolver: { nameservers: [\"dns.example\"] }\n",
            "resolver.nameservers[0]",
        ),
        ("resolver: { interval: 1ms }\n", "resolver.interval"),
    ] {
        let listeners = &yaml[yaml.find("listeners").unwrap()..];
        let (code, stderr) = common::tether_t(&dir, &format!("{bad}{listeners}"));
        assert!(
            code != Some(0) && stderr.contains(needle),
            "{bad}: {stderr}"
        );
    }
}
