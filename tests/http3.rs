//! HTTP/3 from a real client (aioquic's, `tests/fixtures/h3client.py`) through tether to
//! simulated Tomcats: requests go through the same steps as over HTTP/2 (sticky sessions,
//! the fields the server is sent, bodies both ways, tether's own answers), a session
//! stays on its server when the client's UDP port changes under its connection, and a
//! stop lets the request in flight finish.

mod common;

use common::pki::Pki;
use common::{scratch_dir, server_line, tomcats, Opts, Tether};
use serde_json::Value;
use std::process::Command;

/// tether with an HTTP/3 TLS listener in front of `servers`.
fn start(servers: &str, extra: &str) -> (Tether, Pki) {
    let dir = scratch_dir("http3");
    let pki = Pki::new(&dir);
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{servers}"),
        listener_extra: format!(
            "    http3: true\n    tls:\n      cert: {}\n      key: {}\n{extra}",
            pki.path("a.crt"),
            pki.path("a.key")
        ),
        metrics: true,
        access_log: true,
        ..Opts::default()
    });
    (t, pki)
}

/// Runs the client's `plan` on one connection: one answer (or `{"error"}`) per request.
fn h3(t: &Tether, plan: Value) -> Vec<Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h3client.py");
    let out = Command::new("python3")
        .args([
            script,
            "127.0.0.1",
            &t.addr.port().to_string(),
            &plan.to_string(),
        ])
        .output()
        .expect("python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'aioquic'"),
        "aioquic is not installed (./run installs it): {stderr}"
    );
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!answers.is_empty(), "no answer: {stderr}\n{}", t.log());
    answers
}

