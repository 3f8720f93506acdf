//! The HTTP/1.1 server machinery every simulated application server shares: binding,
//! the accept loop, keep-alive connections, stop/restart on the same port, counters.
//!
//! A simulator plugs in a `Handler` that only decides what to answer; this module owns the
//! wire and the lifecycle, so a killed or restarted server behaves the same in every sim.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::wire::{self, Head, MAX_HEAD};

const MAX_HEADERS: usize = 100;

/// A request head, owned so the read buffer can be reused.
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) http10: bool,
    /// Names lower-cased, values raw.
    pub(crate) headers: Vec<(String, Vec<u8>)>,
}

/// What a handler answers; always sent as `text/plain` with a Content-Length.
pub(crate) struct SimResponse {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl SimResponse {
    pub(crate) fn ok(body: impl Into<Vec<u8>>) -> Self {
        SimResponse {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub(crate) fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// The application behind a `SimServer`: called for every request except `GET /health`.
pub(crate) trait Handler: Send + Sync + 'static {
    fn handle(&self, req: &Request) -> SimResponse;
}

/// A running (or stopped) server; clones share the same server.
#[derive(Clone)]
pub(crate) struct SimServer {
    inner: Arc<Inner>,
}

struct Inner {
    addr: SocketAddr,
    handler: Arc<dyn Handler>,
    requests: AtomicU64,
    connections: AtomicU64,
    /// Connections open now.
    open: AtomicU64,
    last_headers: Mutex<Vec<(String, Vec<u8>)>>,
    running: Mutex<Option<Running>>,
}

/// One incarnation of the server, between a start and a stop.
struct Running {
    /// Dropping this sender is the stop signal for the accept loop.
    stop: watch::Sender<()>,
    accept_loop: JoinHandle<()>,
}

impl SimServer {
    /// Binds 127.0.0.1:0 and starts serving on the current tokio runtime.
    pub(crate) fn start(handler: Arc<dyn Handler>) -> io::Result<SimServer> {
        let listener = bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        let inner = Arc::new(Inner {
            addr: listener.local_addr()?,
            handler,
            requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            open: AtomicU64::new(0),
            last_headers: Mutex::default(),
            running: Mutex::new(None),
        });
        *lock(&inner.running) = Some(spawn_accept_loop(&inner, listener));
        Ok(SimServer { inner })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// Stops accepting and closes every open connection (like a killed JVM); returns once
    /// the port is closed.
    pub(crate) async fn stop(&self) {
        let running = lock(&self.inner.running).take();
        if let Some(Running { stop, accept_loop }) = running {
            drop(stop);
            // The loop drops its listener and aborts its connections before finishing.
            let _ = accept_loop.await;
        }
    }

    /// Starts again on the same port; a no-op if already running.
    pub(crate) fn restart(&self) -> io::Result<()> {
        let mut running = lock(&self.inner.running);
        if running.is_none() {
            *running = Some(spawn_accept_loop(&self.inner, bind(self.inner.addr)?));
        }
        Ok(())
    }

    pub(crate) fn is_running(&self) -> bool {
        lock(&self.inner.running).is_some()
    }

    /// Total requests received (all paths except /health).
    pub(crate) fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::SeqCst)
    }

    /// Total TCP connections accepted.
    pub(crate) fn connections(&self) -> u64 {
        self.inner.connections.load(Ordering::SeqCst)
    }

    /// TCP connections open now (each one holds a thread on a real Tomcat).
    pub(crate) fn open_connections(&self) -> u64 {
        self.inner.open.load(Ordering::SeqCst)
    }

    /// Headers of the most recent request (all paths except /health), names lower-cased.
    pub(crate) fn last_request_headers(&self) -> Vec<(String, Vec<u8>)> {
        lock(&self.inner.last_headers).clone()
    }
}

/// A poisoned lock only means another test thread panicked; the data is still usable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// SO_REUSEADDR lets a restart rebind the port while old connections sit in TIME_WAIT.
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

fn spawn_accept_loop(inner: &Arc<Inner>, listener: TcpListener) -> Running {
    let (stop, stopped) = watch::channel(());
    let accept_loop = tokio::spawn(accept_loop(inner.clone(), listener, stopped));
    Running { stop, accept_loop }
}

async fn accept_loop(inner: Arc<Inner>, listener: TcpListener, mut stopped: watch::Receiver<()>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            // We never send, so this only wakes when the sender is dropped.
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    inner.connections.fetch_add(1, Ordering::SeqCst);
                    conns.spawn(serve_connection(inner.clone(), stream));
                }
                // Usually fd exhaustion; back off instead of spinning or dying.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            // Reap finished connections so the set does not grow without bound.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    // Close the port first, then drop every connection's socket, as a dying JVM would.
    drop(listener);
    conns.shutdown().await;
}

/// Counts a connection open while it lives.
struct Open(Arc<Inner>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve_connection(inner: Arc<Inner>, stream: TcpStream) {
    inner.open.fetch_add(1, Ordering::SeqCst);
    let _open = Open(inner.clone());
    let _ = stream.set_nodelay(true);
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    loop {
        let head = match wire::read_head(&mut reader, MAX_HEAD).await {
            Ok(Head::Complete(head)) => head,
            Ok(Head::TooLarge) => return reject(reader, writer, 431).await,
            Ok(Head::Eof) | Err(_) => return,
        };
        let req = match parse_request(&head) {
            Ok(req) => req,
            Err(status) => return reject(reader, writer, status).await,
        };
        // Like Tomcat, invite the body a client is holding back until we ask for it.
        if wire::has_token(&req.headers, "expect", "100-continue")
            && writer
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .is_err()
        {
            return;
        }
        if wire::discard_body(&mut reader, &req.headers).await.is_err() {
            return reject(reader, writer, 400).await;
        }
        let close = !wire::keeps_alive(&req.headers, req.http10);
        let response = respond(&inner, req, close);
        if writer.write_all(&response).await.is_err() || close {
            return;
        }
    }
}

fn parse_request(head: &[u8]) -> Result<Request, u16> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => Ok(Request {
            method: req.method.unwrap_or_default().to_string(),
            path: req.path.unwrap_or_default().to_string(),
            http10: req.version == Some(0),
            headers: wire::owned_headers(req.headers),
        }),
        Err(httparse::Error::TooManyHeaders) => Err(431),
        _ => Err(400),
    }
}

