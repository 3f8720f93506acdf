//! WebSockets through tether, with a real WebSocket peer on each side (the `tungstenite`
//! crate's client and server): once the `101` went out, tether is a byte pipe. A server
//! that fails the connection (RFC 6455 §7.1.7) is seen by the client as the server left
//! it, never as bytes of tether's own; close codes, a client's reset and half-close, 16 MiB
//! and fragmented messages, ping and pong pass; an idle upgraded connection outlives the
//! listener's other timeouts and is closed at `tunnel_idle_timeout`; a reload and a binary
//! upgrade keep open WebSockets until they close; the handshake is routed by its session.

mod common;

use common::websocket::{closed, echo, left, open, reset, Seen, Via, WsServer};
use common::{free_port, running, scratch_dir, tether_bin, Opts, Tether};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tungstenite::protocol::frame::{CloseFrame, Frame};
use tungstenite::{Error, Message};

/// tether in front of `servers`, each `(server, route)`, with `listener_extra`.
fn tether(servers: &[(&WsServer, &str)], listener_extra: String) -> Tether {
    let mut cluster = String::from("    servers:\n");
    for (i, (s, route)) in servers.iter().enumerate() {
        cluster.push_str(&format!(
            "      - {{ name: s{}, address: \"{}\", route: {route} }}\n",
            i + 1,
            s.addr
        ));
    }
    Tether::start_with(Opts {
        cluster,
        listener_extra,
        metrics: true,
        log: Some("warn"),
        ..Opts::default()
    })
}

/// The engine serves every upgrade without a body, whatever `TETHER_HTTP1` says.
fn on_the_engine(extra: &str) -> String {
    format!("    http1: engine\n{extra}")
}

/// A plain `GET /metrics`, its body.
fn scrape(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: tether\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    all
}

/// A series' value in a scrape; 0 when absent.
fn series(scrape: &str, name_and_labels: &str) -> u64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// Frames a server must fail the connection on (RFC 6455 §5.2, §5.5.1, §8.1), made with
/// the client crate's own frame type.
fn invalid_frames() -> Vec<(&'static str, Frame)> {
    let mut reserved = Frame::message("x", OpCode::Data(Data::Text), true);
    reserved.header_mut().rsv1 = true;
    vec![
        ("reserved bits", reserved),
        (
            "an unknown opcode",
            Frame::message("x", OpCode::Data(Data::Reserved(3)), true),
        ),
        (
            "invalid UTF-8 in a text message",
            Frame::message(vec![0xff, 0xfe, 0xfd], OpCode::Data(Data::Text), true),
        ),
        (
            "a close code no endpoint may send",
            Frame::close(Some(CloseFrame {
                code: CloseCode::from(1005),
                reason: "".into(),
            })),
        ),
    ]
}

/// For each invalid frame: the server fails the connection (a close frame with 1002 and
/// a reset, or a reset alone), and the client gets exactly that: the close frame, then the
/// end; never bytes of tether's own, which it would read as a broken frame.
fn server_failures_reach_the_client_as_sent(t: &Tether, server: &WsServer, via: Via) {
    for (what, frame) in invalid_frames() {
        for target in ["/ws/fail-close", "/ws/fail-reset"] {
            let mut ws = open(t.addr, via, target, None);
            assert!(matches!(server.next(), Seen::Handshake(..)));
            ws.send(Message::Frame(frame.clone())).unwrap();
            assert!(
                matches!(server.next(), Seen::Failed(_)),
                "{via:?} {target}: the server failed on {what}"
            );
            if target.ends_with("fail-close") {
                match ws.read() {
                    Ok(Message::Close(Some(f))) => assert_eq!(f.code, CloseCode::Protocol),
                    other => panic!("{via:?} {what}: no close frame with 1002: {other:?}"),
                }
            }
            match ws.read() {
                Err(e) => assert!(left(&e), "{via:?} {target} after {what}: {e:?}"),
                Ok(m) => panic!("{via:?} {target} after {what}: a message {m:?}"),
            }
        }
    }
    let log = t.log();
    assert!(
        !log.contains("already sent") && !log.contains("Fail to proxy"),
        "{log}"
    );
}

#[test]
fn a_server_that_fails_the_connection_is_seen_as_it_failed_plain_and_tls() {
    let server = WsServer::start("s1");
    let t = tether(&[(&server, "r1")], on_the_engine(""));
    server_failures_reach_the_client_as_sent(&t, &server, Via::Plain);
    let pki = common::pki::Pki::new(&scratch_dir("ws-pki"));
    let tls = tether(&[(&server, "r1")], on_the_engine(&pki.listener_tls()));
    server_failures_reach_the_client_as_sent(&tls, &server, Via::Tls);
}

