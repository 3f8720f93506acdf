//! Real WebSocket peers for tests (the `tungstenite` crate's server and client): a server
//! that echoes, answers a few commands and fails a connection on a protocol error as
//! RFC 6455 says, and a client over plain TCP or TLS.

use boring::ssl::{SslConnector, SslMethod, SslStream, SslVerifyMode};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::server::{Request, Response};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::frame::CloseFrame;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Error, Message, WebSocket};

/// Room for the 16 MiB messages, on both sides.
pub fn config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20))
}

/// Closes `s` with a reset (a zero linger), as a server that drops a connection with
/// unread bytes does.
pub fn reset(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket this function borrows, with a valid `linger` of the
    // size given.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
}

/// What a WebSocket server saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// The handshake: its target and `Cookie`.
    Handshake(String, Option<String>),
    /// The client's close frame and its code.
    Close(Option<u16>),
    /// The client's half-close (its FIN) arrived.
    HalfClosed,
    /// The connection ended without a close frame from the client (a reset, an EOF).
    Ended,
    /// The client broke the protocol (the error); the server failed the connection.
    Failed(String),
}

/// A WebSocket server on loopback, each connection in a thread: it echoes text and
/// binary messages and answers commands (`who`, `close:CODE`, `reset`, `half-close`).
/// On a protocol error it fails the connection with a reset, after a close frame with
/// 1002 when its target ends in `fail-close`.
pub struct WsServer {
    pub addr: SocketAddr,
    seen: Receiver<Seen>,
}

impl WsServer {
    pub fn start(name: &'static str) -> WsServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, seen) = channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let tx = tx.clone();
                std::thread::spawn(move || serve(stream, name, tx));
            }
        });
        WsServer { addr, seen }
    }

    /// The next thing the server saw, within 10 s.
    pub fn next(&self) -> Seen {
        self.seen
            .recv_timeout(Duration::from_secs(10))
            .expect("the server saw nothing in 10 s")
    }
}

// The handshake callback's error type is tungstenite's (a whole HTTP response).
#[allow(clippy::result_large_err)]
pub fn serve(stream: TcpStream, name: &'static str, tx: Sender<Seen>) {
    let mut target = String::new();
    let mut cookie = None;
    let callback = |req: &Request, resp: Response| {
        target = req.uri().to_string();
        cookie = req
            .headers()
            .get("cookie")
            .map(|c| c.to_str().unwrap().to_string());
        Ok(resp)
    };
    let Ok(mut ws) = tungstenite::accept_hdr_with_config(stream, callback, Some(config())) else {
        return;
    };
    let _ = tx.send(Seen::Handshake(target.clone(), cookie));
    loop {
        let sent = match ws.read() {
            Ok(Message::Text(text)) => match text.as_str() {
                "who" => ws.send(Message::text(name)),
                "reset" => return reset(ws.get_ref()),
                "half-close" => return after_half_close(ws, &tx),
                command => match command.strip_prefix("close:") {
                    Some(code) => ws.close(Some(CloseFrame {
                        code: CloseCode::from(code.parse::<u16>().unwrap()),
                        reason: "bye".into(),
                    })),
                    None => ws.send(Message::Text(text)),
                },
            },
            Ok(Message::Binary(bytes)) => ws.send(Message::Binary(bytes)),
            // tungstenite turns a close code no endpoint may send into its own 1002 reply.
            Ok(Message::Close(Some(f)))
                if f.code == CloseCode::Protocol && f.reason.as_str() == "Protocol violation" =>
            {
                let _ = tx.send(Seen::Failed("a close code no endpoint may send".into()));
                if target.ends_with("fail-close") {
                    let _ = ws.flush();
                }
                return reset(ws.get_ref());
            }
            Ok(Message::Close(frame)) => {
                let _ = tx.send(Seen::Close(frame.map(|f| u16::from(f.code))));
                // tungstenite answers it; the next read ends the connection.
                ws.flush()
            }
            // A ping's pong is queued: flushed here.
            Ok(_) => ws.flush(),
            Err(Error::ConnectionClosed | Error::AlreadyClosed) => return,
            Err(Error::Io(_))
            | Err(Error::Protocol(
                tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
            )) => {
                let _ = tx.send(Seen::Ended);
                return;
            }
            Err(e) => {
                // RFC 6455 §7.1.7: the endpoint fails the connection.
                let _ = tx.send(Seen::Failed(e.to_string()));
                if target.ends_with("fail-close") {
                    let _ = ws.close(Some(CloseFrame {
                        code: CloseCode::Protocol,
                        reason: "".into(),
                    }));
                    let _ = ws.flush();
                }
                return reset(ws.get_ref());
            }
        };
        match sent {
            Ok(()) => {}
            // The closing handshake is complete.
            Err(Error::ConnectionClosed | Error::AlreadyClosed) => return,
            Err(_) => {
                let _ = tx.send(Seen::Ended);
                return;
            }
        }
    }
}

