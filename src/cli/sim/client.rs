//! A minimal HTTP/1.1 client for tests and the demo: keep-alive over TCP or TLS, raw
//! header bytes, chunked and read-to-EOF response bodies, and a hard timeout so tests never
//! hang.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use pingora_core::tls::ssl::SslConnector;
use pingora_core::tls::tokio_ssl::SslStream;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub use super::response::Response;
use super::wire::{self, Head, MAX_BODY, MAX_HEAD};

/// Upper bound on one request, connect to last body byte.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What a connection runs on: TCP, or TLS over it.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type Conn = BufReader<Box<dyn Io>>;

/// One keep-alive connection to `addr`, opened on first use and reopened when needed.
pub struct HttpClient {
    addr: SocketAddr,
    conn: Option<Conn>,
    /// TLS: the connector and the name the server's certificate is checked against (SNI).
    tls: Option<(SslConnector, String)>,
}

impl HttpClient {
    /// Connects lazily, on the first request.
    pub fn new(addr: SocketAddr) -> Self {
        HttpClient {
            addr,
            conn: None,
            tls: None,
        }
    }

    /// Connects lazily, with TLS through `connector` to the server named `name`.
    pub fn tls(addr: SocketAddr, connector: SslConnector, name: &str) -> Self {
        HttpClient {
            addr,
            conn: None,
            tls: Some((connector, name.to_string())),
        }
    }

    /// Sends one request and reads its response. Adds `Host` and, for a non-empty body,
    /// `Content-Length` unless the caller supplied them (or `Transfer-Encoding`).
    /// A reused connection that fails before any response byte arrives was most likely
    /// closed by the server while idle, so the request is resent once on a new connection.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &[u8])],
        body: &[u8],
    ) -> io::Result<Response> {
        let raw = encode_request(self.addr, method, path, headers, body);
        // On timeout the connection, taken out of `self.conn`, is dropped with the future.
        with_timeout(self.exchange(method, &raw)).await
    }

    /// `request` for the common case: GET with text headers and no body.
    pub async fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> io::Result<Response> {
        let headers: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
        self.request("GET", path, &headers, b"").await
    }

    async fn exchange(&mut self, method: &str, raw: &[u8]) -> io::Result<Response> {
        if let Some(mut conn) = self.conn.take() {
            if send_and_await_reply(&mut conn, raw).await.is_ok() {
                return self.finish(conn, method).await;
            }
            // Nothing came back, so the server never answered this request: resend below.
        }
        let mut conn = connect(self.addr, self.tls.as_ref()).await?;
        send_and_await_reply(&mut conn, raw).await?;
        self.finish(conn, method).await
    }

    async fn finish(&mut self, mut conn: Conn, method: &str) -> io::Result<Response> {
        let (response, reusable) = read_response(&mut conn, method).await?;
        if reusable {
            self.conn = Some(conn);
        }
        Ok(response)
    }
}

/// Sends raw bytes on a fresh connection and reads one response (for malformed-input tests).
pub async fn send_raw(addr: SocketAddr, raw: &[u8]) -> io::Result<Response> {
    let method = raw.split(|&b| b == b' ').next().unwrap_or_default();
    let method = if method == b"HEAD" { "HEAD" } else { "GET" };
    with_timeout(async {
        let mut conn = connect(addr, None).await?;
        send_and_await_reply(&mut conn, raw).await?;
        Ok(read_response(&mut conn, method).await?.0)
    })
    .await
}

async fn connect(addr: SocketAddr, tls: Option<&(SslConnector, String)>) -> io::Result<Conn> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let Some((connector, name)) = tls else {
        return Ok(BufReader::new(Box::new(stream)));
    };
    let ssl = connector
        .configure()
        .and_then(|c| c.into_ssl(name))
        .map_err(io::Error::other)?;
    let mut stream = SslStream::new(ssl, stream).map_err(io::Error::other)?;
    std::pin::Pin::new(&mut stream)
        .connect()
        .await
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(BufReader::new(Box::new(stream)))
}

