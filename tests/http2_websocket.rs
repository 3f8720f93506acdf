//! WebSockets over HTTP/2 (RFC 8441) on tether's own HTTP/2 front end: the connection
//! offers `SETTINGS_ENABLE_CONNECT_PROTOCOL`; a client's extended CONNECT reaches a real
//! WebSocket server (the `tungstenite` crate's) as an HTTP/1.1 upgrade, routed by its
//! session; messages of any size pass both ways within HTTP/2's flow control; the closing
//! handshake ends the stream and is counted. A plain CONNECT, another protocol, and a
//! server that does not upgrade are refused with a clear status.

mod common;

use bytes::Bytes;
use common::websocket::{Seen, WsServer};
use common::{server_line, tomcats, Opts, Tether};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::runtime::{Handle, Runtime};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::frame::CloseFrame;
use tungstenite::protocol::Role;
use tungstenite::{Message, WebSocket};

/// tether with h2c in front of `cluster`.
fn tether(cluster: String) -> Tether {
    Tether::start_with(Opts {
        cluster,
        // Extended CONNECT is tether's own HTTP/2 front end's (the suite's second pass puts
        // listeners that do not say on Pingora's proxy).
        listener_extra: "    http2: engine\n    h2c: true\n".into(),
        metrics: true,
        log: Some("warn"),
        ..Opts::default()
    })
}

/// An HTTP/2 connection to `addr` (h2c with prior knowledge), driven on `rt`.
fn connect(rt: &Runtime, addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (client, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client.ready().await.unwrap()
    })
}

/// Sends an extended CONNECT (`protocol`: its `:protocol`, none for a plain CONNECT)
/// for `path`; the answer's head and the stream's two halves.
fn extended_connect(
    rt: &Runtime,
    client: &mut h2::client::SendRequest<Bytes>,
    (protocol, path, cookie): (Option<&str>, &str, Option<&str>),
) -> (http::Response<h2::RecvStream>, h2::SendStream<Bytes>) {
    let uri = match protocol {
        Some(_) => format!("http://shop.example{path}"),
        None => "shop.example:443".into(),
    };
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(uri)
        .header("sec-websocket-version", "13");
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let mut req = req.body(()).unwrap();
    if let Some(p) = protocol {
        req.extensions_mut().insert(h2::ext::Protocol::from(p));
    }
    rt.block_on(async {
        let mut ready = client.clone().ready().await.unwrap();
        let (response, send) = ready.send_request(req, false).unwrap();
        let response = tokio::time::timeout(Duration::from_secs(10), response)
            .await
            .expect("an answer in 10 s")
            .expect("an answer");
        (response, send)
    })
}

/// A tunnel's stream as the byte stream a WebSocket client runs over.
struct Pipe {
    rt: Handle,
    send: h2::SendStream<Bytes>,
    recv: h2::RecvStream,
    pending: Bytes,
}

impl Pipe {
    fn new(
        rt: &Runtime,
        response: http::Response<h2::RecvStream>,
        send: h2::SendStream<Bytes>,
    ) -> Pipe {
        Pipe {
            rt: rt.handle().clone(),
            send,
            recv: response.into_body(),
            pending: Bytes::new(),
        }
    }
}

/// `f` on `rt`, within 10 s.
fn within<T>(rt: &Handle, f: impl std::future::Future<Output = T>) -> io::Result<T> {
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), f).await })
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "10 s"))
}

impl Read for Pipe {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pending.is_empty() {
            let next = within(&self.rt, self.recv.data())?;
            match next {
                Some(Ok(data)) => {
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    self.pending = data;
                }
                Some(Err(e)) => return Err(io::Error::other(e)),
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.pending.len());
        out[..n].copy_from_slice(&self.pending.split_to(n));
        Ok(n)
    }
}