fn field<'a>(answer: &'a Value, name: &str) -> Option<&'a str> {
    answer["headers"]
        .as_array()?
        .iter()
        .find(|f| f[0] == name)
        .and_then(|f| f[1].as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_over_http3_are_sticky_carry_bodies_and_follow_a_new_client_port() {
    let sims = tomcats(2).await;
    let servers: String = sims.iter().map(|s| server_line(s, "")).collect();
    let (t, _pki) = start(&servers, "");
    let plan = serde_json::json!({"requests": [
        {"path": "/shop"},
        {"path": "/shop", "cookie_from_last": true},
        {"path": "/shop", "cookie_from_last": true, "rebind": true},
        {"method": "POST", "path": "/shop", "cookie_from_last": true, "body_len": 300000},
        {"path": "/bytes/2000000", "cookie_from_last": true},
    ]});
    let answers = h3(&t, plan);
    assert_eq!(answers.len(), 5, "{answers:?}");
    for a in &answers {
        assert_eq!(a["status"], 200, "{a}\n{}", t.log());
    }
    let first = field(&answers[0], "x-server").unwrap();
    let session = field(&answers[0], "x-session-id").unwrap();
    for (i, a) in answers.iter().enumerate().take(4).skip(1) {
        assert_eq!(field(a, "x-server"), Some(first), "request {i} stays: {a}");
        assert_eq!(field(a, "x-session-id"), Some(session), "request {i}: {a}");
    }
    assert_eq!(
        field(&answers[3], "x-session-count"),
        Some("4"),
        "the POST counted in the session"
    );
    assert_ne!(
        answers[2]["port"], answers[1]["port"],
        "the client moved to a new UDP port"
    );
    assert_eq!(answers[4]["body_len"], 2_000_000, "a large answer whole");
    // What the server was told of the request: a client over TLS.
    let sim = sims.iter().find(|s| s.name() == first).unwrap();
    let told = sim.last_request_headers();
    let told = |name: &str| {
        told.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(told("x-forwarded-proto").as_deref(), Some("https"));
    assert_eq!(told("x-forwarded-for").as_deref(), Some("127.0.0.1"));
    let scrape = common::scrape(t.metrics.unwrap()).await;
    assert!(
        scrape.contains(r#"tether_http_requests_total{listener="web",version="3"} 5"#),
        "{scrape}"
    );
    let log = access_log(&t, 5);
    assert_eq!(log.matches("\"protocol\":\"HTTP/3\"").count(), 5, "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tethers_own_answers_and_many_streams_at_once() {
    let sims = tomcats(3).await;
    let servers: String = sims.iter().map(|s| server_line(s, "")).collect();
    let routes =
        "    routes:\n      - { path: /gone, redirect: { to: \"https://elsewhere.test/\" } }\n";
    let (t, _pki) = start(&servers, routes);
    let mut requests: Vec<Value> = (0..30)
        .map(|i| {
            let route = format!("tc{}", i % 3 + 1);
            serde_json::json!({"path": format!("/item/{i}"),
                "headers": [["cookie", format!("JSESSIONID=S{i:04}.{route}")]]})
        })
        .collect();
    requests.push(serde_json::json!({"path": "/gone"}));
    let answers = h3(
        &t,
        serde_json::json!({"requests": requests, "concurrent": true}),
    );
    assert_eq!(answers.len(), 31);
    for (i, a) in answers.iter().take(30).enumerate() {
        assert_eq!(a["status"], 200, "{a}");
        let route = format!("tc{}", i % 3 + 1);
        assert_eq!(field(a, "x-server"), Some(route.as_str()), "{a}");
    }
    let gone = &answers[30];
    assert!(matches!(gone["status"].as_u64(), Some(301..=308)), "{gone}");
    assert_eq!(field(gone, "location"), Some("https://elsewhere.test/"));
}

/// A stop (SIGTERM) with a request in flight: its answer still comes whole (the client is
/// told to go away), then tether ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_answers_the_request_in_flight() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A server that answers 600 ms after a request came.
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = server.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = server.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                tokio::time::sleep(std::time::Duration::from_millis(600)).await;
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nslow\n")
                    .await;
            });
        }
    });
    let servers = format!("      - {{ name: s1, address: \"{address}\" }}\n");
    let dir = scratch_dir("http3-stop");
    let pki = Pki::new(&dir);
    let mut t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{servers}"),
        listener_extra: format!(
            "    http3: true\n    tls:\n      cert: {}\n      key: {}\n",
            pki.path("a.crt"),
            pki.path("a.key")
        ),
        grace: 10,
        ..Opts::default()
    });
    let pid = t.pid() as i32;
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: kill(2) on the process this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    });
    let answers = h3(&t, serde_json::json!({"requests": [{"path": "/slow"}]}));
    stopper.join().unwrap();
    assert_eq!(answers[0]["status"], 200, "{answers:?}\n{}", t.log());
    assert_eq!(answers[0]["body"], "slow\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    while t.alive() {
        assert!(
            std::time::Instant::now() < deadline,
            "tether still runs\n{}",
            t.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A binary upgrade hands the UDP socket over with the TCP ones: the new process serves
/// HTTP/3 on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_upgrade_hands_the_udp_socket_over() {
    let sims = tomcats(1).await;
    let (mut t, _pki) = start(&server_line(&sims[0], ""), "");
    let pid_file = t.dir.join("tether.pid");
    let _guard = common::daemon::KillOnDrop(pid_file.clone());
    let before = h3(&t, serde_json::json!({"requests": [{"path": "/"}]}));
    assert_eq!(before[0]["status"], 200, "{before:?}");
    let up = Command::new(common::tether_bin())
        .args(["upgrade", "-c"])
        .arg(t.config_path())
        .output()
        .unwrap();
    assert!(up.status.success(), "{up:?}\n{}", t.log());
    let new = tether::process::upgrade::read_pid(&pid_file).unwrap();
    assert_ne!(new as u32, t.pid());
    // A connection made in the moment of the hand-over may land on the old process, which
    // closes it (its client connects again): the new process alone is asked.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while t.alive() {
        assert!(
            std::time::Instant::now() < deadline,
            "the old process still runs"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let after = h3(
        &t,
        serde_json::json!({"requests": [{"path": "/"}, {"path": "/"}]}),
    );
    for a in &after {
        assert_eq!(a["status"], 200, "{after:?}");
    }
}

/// The heads `curl` gets over HTTP/1.1 or HTTP/2 on the listener.
fn curl_head(t: &Tether, version: &str) -> String {
    let out = Command::new("curl")
        .args([
            "-sk",
            "-D",
            "-",
            "-o",
            "/dev/null",
            "--max-time",
            "10",
            version,
        ])
        .arg(format!("https://127.0.0.1:{}/", t.addr.port()))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).to_ascii_lowercase()
}

/// HTTP/1.1 and HTTP/2 answers tell the client that the listener serves HTTP/3
/// (`Alt-Svc`, for `alt_svc_max_age`), HTTP/3 answers do not need to; a zero age says
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alt_svc_tells_http1_and_http2_clients_of_http3() {
    let sims = tomcats(1).await;
    let (t, _pki) = start(&server_line(&sims[0], ""), "");
    let said = format!("alt-svc: h3=\":{}\"; ma=86400\r\n", t.addr.port());
    for version in ["--http1.1", "--http2"] {
        let head = curl_head(&t, version);
        assert!(head.contains(" 200"), "{version}: {head}");
        assert!(head.contains(&said), "{version}: {head}");
    }
    let over_h3 = h3(&t, serde_json::json!({"requests": [{"path": "/"}]}));
    assert_eq!(field(&over_h3[0], "alt-svc"), None, "{over_h3:?}");
    drop(t);
    let (t, _pki) = start(&server_line(&sims[0], ""), "    alt_svc_max_age: 0s\n");
    for version in ["--http1.1", "--http2"] {
        let head = curl_head(&t, version);
        assert!(head.contains(" 200"), "{version}: {head}");
        assert!(!head.contains("alt-svc"), "{version}: {head}");
    }
}

/// The base64 SHA-256 of `cert`'s public key, as Chromium's
/// `--ignore-certificate-errors-spki-list` takes it.
fn spki_hash(cert: &str) -> String {
    let pipeline = format!(
        "openssl x509 -pubkey -noout -in {cert} | openssl pkey -pubin -outform der \
         | openssl dgst -sha256 -binary | base64"
    );
    let out = Command::new("sh").args(["-c", &pipeline]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Headless Chromium, told that the origin speaks QUIC, loads pages over HTTP/3 through
/// tether, its session kept on its server from one load to the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_loads_pages_over_http3_and_keeps_its_session() {
    let sims = tomcats(2).await;
    let servers: String = sims.iter().map(|s| server_line(s, "")).collect();
    let (t, pki) = start(&servers, "");
    let origin = format!("127.0.0.1:{}", t.addr.port());
    let driver = common::webdriver::Driver::start();
    let flags = [
        format!("--origin-to-force-quic-on={origin}"),
        format!(
            "--ignore-certificate-errors-spki-list={}",
            spki_hash(&pki.path("a.crt"))
        ),
    ];
    let browser = driver.browser_with(800, 600, &flags).await;
    let protocol = "return performance.getEntriesByType('navigation')[0].nextHopProtocol";
    let mut seen = Vec::new();
    for _ in 0..2 {
        browser
            .goto(&format!("https://{origin}/shop"))
            .await
            .unwrap();
        let text = common::webdriver::js(&browser, "return document.body.innerText").await;
        let over = common::webdriver::js(&browser, protocol).await;
        assert_eq!(over, "h3", "{text}\n{}", t.log());
        seen.push(text.as_str().unwrap_or_default().to_string());
    }
    browser.close().await.unwrap();
    // `server=tcN session=ID count=N`: the second load on the first's server and session
    // (the browser's `/favicon.ico` counts in it too).
    let parts = |s: &str| -> Vec<String> { s.split_whitespace().map(String::from).collect() };
    let (first, second) = (parts(&seen[0]), parts(&seen[1]));
    assert_eq!(first[..2], second[..2], "{seen:?}");
    assert_eq!(first[2], "count=1", "{seen:?}");
    assert_ne!(second[2], "count=1", "{seen:?}");
    let log = access_log(&t, 2);
    let lines = log.lines().count();
    assert_eq!(
        log.matches("\"protocol\":\"HTTP/3\"").count(),
        lines,
        "{log}"
    );
}

/// The access log once it has `lines` lines (it is written a moment after the answers).
fn access_log(t: &Tether, lines: usize) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let log = std::fs::read_to_string(t.dir.join("access.log")).unwrap_or_default();
        if log.lines().count() >= lines {
            return log;
        }
        assert!(std::time::Instant::now() < deadline, "{lines} lines: {log}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

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
    let (t, _pki) = start(&server_line(&sims[0], ""), "    http3_retry_above: 20\n");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h3flood.py");
    let out = Command::new("python3")
        .args([script, "127.0.0.1", &t.addr.port().to_string(), "300"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("sent 300 "),
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
        retries >= 250,
        "{retries} Retries for 300 Initials past 20: {said}"
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