/// On Pingora's proxy (`http1: proxy`) too, nothing of tether's own follows a `101`.
/// Pingora may end a tunnel right after its `101` (a race in its upgrade path): the client
/// then sees the end at once, which is allowed here; bytes are not.
#[test]
fn on_pingoras_proxy_no_error_answer_follows_a_101() {
    let server = WsServer::start("s1");
    let t = tether(&[(&server, "r1")], "    http1: proxy\n".to_string());
    let (_, frame) = &invalid_frames()[0];
    for _ in 0..5 {
        let mut ws = open(t.addr, Via::Plain, "/ws/fail-reset", None);
        let _ = ws.send(Message::Frame(frame.clone()));
        match ws.read() {
            Err(e) => assert!(left(&e), "{e:?}"),
            Ok(m) => panic!("a message {m:?}"),
        }
    }
    let log = t.log();
    assert!(!log.contains("Respond header is already sent"), "{log}");
}

fn close_codes_and_ends(t: &Tether, server: &WsServer, via: Via) {
    // The server closes with each code; the client gets it, and the closing handshake
    // completes.
    for code in [
        1000u16, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 3000, 4000, 4999,
    ] {
        let mut ws = open(t.addr, via, "/ws", None);
        let seen = server.next();
        assert!(
            matches!(seen, Seen::Handshake(..)),
            "{via:?} {code}: {seen:?}"
        );
        echo(&mut ws, "hello");
        ws.send(Message::text(format!("close:{code}"))).unwrap();
        match ws.read() {
            Ok(Message::Close(Some(f))) => {
                assert_eq!(u16::from(f.code), code);
                assert_eq!(f.reason.as_str(), "bye");
            }
            other => panic!("{via:?}: no close frame {code}: {other:?}"),
        }
        // The client's answer goes back; then the server ends the connection.
        match ws.read() {
            Err(Error::ConnectionClosed) => {}
            other => panic!("{via:?} close {code}: {other:?}"),
        }
        assert_eq!(
            server.next(),
            Seen::Close(Some(code)),
            "{via:?}: the answer"
        );
    }
    // The client closes with a code of its own.
    let mut ws = open(t.addr, via, "/ws", None);
    assert!(matches!(server.next(), Seen::Handshake(..)));
    ws.close(Some(CloseFrame {
        code: CloseCode::from(4001),
        reason: "done".into(),
    }))
    .unwrap();
    assert_eq!(server.next(), Seen::Close(Some(4001)));
    closed(&mut ws, via);
    // A client that resets: the server's side is closed (not left open).
    let mut ws = open(t.addr, via, "/ws", None);
    assert!(matches!(server.next(), Seen::Handshake(..)));
    echo(&mut ws, "about to go");
    reset(ws.get_ref().tcp());
    drop(ws);
    assert_eq!(server.next(), Seen::Ended, "{via:?}: the client's reset");
    // A client that half-closes: its FIN reaches the server as a FIN, and what the server
    // sends after it still reaches the client.
    let mut ws = open(t.addr, via, "/ws", None);
    assert!(matches!(server.next(), Seen::Handshake(..)));
    ws.send(Message::text("half-close")).unwrap();
    ws.get_mut().half_close();
    assert_eq!(server.next(), Seen::HalfClosed, "{via:?}");
    match ws.read() {
        Ok(Message::Text(t)) => assert_eq!(t.as_str(), "after your FIN"),
        other => panic!("{via:?}: nothing after the half-close: {other:?}"),
    }
    assert!(matches!(ws.read(), Ok(Message::Close(None))));
}

fn big_fragmented_and_pings(t: &Tether, server: &WsServer, via: Via) {
    let mut ws = open(t.addr, via, "/ws", None);
    assert!(matches!(server.next(), Seen::Handshake(..)));
    // 16 MiB, with every byte's place checkable.
    let big: Vec<u8> = (0..16u32 << 20).map(|i| (i % 251) as u8).collect();
    ws.send(Message::binary(big.clone())).unwrap();
    match ws.read() {
        Ok(Message::Binary(b)) => assert!(b == big, "the 16 MiB message came back changed"),
        other => panic!("{via:?}: no 16 MiB echo: {other:?}"),
    }
    // One text message in three frames.
    for (part, opcode, last) in [
        ("frag-", OpCode::Data(Data::Text), false),
        ("ment-", OpCode::Data(Data::Continue), false),
        ("ed", OpCode::Data(Data::Continue), true),
    ] {
        ws.send(Message::Frame(Frame::message(part, opcode, last)))
            .unwrap();
    }
    match ws.read() {
        Ok(Message::Text(t)) => assert_eq!(t.as_str(), "frag-ment-ed"),
        other => panic!("{via:?}: the fragmented message: {other:?}"),
    }
    ws.send(Message::Ping("are you there".into())).unwrap();
    match ws.read() {
        Ok(Message::Pong(p)) => assert_eq!(&p[..], b"are you there"),
        other => panic!("{via:?}: no pong: {other:?}"),
    }
    ws.close(None).unwrap();
    closed(&mut ws, via);
    assert_eq!(server.next(), Seen::Close(None));
}