/// The client said it half-closes: its FIN is awaited on the socket, then a message and
/// a close frame go the other way, which must still be open.
pub fn after_half_close(mut ws: WebSocket<TcpStream>, tx: &Sender<Seen>) {
    let s = ws.get_mut();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {
            let _ = tx.send(Seen::HalfClosed);
        }
        other => {
            let _ = tx.send(Seen::Failed(format!("no FIN, but {other:?}")));
            return;
        }
    }
    let _ = ws.send(Message::text("after your FIN"));
    let _ = ws.close(None);
    let _ = ws.flush();
}

/// A client's transport: plain TCP or TLS.
pub trait Transport: Read + Write {
    fn tcp(&self) -> &TcpStream;
    /// Ends the client's half (a FIN; over TLS, close_notify first).
    fn half_close(&mut self);
}

impl Transport for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
    fn half_close(&mut self) {
        self.shutdown(Shutdown::Write).unwrap();
    }
}

impl Transport for SslStream<TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref()
    }
    fn half_close(&mut self) {
        // close_notify, the TLS end of the client's half.
        let _ = self.shutdown();
    }
}

/// How the client reaches tether.
#[derive(Clone, Copy, Debug)]
pub enum Via {
    Plain,
    Tls,
}

pub fn connect(addr: SocketAddr, via: Via) -> Box<dyn Transport> {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    match via {
        Via::Plain => Box::new(tcp),
        Via::Tls => {
            let mut c = SslConnector::builder(SslMethod::tls()).unwrap();
            c.set_verify(SslVerifyMode::NONE);
            Box::new(c.build().connect("a.test", tcp).unwrap())
        }
    }
}

pub type Client = WebSocket<Box<dyn Transport>>;

/// A WebSocket through tether at `target`, with a `Cookie` when given.
pub fn open(addr: SocketAddr, via: Via, target: &str, cookie: Option<&str>) -> Client {
    let mut req = format!("ws://{addr}{target}")
        .into_client_request()
        .unwrap();
    if let Some(c) = cookie {
        req.headers_mut().insert("cookie", c.parse().unwrap());
    }
    let (ws, resp) =
        tungstenite::client::client_with_config(req, connect(addr, via), Some(config()))
            .unwrap_or_else(|e| panic!("handshake through tether: {e}"));
    assert_eq!(resp.status(), 101);
    ws
}

pub fn echo(ws: &mut Client, text: &str) {
    ws.send(Message::text(text)).unwrap();
    match ws.read() {
        Ok(Message::Text(t)) => assert_eq!(t.as_str(), text),
        other => panic!("no echo of {text:?}: {other:?}"),
    }
}

/// The closing handshake the client started completes: the server's answer, then the
/// end.
pub fn closed(ws: &mut Client, via: Via) {
    match ws.read() {
        Ok(Message::Close(_)) => {}
        other => panic!("{via:?}: no answer to the close: {other:?}"),
    }
    match ws.read() {
        Err(Error::ConnectionClosed) => {}
        other => panic!("{via:?}: not closed: {other:?}"),
    }
}

/// Did the connection end as a peer's leaving ends it (a FIN or a reset, with or without
/// the closing handshake), not with a frame the client could not read?
pub fn left(e: &Error) -> bool {
    matches!(
        e,
        Error::ConnectionClosed
            | Error::AlreadyClosed
            | Error::Io(_)
            | Error::Protocol(tungstenite::error::ProtocolError::ResetWithoutClosingHandshake)
    )
}
