//! `trusted_proxies`: behind a CDN or a load balancer that sends
//! `X-Forwarded-For`, the client is the right-most address that is not a trusted proxy,
//! for `$WSRA` and the access log; from anyone else the header names nobody. Clients are
//! distinct loopback addresses (127.0.0.2 the proxy, 127.0.0.3 a stranger).

mod common;

use common::{Opts, Tether};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tether::cli::sim::{WasCluster, WebSphereSim};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request from `from` with the given `X-Forwarded-For` fields; the status.
async fn get_from(t: &Tether, from: &str, path: &str, xff: &[&str]) -> u16 {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(from.parse().unwrap(), 0))
        .unwrap();
    let mut s = sock.connect(t.addr).await.unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n");
    for v in xff {
        req.push_str(&format!("X-Forwarded-For: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn header(sim: &WebSphereSim, name: &str) -> Option<String> {
    sim.last_request_headers()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
}

/// A WebSphere clone that is told the client (`private_headers`), behind tether with the
/// listener fields `listener` and an access log.
async fn start(listener: &str) -> (WasCluster, WebSphereSim, Tether) {
    start_with(listener, "").await
}

async fn start_with(listener: &str, more: &str) -> (WasCluster, WebSphereSim, Tether) {
    let cluster = WasCluster::new();
    let sim = WebSphereSim::start(&cluster, "was1", "c1", &["101"])
        .await
        .unwrap();
    let t = Tether::start_with(Opts {
        cluster: format!(
            "    session_style: websphere\n    websphere: {{ private_headers: true }}\n    servers:\n      - {{ name: was1, address: \"{}\", clone_id: c1 }}\n",
            sim.addr()
        ),
        listener_extra: listener.to_string(),
        extra_listeners: more.to_string(),
        access_log: true,
        ..Opts::default()
    });
    (cluster, sim, t)
}

/// Writes `conf`, reloads (SIGHUP), and waits up to 5 s until a request through `proxy`
/// names the client its `X-Forwarded-For` gives (the reload made `proxy` trusted).
async fn reload_until_trusted(t: &Tether, sim: &WebSphereSim, conf: &str, proxy: &str) {
    std::fs::write(t.config_path(), conf).unwrap();
    let pid = t.pid().to_string();
    std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        assert_eq!(get_from(t, proxy, "/r", &["198.51.100.1"]).await, 200);
        if header(sim, "$wsra").as_deref() == Some("198.51.100.1") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the reload, {proxy} is a trusted proxy"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_behind_trusted_proxies_is_named_and_strangers_cannot_claim_one() {
    let (_cluster, sim, t) = start("    trusted_proxies: [\"127.0.0.2\", \"10.0.0.0/8\"]\n").await;
    // Through the trusted proxy, past an inner hop it trusts too.
    assert_eq!(
        get_from(&t, "127.0.0.2", "/a", &["198.51.100.1, 10.1.1.1"]).await,
        200
    );
    assert_eq!(header(&sim, "$wsra").as_deref(), Some("198.51.100.1"));
    assert_eq!(
        header(&sim, "x-forwarded-for").as_deref(),
        Some("198.51.100.1, 10.1.1.1, 127.0.0.2"),
        "the chain is passed on, with this hop's peer"
    );
    assert_eq!(common::logged_client(&t, "/a"), "198.51.100.1");
    // A client that put its own address in front does not get past the untrusted hop.
    assert_eq!(
        get_from(&t, "127.0.0.2", "/b", &["6.6.6.6", "198.51.100.1"]).await,
        200
    );
    assert_eq!(header(&sim, "$wsra").as_deref(), Some("198.51.100.1"));
    assert_eq!(common::logged_client(&t, "/b"), "198.51.100.1");
    // A stranger's header names nobody: the client is the stranger.
    assert_eq!(get_from(&t, "127.0.0.3", "/c", &["203.0.113.7"]).await, 200);
    assert_eq!(header(&sim, "$wsra").as_deref(), Some("127.0.0.3"));
    assert_eq!(
        header(&sim, "x-forwarded-for").as_deref(),
        Some("203.0.113.7, 127.0.0.3")
    );
    assert_eq!(common::logged_client(&t, "/c"), "127.0.0.3");
    // The proxy without a header: the proxy.
    assert_eq!(get_from(&t, "127.0.0.2", "/d", &[]).await, 200);
    assert_eq!(header(&sim, "$wsra").as_deref(), Some("127.0.0.2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_trusted_proxies_nothing_changes_and_bad_entries_are_named() {
    let (_cluster, sim, t) = start("").await;
    assert_eq!(
        get_from(&t, "127.0.0.2", "/a", &["198.51.100.1"]).await,
        200
    );
    assert_eq!(header(&sim, "$wsra").as_deref(), Some("127.0.0.2"));
    assert_eq!(common::logged_client(&t, "/a"), "127.0.0.2");

    // A reload that adds the setting applies it.
    let conf = std::fs::read_to_string(t.config_path()).unwrap();
    let with = conf.replacen(
        "    cluster: shop\n",
        "    cluster: shop\n    trusted_proxies: [\"127.0.0.2\"]\n",
        1,
    );
    assert_ne!(with, conf);
    reload_until_trusted(&t, &sim, &with, "127.0.0.2").await;

    let base = "listeners:\n  - name: web\n    address: \"127.0.0.1:8080\"\n    cluster: c\n";
    let tail =
        "clusters:\n  - name: c\n    servers:\n      - { name: s1, address: \"127.0.0.1:9001\" }\n";
    let bad = format!(
        "{base}    trusted_proxies: [\"10.0.0.0/8\", \"nonsense\", \"10.0.0.0/33\"]\n{tail}"
    );
    let e = tether::config::parse(&bad, "t.yaml")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("listeners[0].trusted_proxies[1]") && e.contains("nonsense"),
        "{e}"
    );
    assert!(e.contains("listeners[0].trusted_proxies[2]"), "{e}");
    let good = format!("{base}    trusted_proxies: [\"10.0.0.7/8\", \"2001:db8::1\"]\n{tail}");
    let c = tether::config::parse(&good, "t.yaml").unwrap();
    let nets: Vec<String> = c.listeners[0]
        .trusted_proxies
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(nets, ["10.0.0.0/8", "2001:db8::1/128"]);
}

/// A reload whose file lists the listeners in another order gives each listener its own
/// `trusted_proxies` (they were taken by position in the new file: `web` got `other`'s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_reorders_listeners_keeps_each_ones_trusted_proxies() {
    let other = format!(
        "  - name: other\n    address: \"127.0.0.1:{}\"\n    cluster: shop\n",
        common::free_port()
    );
    let (_cluster, sim, t) = start_with("    trusted_proxies: [\"127.0.0.2\"]\n", &other).await;
    assert_eq!(
        get_from(&t, "127.0.0.5", "/a", &["198.51.100.1"]).await,
        200
    );
    assert_eq!(header(&sim, "$wsra").as_deref(), Some("127.0.0.5"));
    // The new file: `other` first, and `web` trusting 127.0.0.5 instead.
    let conf = std::fs::read_to_string(t.config_path()).unwrap();
    let (web, other, tail) = (
        conf.find("  - name: web\n").unwrap(),
        conf.find("  - name: other\n").unwrap(),
        conf.find("clusters:\n").unwrap(),
    );
    let reordered = format!(
        "{}{}{}{}",
        &conf[..web],
        &conf[other..tail],
        &conf[web..other].replace("127.0.0.2", "127.0.0.5"),
        &conf[tail..]
    );
    reload_until_trusted(&t, &sim, &reordered, "127.0.0.5").await;
}