async fn with_timeout<T>(f: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
    match tokio::time::timeout(REQUEST_TIMEOUT, f).await {
        Ok(result) => result,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

fn encode_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut out = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    if !has("host") {
        out.extend_from_slice(format!("Host: {addr}\r\n").as_bytes());
    }
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() && !has("content-length") && !has("transfer-encoding") {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// Writes the request and waits until the first response byte is buffered.
async fn send_and_await_reply(conn: &mut Conn, raw: &[u8]) -> io::Result<()> {
    conn.get_mut().write_all(raw).await?;
    if conn.fill_buf().await?.is_empty() {
        let msg = "connection closed before any response";
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, msg));
    }
    Ok(())
}

/// Reads one response; the flag says whether the connection can carry another request.
async fn read_response(conn: &mut Conn, method: &str) -> io::Result<(Response, bool)> {
    loop {
        let (response, reusable) = read_one_response(conn, method).await?;
        // Interim answers such as `100 Continue` precede the real one.
        if !(100..200).contains(&response.status) || response.status == 101 {
            return Ok((response, reusable));
        }
    }
}

async fn read_one_response(conn: &mut Conn, method: &str) -> io::Result<(Response, bool)> {
    let head = match wire::read_head(conn, MAX_HEAD).await? {
        Head::Complete(head) => head,
        Head::Eof => return Err(io::ErrorKind::UnexpectedEof.into()),
        Head::TooLarge => return Err(wire::invalid("response head too large")),
    };
    // There is at most one header per line, so this many slots always suffice.
    let lines = head.windows(2).filter(|w| w == b"\r\n").count();
    let mut slots = vec![httparse::EMPTY_HEADER; lines];
    let mut parsed = httparse::Response::new(&mut slots);
    if !matches!(parsed.parse(&head), Ok(httparse::Status::Complete(_))) {
        return Err(wire::invalid("malformed response head"));
    }
    let status = parsed.code.unwrap_or_default();
    let http10 = parsed.version == Some(0);
    let headers = wire::owned_headers(parsed.headers);

    let mut reusable = wire::keeps_alive(&headers, http10);
    let bodiless = method.eq_ignore_ascii_case("HEAD") || matches!(status, 100..=199 | 204 | 304);
    let body = if bodiless {
        Vec::new()
    } else if wire::has_token(&headers, "transfer-encoding", "chunked") {
        wire::read_chunked(conn).await?
    } else if let Some(len) = wire::content_length(&headers)? {
        let len = usize::try_from(len).ok().filter(|&n| n <= MAX_BODY);
        let mut body = vec![0; len.ok_or_else(|| wire::invalid("response body too large"))?];
        conn.read_exact(&mut body).await?;
        body
    } else {
        // No framing: the body runs to EOF, which also ends the connection.
        reusable = false;
        let mut body = Vec::new();
        conn.take(MAX_BODY as u64).read_to_end(&mut body).await?;
        body
    };
    Ok((
        Response {
            status,
            headers,
            body,
        },
        reusable,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A throwaway server: its n-th connection answers requests with `script[n]` in order,
    /// then closes. Connections are served one after another.
    async fn scripted_server(script: Vec<Vec<&'static str>>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            for replies in script {
                let mut conn = BufReader::new(listener.accept().await.unwrap().0);
                for reply in replies {
                    if !matches!(
                        wire::read_head(&mut conn, MAX_HEAD).await,
                        Ok(Head::Complete(_))
                    ) {
                        break;
                    }
                    conn.get_mut().write_all(reply.as_bytes()).await.unwrap();
                }
            }
        });
        addr
    }

    #[tokio::test]
    async fn chunked_response_is_decoded_and_connection_reused() {
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                       5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nTrailer: t\r\n\r\n";
        let plain = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext";
        let mut client = HttpClient::new(scripted_server(vec![vec![chunked, plain]]).await);
        assert_eq!(
            client.get("/", &[]).await.unwrap().body_str(),
            "hello world"
        );
        // The script has a single connection, so this only works if it was kept.
        assert_eq!(client.get("/", &[]).await.unwrap().body_str(), "next");
    }

    #[tokio::test]
    async fn unframed_body_runs_to_eof_and_connection_is_dropped() {
        let eof = "HTTP/1.1 200 OK\r\n\r\nuntil eof";
        let closing = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye";
        let script = vec![
            vec![eof],
            vec![closing, "never sent"],
            vec!["HTTP/1.0 204 No\r\n\r\n"],
        ];
        let mut client = HttpClient::new(scripted_server(script).await);
        assert_eq!(client.get("/", &[]).await.unwrap().body_str(), "until eof");
        assert_eq!(client.get("/", &[]).await.unwrap().body_str(), "bye");
        assert_eq!(client.get("/", &[]).await.unwrap().status, 204);
    }

    #[tokio::test]
    async fn resends_once_when_idle_keep_alive_connection_was_closed() {
        let first = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst";
        let second = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond";
        let mut client = HttpClient::new(scripted_server(vec![vec![first], vec![second]]).await);
        assert_eq!(client.get("/", &[]).await.unwrap().body_str(), "first");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(client.get("/", &[]).await.unwrap().body_str(), "second");
    }

    #[tokio::test]
    async fn head_204_304_have_no_body() {
        let script = vec![vec![
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 204 No Content\r\n\r\n",
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        ]];
        let mut client = HttpClient::new(scripted_server(script).await);
        assert!(client
            .request("HEAD", "/", &[], b"")
            .await
            .unwrap()
            .body
            .is_empty());
        assert_eq!(client.get("/", &[]).await.unwrap().status, 204);
        assert_eq!(client.get("/", &[]).await.unwrap().status, 304);
        assert_eq!(client.get("/", &[]).await.unwrap().body_str(), "ok");
    }

    #[tokio::test]
    async fn response_helpers() {
        let reply =
            "HTTP/1.1 200 OK\r\nset-cookie: other=1\r\nSet-Cookie: JSESSIONID=A.r1; Path=/\r\n\
                     Set-Cookie: JSESSIONID=B.r2\r\nX-Raw: é\r\nContent-Length: 0\r\n\r\n";
        let resp = send_raw(
            scripted_server(vec![vec![reply]]).await,
            b"GET / HTTP/1.1\r\n\r\n",
        )
        .await
        .unwrap();
        assert_eq!(resp.set_cookie("JSESSIONID").as_deref(), Some("A.r1"));
        assert_eq!(resp.set_cookie("missing"), None);
        assert_eq!(resp.headers_named("SET-COOKIE").count(), 3);
        assert_eq!(resp.header("x-RAW"), Some("é"));
        assert_eq!(resp.body_str(), "");
    }

    #[tokio::test]
    async fn refused_connection_is_an_error() {
        let addr = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let err = HttpClient::new(addr).get("/", &[]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
    }
}