#[test]
fn close_codes_resets_half_closes_large_and_fragmented_messages_plain_and_tls() {
    let server = WsServer::start("s1");
    let t = tether(&[(&server, "r1")], on_the_engine(""));
    close_codes_and_ends(&t, &server, Via::Plain);
    big_fragmented_and_pings(&t, &server, Via::Plain);
    let pki = common::pki::Pki::new(&scratch_dir("ws-pki"));
    let tls = tether(&[(&server, "r1")], on_the_engine(&pki.listener_tls()));
    close_codes_and_ends(&tls, &server, Via::Tls);
    big_fragmented_and_pings(&tls, &server, Via::Tls);
    let scrape = scrape(t.metrics.unwrap());
    assert_eq!(
        series(&scrape, r#"tether_upgraded_connections{listener="web"} "#),
        0,
        "{scrape}"
    );
    assert!(
        series(
            &scrape,
            r#"tether_upgraded_connections_total{ended="client_failed",listener="web"} "#
        ) >= 1,
        "the client's reset: {scrape}"
    );
    assert!(
        series(
            &scrape,
            r#"tether_upgraded_connections_total{ended="closed",listener="web"} "#
        ) >= 15,
        "{scrape}"
    );
}

/// An upgraded connection is bounded by `tunnel_idle_timeout` alone: it outlives the
/// keep-alive, request-body and request-head timeouts and the cluster's read timeout, and
/// is closed once no byte moved either way for the tunnel's time.
#[test]
fn an_idle_websocket_outlives_the_other_timeouts_and_ends_at_the_tunnels() {
    let server = WsServer::start("s1");
    let limits = "    limits:\n      keepalive_timeout: 1s\n      request_body_timeout: 1s\n      \
                  request_head_timeout: 1s\n      tunnel_idle_timeout: 4s\n";
    let mut cluster = String::from("    read_timeout: 1s\n    servers:\n");
    cluster.push_str(&format!(
        "      - {{ name: s1, address: \"{}\" }}\n",
        server.addr
    ));
    let t = Tether::start_with(Opts {
        cluster,
        listener_extra: on_the_engine(limits),
        metrics: true,
        ..Opts::default()
    });
    let mut ws = open(t.addr, Via::Plain, "/ws", None);
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(2500));
        echo(&mut ws, "still here");
    }
    let quiet = Instant::now();
    ws.get_ref()
        .tcp()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let end = ws.read();
    let after = quiet.elapsed();
    assert!(matches!(end, Err(ref e) if left(e)), "{end:?}");
    assert!(
        after >= Duration::from_millis(3500),
        "closed after {after:?}, before the tunnel's 4 s"
    );
    assert_eq!(server.next(), Seen::Handshake("/ws".into(), None));
    assert_eq!(server.next(), Seen::Ended, "the server's side closed too");
    // Counted once the tunnel's task has closed both sides, a moment after the peers saw
    // their ends.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let scrape = scrape(t.metrics.unwrap());
        let idle = r#"tether_upgraded_connections_total{ended="idle_timeout",listener="web"} "#;
        match series(&scrape, idle) {
            1 => break,
            0 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => panic!("{scrape}"),
        }
    }
}

