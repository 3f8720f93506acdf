//! HTTP/3's guards, with aioquic's client and raw datagrams: Retry under load and for a
//! flood of Initial packets, stateless resets keyed by the listener's secret, the
//! certificate of the name asked for, client certificates required over QUIC, and the
//! config's checks of `http3`.

mod common;

use common::h3::{h3, start};
use common::pki::Pki;
use common::{scratch_dir, server_line, tomcats, Opts, Tether};
use std::process::Command;

/// Under load (here: from the first connection, `http3_retry_above: 0`) a new client
/// proves its address with a Retry first; a packet for a connection the listener does not
/// know gets a stateless reset, keyed by the listener's key in `state_dir`, so that the
/// process after a restart or an upgrade ends the connections of the one before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_under_load_and_stateless_resets() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("http3-keys");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let pki = Pki::new(&dir);
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        listener_extra: format!(
            "    http3: true\n    http3_retry_above: 0\n    tls:\n      cert: {}\n      key: {}\n",
            pki.path("a.crt"),
            pki.path("a.key")
        ),
        top: format!("state_dir: {}\n", state.display()),
        metrics: true,
        ..Opts::default()
    });
    let answers = h3(
        &t,
        serde_json::json!({"requests": [{"path": "/"}, {"path": "/"}]}),
    );
    for a in &answers {
        assert_eq!(a["status"], 200, "{answers:?}");
    }
    let scrape = common::scrape(t.metrics.unwrap()).await;
    let retries = r#"tether_http3_packets_sent_total{kind="retry",listener="web"} 1"#;
    assert!(scrape.contains(retries), "{scrape}");

    // A short-header packet to an id no connection has.
    let key = std::fs::read(state.join("quic.key")).unwrap();
    assert_eq!(key.len(), 32);
    let dcid = [7u8; 20];
    let mut packet = vec![0x41u8];
    packet.extend_from_slice(&dcid);
    packet.extend_from_slice(&[0x5a; 60]);
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    udp.send_to(&packet, t.addr).unwrap();
    let mut reset = [0u8; 1500];
    let (n, _) = udp.recv_from(&mut reset).expect("a stateless reset");
    assert!(n < packet.len() && n >= 21, "{n} bytes");
    assert_eq!(reset[0] & 0xc0, 0x40, "a short header's first bits");
    let want = boring::hash::hmac_sha256(&key, &[&b"reset"[..], &dcid].concat()).unwrap();
    assert_eq!(reset[n - 16..n], want[..16], "the token of that id");
    // A packet too short to be answered by a shorter one is not.
    udp.send_to(&packet[..21], t.addr).unwrap();
    udp.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    assert!(udp.recv_from(&mut reset).is_err(), "no answer to 21 bytes");
    let scrape = common::scrape(t.metrics.unwrap()).await;
    let resets = r#"tether_http3_packets_sent_total{kind="stateless_reset",listener="web"} 1"#;
    assert!(scrape.contains(resets), "{scrape}");
}

/// A flood of Initial packets from many addresses that never go on: past
/// `http3_retry_above` half-made connections, each gets a Retry (no state kept for it),
/// and a real client still connects and is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initial_flood_gets_retries_and_real_clients_are_served() {
    let sims = tomcats(1).await;
    let (t, _pki) = start(&server_line(&sims[0], ""), "    http3_retry_above: 10\n");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h3flood.py");
    let out = Command::new("python3")
        .args([script, "127.0.0.1", &t.addr.port().to_string(), "80"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("sent 80 "),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let scrape = common::scrape(t.metrics.unwrap()).await;
    let retries = scrape
        .lines()
        .find(|l| l.starts_with(r#"tether_http3_packets_sent_total{kind="retry",listener="web"}"#))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(
        retries >= 60,
        "{retries} Retries for 80 Initials past 10: {said}"
    );
    let answers = h3(&t, serde_json::json!({"requests": [{"path": "/"}]}));
    assert_eq!(answers[0]["status"], 200, "{answers:?}");
}

/// QUIC handshakes take the listener's certificates as TLS over TCP does: the one of the
/// name the client asks for (SNI), else the default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_certificate_of_the_name_the_client_asks_for() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("http3-sni");
    let pki = Pki::new(&dir);
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        listener_extra: format!(
            "    http3: true\n    tls:\n      cert: {}\n      key: {}\n      sni:\n        - {{ names: [b.test], cert: {}, key: {} }}\n",
            pki.path("a.crt"),
            pki.path("a.key"),
            pki.path("b.crt"),
            pki.path("b.key"),
        ),
        ..Opts::default()
    });
    let checked = |name: &str| {
        let plan = serde_json::json!({"server_name": name, "cafile": pki.path("ca.pem"),
            "requests": [{"path": "/"}]});
        h3(&t, plan).remove(0)
    };
    for name in ["b.test", "a.test"] {
        let a = checked(name);
        assert_eq!(a["status"], 200, "{name}: {a}");
    }
    // A name with no certificate of its own gets the default one (a.test's): refused.
    let other = checked("c.test");
    assert!(other.get("error").is_some(), "{other}");
}

/// `client_auth: required` holds over QUIC: a client without a certificate from the CA
/// is refused in the handshake, one with it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_over_quic_too() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("http3-mtls");
    let pki = Pki::new(&dir);
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        listener_extra: format!(
            "    http3: true\n    tls:\n      cert: {}\n      key: {}\n      client_auth: {{ ca: {} }}\n",
            pki.path("a.crt"),
            pki.path("a.key"),
            pki.path("ca.pem"),
        ),
        ..Opts::default()
    });
    let without = serde_json::json!({"requests": [{"path": "/", "timeout": 3}]});
    let without = h3(&t, without).remove(0);
    assert!(without.get("error").is_some(), "{without}");
    let with = serde_json::json!({"client_cert": pki.path("client.crt"),
        "client_key": pki.path("client.key"), "requests": [{"path": "/"}]});
    let with = h3(&t, with).remove(0);
    assert_eq!(with["status"], 200, "{with}");
}

/// HTTP/3 is for TLS listeners, and a QUIC datagram carries no PROXY header.
#[test]
fn http3_needs_tls_and_takes_no_proxy_header() {
    let yaml = |fields: &str| {
        format!(
            "listeners:\n  - {{ name: web, address: 127.0.0.1:8080, cluster: shop, {fields} }}\n\
             clusters:\n  - name: shop\n    servers:\n      - {{ name: n1, address: 127.0.0.1:8081 }}\n"
        )
    };
    let refused = |fields: &str, needle: &str| {
        let e = tether::config::parse(&yaml(fields), "t.yaml").expect_err("refused");
        let found = e
            .errors
            .iter()
            .any(|x| x.path == "listeners[0].http3" && x.message.contains(needle));
        assert!(found, "no `{needle}` at listeners[0].http3 in:\n{e}");
    };
    refused("http3: true", "needs the listener's `tls:`");
    refused(
        "http3: true, proxy_protocol: { from: [10.0.0.1] }",
        "takes no PROXY header",
    );
    let plain = tether::config::parse(&yaml("h2c: false"), "t.yaml").expect("valid");
    assert!(!plain.listeners[0].http3);
}
