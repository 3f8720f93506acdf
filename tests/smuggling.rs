//! Request framing that another hop could read differently: a request
//! with both `Content-Length` and `Transfer-Encoding`, codings that do not end in
//! `chunked`, `Transfer-Encoding` on HTTP/1.0. Each is answered 400 and the connection
//! closed, so bytes a front end counted as its body never become a request here. The raw
//! bytes go over a real socket; `./run test` runs this on both HTTP/1 paths.

mod common;

use common::{server_line, tomcats, Tether};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Writes `raw` in one write, then reads until tether closes (or 5 s pass): what was read,
/// and whether the connection was closed.
async fn exchange(t: &Tether, raw: &[u8]) -> (String, bool) {
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(raw).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

fn responses(text: &str) -> usize {
    text.matches("HTTP/1.1 ").count()
}

/// The bytes, CRLF line ends.
const CL_TE: &[u8] = b"POST /a HTTP/1.1\r\nHost: t.example\r\nContent-Length: 6\r\n\
Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /a-SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_framing_is_refused_and_the_connection_closed() {
    let sims = tomcats(1).await;
    let t = Tether::start(&format!("    servers:\n{}", server_line(&sims[0], "")));
    let cases: [(&str, &[u8]); 5] = [
        ("the issue's CL.TE bytes", CL_TE),
        (
            "TE before CL, other cases",
            b"POST /a HTTP/1.1\r\nhost: t.example\r\ntransfer-encoding: chunked\r\n\
content-LENGTH: 6\r\n\r\n0\r\n\r\nGET /a-SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n",
        ),
        (
            "a coding that does not end in chunked",
            b"POST /a HTTP/1.1\r\nHost: t.example\r\nTransfer-Encoding: gzip\r\n\r\n\
GET /a-SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n",
        ),
        (
            "chunked, then another coding",
            b"POST /a HTTP/1.1\r\nHost: t.example\r\nTransfer-Encoding: chunked, identity\r\n\r\n\
0\r\n\r\nGET /a-SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n",
        ),
        (
            "Transfer-Encoding on HTTP/1.0",
            b"POST /a HTTP/1.0\r\nHost: t.example\r\nConnection: keep-alive\r\n\
Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /a-SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n",
        ),
    ];
    for (what, raw) in cases {
        let before = sims[0].requests();
        let (text, closed) = exchange(&t, raw).await;
        assert!(text.starts_with("HTTP/1.1 400 "), "{what}: {text}");
        assert_eq!(responses(&text), 1, "{what}: one answer only: {text}");
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{what}: {text}"
        );
        assert!(closed, "{what}: tether closed the connection");
        assert_eq!(
            sims[0].requests(),
            before,
            "{what}: neither request reached the server"
        );
        // A fresh request still gets through.
        let ok = t.client().get("/", &[]).await.unwrap();
        assert_eq!(ok.status, 200, "{what}: tether goes on serving");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_bodies_alone_still_keep_the_connection() {
    let sims = tomcats(1).await;
    let t = Tether::start(&format!("    servers:\n{}", server_line(&sims[0], "")));
    let before = sims[0].requests();
    let (text, closed) = exchange(
        &t,
        b"POST /one HTTP/1.1\r\nHost: t.example\r\nTransfer-Encoding: chunked\r\n\r\n\
5\r\nhello\r\n0\r\n\r\nGET /two HTTP/1.1\r\nHost: t.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(
        responses(&text),
        2,
        "both pipelined requests answered: {text}"
    );
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(closed, "closed after the request that asked for it");
    assert_eq!(sims[0].requests(), before + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_0_request_without_host_reaches_the_server_with_one() {
    let sims = tomcats(1).await;
    let t = Tether::start(&format!("    servers:\n{}", server_line(&sims[0], "")));
    let (text, closed) = exchange(&t, b"GET / HTTP/1.0\r\n\r\n").await;
    assert!(
        text.starts_with("HTTP/1.0 200 ") || text.starts_with("HTTP/1.1 200 "),
        "{text}"
    );
    assert!(
        closed,
        "an HTTP/1.0 request without keep-alive is answered and closed"
    );
    let hosts: Vec<String> = sims[0]
        .last_request_headers()
        .into_iter()
        .filter(|(n, _)| n == "host")
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
        .collect();
    assert_eq!(
        hosts,
        [sims[0].addr().to_string()],
        "the server's address, as nginx sends $proxy_host"
    );
}