/// Builds the whole response for one request: /health here, everything else by the handler.
fn respond(inner: &Inner, req: Request, close: bool) -> Vec<u8> {
    let mut extra = String::new();
    if close {
        extra.push_str("Connection: close\r\n");
    }
    // Health probes must not disturb what tests count, so the handler never sees them.
    if req.method == "GET" && req.path.split(['?', '#']).next() == Some("/health") {
        return http_response(200, &extra, b"ok\n", true);
    }
    inner.requests.fetch_add(1, Ordering::SeqCst);
    let response = inner.handler.handle(&req);
    *lock(&inner.last_headers) = req.headers;
    for (name, value) in &response.headers {
        extra.push_str(&format!("{name}: {value}\r\n"));
    }
    // A HEAD response announces the GET body's length but must not carry it.
    let send_body = req.method != "HEAD";
    http_response(response.status, &extra, &response.body, send_body)
}

fn http_response(status: u16, extra_headers: &str, body: &[u8], send_body: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        431 => "Request Header Fields Too Large",
        _ => "Unknown",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{extra_headers}\r\n",
        body.len()
    )
    .into_bytes();
    if send_body {
        out.extend_from_slice(body);
    }
    out
}

/// Answers a request we refuse to process and closes the connection.
async fn reject(mut reader: BufReader<OwnedReadHalf>, mut writer: OwnedWriteHalf, status: u16) {
    let _ = writer
        .write_all(&http_response(status, "Connection: close\r\n", b"", true))
        .await;
    let _ = writer.shutdown().await;
    // Closing with unread input makes the kernel send RST, which can destroy the error
    // response before the client reads it; drain the client's leftovers briefly first.
    let mut sink = tokio::io::sink();
    let drain = tokio::io::copy(&mut reader, &mut sink);
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}