/// The handshake is routed like any request: a WebSocket of a session goes to the
/// session's server, by cookie or by `;jsessionid=`.
#[test]
fn a_websocket_of_a_session_goes_to_the_sessions_server() {
    let (a, b) = (WsServer::start("s1"), WsServer::start("s2"));
    let t = tether(&[(&a, "r1"), (&b, "r2")], on_the_engine(""));
    for _ in 0..3 {
        let mut ws = open(t.addr, Via::Plain, "/ws", Some("JSESSIONID=abc.r2"));
        ws.send(Message::text("who")).unwrap();
        assert_eq!(ws.read().unwrap(), Message::text("s2"));
        let mut ws = open(t.addr, Via::Plain, "/ws;jsessionid=abc.r1", None);
        ws.send(Message::text("who")).unwrap();
        assert_eq!(ws.read().unwrap(), Message::text("s1"));
    }
    assert_eq!(
        b.next(),
        Seen::Handshake("/ws".into(), Some("JSESSIONID=abc.r2".into()))
    );
    assert_eq!(
        a.next(),
        Seen::Handshake("/ws;jsessionid=abc.r1".into(), None)
    );
}

/// A reload keeps an open WebSocket; a binary upgrade leaves it with the old process,
/// which serves it until it closes and then exits (well within its grace period), while
/// the new process takes new ones.
#[test]
fn reload_and_binary_upgrade_keep_open_websockets_until_they_close() {
    let server = WsServer::start("s1");
    let dir = scratch_dir("ws-upgrade");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let conf = dir.join("tether.yaml");
    let write = |weight: u32| {
        let d = dir.display();
        let yaml = format!(
            "server:\n  threads: 2\n  grace_period_seconds: 60\n  graceful_shutdown_timeout_seconds: 1\n  \
             pid_file: {d}/tether.pid\n  upgrade_sock: {d}/upgrade.sock\n  error_log: {d}/daemon.log\n\
             metrics: {{ address: \"{metrics}\" }}\n\
             listeners:\n  - {{ name: web, address: \"{addr}\", cluster: shop, http1: engine }}\n\
             clusters:\n  - name: shop\n    servers:\n      - {{ name: s1, address: \"{}\", weight: {weight} }}\n",
            server.addr
        );
        std::fs::write(&conf, yaml).unwrap();
    };
    write(1);
    let guard = common::daemon::KillOnDrop(dir.join("tether.pid"));
    let log = std::fs::File::create(dir.join("first.log")).unwrap();
    let mut first = Command::new(tether_bin())
        .arg("-c")
        .arg(&conf)
        .env("RUST_LOG", "warn,tether=info")
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_err() || TcpStream::connect(metrics).is_err() {
        assert!(Instant::now() < deadline, "tether did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut ws = open(addr, Via::Plain, "/ws", None);
    echo(&mut ws, "before the reload");
    write(3);
    assert!(Command::new("kill")
        .args(["-HUP", &first.id().to_string()])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(dir.join("first.log"))
        .unwrap()
        .contains("reloaded")
    {
        assert!(Instant::now() < deadline, "no reload in the log");
        std::thread::sleep(Duration::from_millis(50));
    }
    echo(&mut ws, "after the reload");
    let counted = scrape(metrics);
    assert_eq!(
        series(&counted, r#"tether_upgraded_connections{listener="web"} "#),
        1,
        "{counted}"
    );
    // The binary upgrade.
    let out = Command::new(tether_bin())
        .args(["upgrade", "-c"])
        .arg(&conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(out.status.success(), "tether upgrade: {out:?}");
    let old = first.id() as i32;
    let new: i32 = std::fs::read_to_string(dir.join("tether.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(old, new);
    // Pingora's old process accepts beside the new one for 5 s after it handed its
    // sockets over; then its graceful stop begins, with the WebSocket open.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(dir.join("first.log"))
        .unwrap()
        .contains("graceful stop: open client connections: 1;")
    {
        assert!(
            Instant::now() < deadline,
            "the old process's stop did not begin"
        );
        echo(&mut ws, "during the hand-over");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut fresh = open(addr, Via::Plain, "/ws", None);
    echo(&mut fresh, "to the new process");
    std::thread::sleep(Duration::from_secs(2));
    echo(&mut ws, "after the upgrade, from the old process");
    assert!(running(old), "the old process keeps its open WebSocket");
    ws.close(None).unwrap();
    closed(&mut ws, Via::Plain);
    // The client closes its socket once the server closed (RFC 6455 §7.1.1).
    drop(ws);
    let closed = Instant::now();
    let _ = first.wait();
    let took = closed.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "the old process exited {took:?} after its last WebSocket closed (grace 60 s)"
    );
    let old_log = std::fs::read_to_string(dir.join("first.log")).unwrap();
    assert!(
        old_log.contains("graceful stop: no client connection left"),
        "{old_log}"
    );
    echo(&mut fresh, "the new process goes on");
    drop(guard);
    let deadline = Instant::now() + Duration::from_secs(10);
    while running(new) {
        assert!(Instant::now() < deadline, "the new process did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
