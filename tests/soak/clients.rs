//! How the soak's users reach tether: HTTP/1.1 keep-alive over TCP or TLS (one connection
//! per instance and user), or HTTP/2 over TLS (one connection per instance, shared by many
//! users' streams); and what a user reads from an answer.

use bytes::Bytes;
use pingora_core::tls::ssl::{SslConnector, SslMethod, SslVerifyMode};
use pingora_core::tls::tokio_ssl::SslStream;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tether::cli::sim::HttpClient;
use tokio::sync::Mutex;

/// What a user checks in an answer.
pub struct Seen {
    pub status: u16,
    pub server: String,
    pub count: Option<u64>,
    pub set_cookie: Option<String>,
    /// The request reached the server with `$WSFO` (the WebSphere sims say so).
    pub failover: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Proto {
    Http1,
    Http1Tls,
    Http2,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::Http1 => "http/1.1",
            Proto::Http1Tls => "http/1.1+tls",
            Proto::Http2 => "h2",
        }
    }
}

/// A TLS client that checks tether's certificate against the test CA, offering `alpn`.
pub fn connector(ca: &str, alpn: &[u8]) -> SslConnector {
    let mut c = SslConnector::builder(SslMethod::tls()).unwrap();
    c.set_ca_file(ca).unwrap();
    c.set_verify(SslVerifyMode::PEER);
    c.set_alpn_protos(alpn).unwrap();
    c.build()
}

/// One HTTP/2 connection to an instance, made again when it ends (an upgraded instance
/// sends GOAWAY and closes it).
pub struct H2 {
    addr: SocketAddr,
    connector: SslConnector,
    send: Mutex<Option<h2::client::SendRequest<Bytes>>>,
}

impl H2 {
    pub fn new(addr: SocketAddr, ca: &str) -> Arc<H2> {
        Arc::new(H2 {
            addr,
            connector: connector(ca, b"\x02h2"),
            send: Mutex::new(None),
        })
    }

    async fn sender(&self) -> Result<h2::client::SendRequest<Bytes>, String> {
        let mut send = self.send.lock().await;
        if let Some(s) = send.as_ref() {
            return Ok(s.clone());
        }
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let ssl = self
            .connector
            .configure()
            .and_then(|c| c.into_ssl("localhost"))
            .map_err(|e| e.to_string())?;
        let mut tls = SslStream::new(ssl, tcp).map_err(|e| e.to_string())?;
        Pin::new(&mut tls)
            .connect()
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let (s, conn) = h2::client::handshake(tls)
            .await
            .map_err(|e| format!("h2 handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        *send = Some(s.clone());
        Ok(s)
    }

    async fn forget(&self) {
        *self.send.lock().await = None;
    }

    /// GET `path` with `cookie`. A stream the server did not take (refused, or above the
    /// last one its GOAWAY accepted) is sent again once on a new connection, as HTTP/2
    /// allows (RFC 9113 §8.7): `retried` says so.
    pub async fn get(&self, path: &str, cookie: Option<&str>) -> (Result<Seen, String>, bool) {
        let mut retried = false;
        loop {
            match self.try_get(path, cookie).await {
                Err((_, true)) if !retried => {
                    retried = true;
                    self.forget().await;
                }
                Err((e, _)) => return (Err(e), retried),
                Ok(seen) => return (Ok(seen), retried),
            }
        }
    }

    /// The answer, or why not and whether the request is known not to have been taken.
    async fn try_get(&self, path: &str, cookie: Option<&str>) -> Result<Seen, (String, bool)> {
        let unsent = |e: h2::Error| {
            let safe = e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM);
            (format!("h2: {e}"), safe)
        };
        let send = self.sender().await.map_err(|e| (e, false))?;
        let mut send = match send.ready().await {
            Ok(s) => s,
            // The connection ended before this stream was opened: nothing was sent.
            Err(e) => {
                self.forget().await;
                return Err((format!("h2 ready: {e}"), true));
            }
        };
        let mut req = http::Request::get(format!("https://localhost{path}"));
        if let Some(c) = cookie {
            req = req.header("cookie", format!("JSESSIONID={c}"));
        }
        let (response, _) = send
            .send_request(req.body(()).unwrap(), true)
            .map_err(unsent)?;
        let response = tokio::time::timeout(Duration::from_secs(10), response)
            .await
            .map_err(|_| ("h2: no answer in 10 s".to_string(), false))?
            .map_err(unsent)?;
        let (parts, mut body) = response.into_parts();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| (format!("h2 body: {e}"), false))?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let header = |n: &str| parts.headers.get(n).and_then(|v| v.to_str().ok());
        Ok(Seen {
            status: parts.status.as_u16(),
            server: header("x-server").unwrap_or_default().to_string(),
            count: header("x-session-count").and_then(|c| c.parse().ok()),
            set_cookie: parts
                .headers
                .get_all("set-cookie")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find_map(|v| v.strip_prefix("JSESSIONID="))
                .map(|v| v.split(';').next().unwrap_or_default().to_string()),
            failover: header("x-failover").is_some(),
        })
    }
}

/// A user's way to one instance.
pub enum Way {
    Http1(HttpClient),
    Http2(Arc<H2>),
}

impl Way {
    pub async fn get(&mut self, path: &str, cookie: Option<&str>) -> (Result<Seen, String>, bool) {
        match self {
            Way::Http2(h2) => h2.get(path, cookie).await,
            Way::Http1(client) => {
                let header = cookie.map(|c| format!("JSESSIONID={c}"));
                let headers: Vec<(&str, &str)> =
                    header.iter().map(|h| ("Cookie", h.as_str())).collect();
                let r = client.get(path, &headers).await;
                // A failed connection is made again by the next request.
                let seen = r.map_err(|e| e.to_string()).map(|r| Seen {
                    status: r.status,
                    server: r.header("x-server").unwrap_or_default().to_string(),
                    count: r.header("x-session-count").and_then(|c| c.parse().ok()),
                    set_cookie: r.set_cookie("JSESSIONID"),
                    failover: r.header("x-failover").is_some(),
                });
                (seen, false)
            }
        }
    }
}
