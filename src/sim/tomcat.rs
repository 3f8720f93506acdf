//! A Tomcat-like application server: sticky `JSESSIONID` sessions tagged with a jvmRoute,
//! and a stop/restart switch that behaves like killing and relaunching the JVM.

use std::collections::HashMap;
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

use super::session::{requested_ids, IdGen};
use super::wire::{self, Head, MAX_HEAD};

const MAX_HEADERS: usize = 100;

/// A simulated application server; clones share the same server.
#[derive(Clone)]
pub struct TomcatSim {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    route: String,
    addr: SocketAddr,
    /// Session id → number of requests seen in that session. Outlives stop/restart.
    sessions: Mutex<HashMap<String, u64>>,
    ids: IdGen,
    requests: AtomicU64,
    connections: AtomicU64,
    last_headers: Mutex<Vec<(String, Vec<u8>)>>,
    running: Mutex<Option<Running>>,
}

/// One incarnation of the server, between a start and a stop.
struct Running {
    /// Dropping this sender is the stop signal for the accept loop.
    stop: watch::Sender<()>,
    accept_loop: JoinHandle<()>,
}

impl TomcatSim {
    /// Binds 127.0.0.1:0 and starts serving on the current tokio runtime.
    pub async fn start(name: &str, jvm_route: &str) -> io::Result<TomcatSim> {
        let listener = bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        let inner = Arc::new(Inner {
            name: name.to_string(),
            route: jvm_route.to_string(),
            addr: listener.local_addr()?,
            sessions: Mutex::default(),
            ids: IdGen::new(),
            requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            last_headers: Mutex::default(),
            running: Mutex::new(None),
        });
        *lock(&inner.running) = Some(spawn_accept_loop(&inner, listener));
        Ok(TomcatSim { inner })
    }

    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn route(&self) -> &str {
        &self.inner.route
    }

    /// Stops accepting and closes every open connection (like a killed JVM); returns once
    /// the port is closed. Sessions are kept for a later `restart`.
    pub async fn stop(&self) {
        let running = lock(&self.inner.running).take();
        if let Some(Running { stop, accept_loop }) = running {
            drop(stop);
            // The loop drops its listener and aborts its connections before finishing.
            let _ = accept_loop.await;
        }
    }

    /// Starts again on the same port with the same sessions; a no-op if already running.
    pub async fn restart(&self) -> io::Result<()> {
        let mut running = lock(&self.inner.running);
        if running.is_none() {
            *running = Some(spawn_accept_loop(&self.inner, bind(self.inner.addr)?));
        }
        Ok(())
    }

    pub fn is_running(&self) -> bool {
        lock(&self.inner.running).is_some()
    }

    /// Total requests received (all paths except /health).
    pub fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::SeqCst)
    }

    /// Total TCP connections accepted, so tests can tell whether connections were reused.
    pub fn connections(&self) -> u64 {
        self.inner.connections.load(Ordering::SeqCst)
    }

    /// Number of sessions this server holds.
    pub fn session_count(&self) -> usize {
        lock(&self.inner.sessions).len()
    }

    /// Headers of the most recent request (all paths except /health), names lower-cased.
    pub fn last_request_headers(&self) -> Vec<(String, Vec<u8>)> {
        lock(&self.inner.last_headers).clone()
    }
}

/// A poisoned lock only means another test thread panicked; the data is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

/// A request head, owned so the read buffer can be reused.
struct Request {
    method: String,
    path: String,
    http10: bool,
    headers: Vec<(String, Vec<u8>)>,
}

async fn serve_connection(inner: Arc<Inner>, stream: TcpStream) {
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

/// Builds the whole response for one request, updating counters and sessions.
fn respond(inner: &Inner, req: Request, close: bool) -> Vec<u8> {
    let mut extra = String::new();
    if close {
        extra.push_str("Connection: close\r\n");
    }
    if req.method == "GET" && req.path.split(['?', '#']).next() == Some("/health") {
        return http_response(200, &extra, b"ok\n", true);
    }
    inner.requests.fetch_add(1, Ordering::SeqCst);
    let (id, count) = touch_session(inner, &requested_ids(&req.path, &req.headers));
    *lock(&inner.last_headers) = req.headers;
    if count == 1 {
        extra.push_str(&format!(
            "Set-Cookie: JSESSIONID={id}; Path=/; HttpOnly\r\n"
        ));
    }
    extra.push_str(&format!(
        "X-Server: {}\r\nX-Session-Id: {id}\r\nX-Session-Count: {count}\r\n",
        inner.name
    ));
    let body = format!("server={} session={id} count={count}\n", inner.name);
    // A HEAD response announces the GET body's length but must not carry it.
    http_response(200, &extra, body.as_bytes(), req.method != "HEAD")
}

/// Counts a request in the first requested session we hold, or in a brand-new one.
fn touch_session(inner: &Inner, requested: &[String]) -> (String, u64) {
    let mut sessions = lock(&inner.sessions);
    for id in requested {
        if let Some(count) = sessions.get_mut(id) {
            *count += 1;
            return (id.clone(), *count);
        }
    }
    let id = inner.ids.session_id(&inner.route);
    sessions.insert(id.clone(), 1);
    (id, 1)
}

fn http_response(status: u16, extra_headers: &str, body: &[u8], send_body: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        _ => "Request Header Fields Too Large",
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