impl Write for Pipe {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.send.reserve_capacity(data.len());
        loop {
            let send = &mut self.send;
            let window = std::future::poll_fn(|cx| send.poll_capacity(cx));
            let got = within(&self.rt, window)?;
            match got {
                Some(Ok(0)) => continue,
                Some(Ok(n)) => {
                    let n = n.min(data.len());
                    let chunk = Bytes::copy_from_slice(&data[..n]);
                    self.send
                        .send_data(chunk, false)
                        .map_err(io::Error::other)?;
                    return Ok(n);
                }
                Some(Err(e)) => return Err(io::Error::other(e)),
                None => return Err(io::ErrorKind::BrokenPipe.into()),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// tether's scrape.
fn scrape(rt: &Runtime, t: &Tether) -> String {
    rt.block_on(common::scrape(t.metrics.expect("a metrics listener")))
}

/// A series' value in a scrape; 0 when absent.
fn series(scrape: &str, name_and_labels: &str) -> u64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[test]
fn a_websocket_over_http2_is_routed_by_its_session_and_passes_both_ways() {
    let (a, b) = (WsServer::start("s1"), WsServer::start("s2"));
    let mut cluster = String::from("    servers:\n");
    for (i, (s, route)) in [(&a, "r1"), (&b, "r2")].iter().enumerate() {
        cluster.push_str(&format!(
            "      - {{ name: s{}, address: \"{}\", route: {route} }}\n",
            i + 1,
            s.addr
        ));
    }
    let t = tether(cluster);
    let rt = Runtime::new().unwrap();
    let mut client = connect(&rt, t.addr);
    // The server's SETTINGS arrive after the handshake's return.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !client.is_extended_connect_protocol_enabled() {
        assert!(
            Instant::now() < deadline,
            "the connection offers extended CONNECT"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    for (cookie, server, name) in [
        ("JSESSIONID=abc.r2", &b, "s2"),
        ("JSESSIONID=abc.r1", &a, "s1"),
    ] {
        let ask = (Some("websocket"), "/chat?room=1", Some(cookie));
        let (response, send) = extended_connect(&rt, &mut client, ask);
        assert_eq!(response.status(), 200, "the tunnel is open");
        assert!(
            response.headers().get("sec-websocket-accept").is_none(),
            "the upgrade's accept is tether's to check, not the client's"
        );
        assert_eq!(
            server.next(),
            Seen::Handshake("/chat?room=1".into(), Some(cookie.into())),
            "the session's server got the handshake"
        );
        let pipe = Pipe::new(&rt, response, send);
        let mut ws =
            WebSocket::from_raw_socket(pipe, Role::Client, Some(common::websocket::config()));
        ws.send(Message::text("who")).unwrap();
        assert_eq!(ws.read().unwrap(), Message::text(name));
        // Far past both directions' flow-control windows (64 KiB by default).
        let big: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
        ws.send(Message::binary(big.clone())).unwrap();
        match ws.read().unwrap() {
            Message::Binary(echo) => assert!(echo[..] == big[..], "the 1 MiB echo came back whole"),
            other => panic!("no echo: {other:?}"),
        }
        ws.close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "bye".into(),
        }))
        .unwrap();
        loop {
            match ws.read() {
                Ok(Message::Close(_)) | Ok(_) => continue,
                Err(tungstenite::Error::ConnectionClosed) => break,
                Err(e) => panic!("the closing handshake: {e}"),
            }
        }
        assert_eq!(server.next(), Seen::Close(Some(1000)));
        // The client's half ends too; the tunnel is then closed on both sides.
        let pipe = ws.get_mut();
        let _ = pipe.send.send_data(Bytes::new(), true);
    }
    // A client that resets its stream: the server's connection is closed.
    let ask = (Some("websocket"), "/chat", Some("JSESSIONID=abc.r1"));
    let (response, send) = extended_connect(&rt, &mut client, ask);
    assert_eq!(response.status(), 200);
    assert!(matches!(a.next(), Seen::Handshake(..)));
    let mut ws = WebSocket::from_raw_socket(Pipe::new(&rt, response, send), Role::Client, None);
    ws.send(Message::text("who")).unwrap();
    assert_eq!(ws.read().unwrap(), Message::text("s1"));
    ws.get_mut().send.send_reset(h2::Reason::CANCEL);
    assert_eq!(a.next(), Seen::Ended, "the server saw its connection end");
    let failed = r#"tether_upgraded_connections_total{ended="client_failed",listener="web"} "#;
    let closed = r#"tether_upgraded_connections_total{ended="closed",listener="web"} "#;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let scrape = scrape(&rt, &t);
        if series(&scrape, closed) == 2 && series(&scrape, failed) == 1 {
            let open = r#"tether_upgraded_connections{listener="web"} "#;
            assert_eq!(series(&scrape, open), 0);
            break;
        }
        assert!(Instant::now() < deadline, "{scrape}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_connect_tether_does_not_serve_and_a_server_that_does_not_upgrade_are_refused() {
    let rt = Runtime::new().unwrap();
    let sims = rt.block_on(tomcats(1));
    let t = tether(format!("    servers:\n{}", server_line(&sims[0], "")));
    let mut client = connect(&rt, t.addr);

    let (response, _) = extended_connect(&rt, &mut client, (None, "", None));
    assert_eq!(
        response.status(),
        405,
        "a plain CONNECT: tether is no forward proxy"
    );
    let (response, _) = extended_connect(&rt, &mut client, (Some("chat"), "/x", None));
    assert_eq!(response.status(), 501, "a protocol other than websocket");
    assert_eq!(sims[0].requests(), 0, "neither reached the server");

    // The simulated Tomcat answers the upgrade's GET with a 200: a 2xx without the upgrade
    // must not tell the client that its tunnel is open.
    let (response, _) = extended_connect(&rt, &mut client, (Some("websocket"), "/ws", None));
    assert_eq!(response.status(), 502);
    assert_eq!(sims[0].requests(), 1, "the server was asked once");
}
