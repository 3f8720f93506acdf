//! The differential test of the two HTTP/1 engines: the same request streams,
//! valid and hostile, each as one write and split at every byte, go to a tether on
//! pingora-proxy (`http1: proxy`) and to one on tether's engine (`http1: engine`), each in
//! front of a recording server. Both must answer with the same statuses and forward the
//! same requests (request line, fields after tether's edits, body), or both refuse. Where
//! they differ on purpose the case says so (`Differs`), and docs/performance.md says why.

mod common;

use common::recording::{read_more, recording_server, Seen};
use common::{Opts, Tether};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn start(server: SocketAddr, http1: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: s1, address: \"{server}\" }}\n"),
        listener_extra: format!("    http1: {http1}\n"),
        ..Opts::default()
    })
}

/// What one side made of a stream: the statuses the client got, and each request the
/// server got (request line, fields by lower-case name in a sorted list, body).
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    statuses: Vec<u16>,
    forwarded: Vec<(String, Vec<String>, Vec<u8>)>,
}

const LAST: &[u8] = b"GET /last HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n";

/// `seen` is what the server at `server` recorded (its address, which tether puts in a
/// missing `Host`, reads as `SERVER`).
async fn exchange(
    addr: SocketAddr,
    (server, seen): (SocketAddr, &Arc<Mutex<Vec<Seen>>>),
    parts: &[&[u8]],
) -> Outcome {
    seen.lock().unwrap().clear();
    let mut s = TcpStream::connect(addr).await.unwrap();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if s.write_all(part).await.is_err() {
            break;
        }
    }
    // A last request that closes the connection, so each side's answers end with its close
    // (a refused stream closes earlier).
    let _ = s.write_all(LAST).await;
    let mut buf = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(true) = tokio::time::timeout_at(until, read_more(&mut s, &mut buf)).await {}
    let text = String::from_utf8_lossy(&buf);
    let statuses = text
        .match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect();
    let forwarded = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| {
            let mut lines = r.head.split("\r\n");
            let line = lines
                .next()
                .unwrap_or("")
                .replace(&server.to_string(), "SERVER");
            let mut fields: Vec<String> = lines
                .filter(|l| !l.is_empty())
                .map(|l| match l.split_once(':') {
                    Some((n, v)) => format!(
                        "{}:{}",
                        n.to_ascii_lowercase(),
                        v.trim().replace(&server.to_string(), "SERVER")
                    ),
                    None => l.to_string(),
                })
                .collect();
            fields.sort();
            (line, fields, r.body.clone())
        })
        .collect();
    Outcome {
        statuses,
        forwarded,
    }
}

/// How the engines are expected to compare on a case.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expect {
    Same,
    /// They differ on purpose; the reason is in docs/performance.md, "Where the engines differ".
    Differs(&'static str),
}

const CASES: &[(&str, &[u8], Expect)] = &[
    ("plain GET", b"GET /a?q=1 HTTP/1.1\r\nHost: shop\r\nUser-Agent: t\r\n\r\n", Expect::Same),
    ("session in the path", b"GET /a;jsessionid=ABC.s1?q=1 HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("cookie and odd case", b"GET / HTTP/1.1\r\nhOsT: shop\r\nCOOKIE: JSESSIONID=ABC.s1; x=y\r\nX-Mixed-Case: 1\r\n\r\n", Expect::Same),
    ("client forwarded fields", b"GET / HTTP/1.1\r\nHost: shop\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil\r\n\r\n", Expect::Same),
    ("client $WS fields", b"GET / HTTP/1.1\r\nHost: shop\r\n$WSFO: true\r\n$WSRA: 1.2.3.4\r\n\r\n", Expect::Same),
    ("hop fields", b"GET / HTTP/1.1\r\nHost: shop\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: Basic eA==\r\nTE: trailers\r\n\r\n", Expect::Same),
    ("HTTP/1.0 without Host", b"GET /old HTTP/1.0\r\n\r\n", Expect::Same),
    ("HTTP/1.0 keep-alive", b"GET /old HTTP/1.0\r\nHost: shop\r\nConnection: keep-alive\r\n\r\n", Expect::Same),
    ("POST with a body", b"POST /p HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\n\r\nhello", Expect::Same),
    ("empty POST", b"POST /p HTTP/1.1\r\nHost: shop\r\nContent-Length: 0\r\n\r\n", Expect::Same),
    ("CL list of one value", b"POST /p HTTP/1.1\r\nHost: shop\r\nContent-Length: 5, 5\r\n\r\nhello", Expect::Same),
    ("CL lines of one value", b"POST /p HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", Expect::Same),
    ("pipelined", b"GET /1 HTTP/1.1\r\nHost: shop\r\n\r\nPOST /2 HTTP/1.1\r\nHost: shop\r\nContent-Length: 3\r\n\r\nabcGET /3 HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("leading empty line", b"\r\nGET / HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("Connection options", b"GET / HTTP/1.1\r\nHost: shop\r\nConnection: keep-alive, X-Opt\r\nConnection: other\r\nX-Opt: 1\r\nOther: 2\r\nX-Kept: 3\r\n\r\n", Expect::Same),
    ("Connection nominating Host", b"GET / HTTP/1.1\r\nHost: shop\r\nConnection: host\r\n\r\n", Expect::Same),
    ("Connection nominating X-Forwarded-For", b"GET / HTTP/1.1\r\nHost: shop\r\nConnection: X-Forwarded-For\r\nX-Forwarded-For: 192.0.2.1\r\n\r\n", Expect::Same),
    ("Connection with a quoted option", b"GET / HTTP/1.1\r\nHost: shop\r\nConnection: \"X-Opt\"\r\n\r\n", Expect::Same),
    ("Connection with ten options", b"GET / HTTP/1.1\r\nHost: shop\r\nConnection: a, b, c, d, e, f, g, h, i, j\r\n\r\n", Expect::Same),
    ("Connection with nine options", b"GET / HTTP/1.1\r\nHost: shop\r\nConnection: a, b, c, d, e, f, g, h, keep-alive\r\nA: 1\r\nB: 2\r\n\r\n", Expect::Same),
    ("Expect 100-continue", b"POST /p HTTP/1.1\r\nHost: shop\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello", Expect::Differs("Expect keeps the connection")),
    ("absolute-form", b"GET http://shop/a?q=1 HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("absolute-form, another Host", b"GET http://other:81/a?q=1 HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("absolute-form without a path", b"GET http://shop HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("absolute-form, HTTPS upper case", b"GET HTTPS://shop/x HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("absolute-form, session in the path", b"GET http://shop/a;jsessionid=ABC.s1 HTTP/1.1\r\nHost: shop\r\nCookie: JSESSIONID=DEF.s1\r\n\r\n", Expect::Same),
    ("absolute-form with userinfo", b"GET http://u@shop/ HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("absolute-form on HTTP/1.0 without Host", b"GET http://shop/old HTTP/1.0\r\n\r\n", Expect::Same),
    ("asterisk-form", b"OPTIONS * HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("chunked", b"POST /c HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", Expect::Same),
    ("chunked, extensions and a trailer", b"POST /c HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n3;a=1\r\nabc\r\n002\r\nde\r\n0\r\nX-T: 1\r\n\r\nGET /n HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("chunk size not hex", b"POST /c HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n0\r\n\r\n", Expect::Differs("chunk syntax")),
    ("chunk extension with a control byte", b"POST /c HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n3;a=\x01\r\nabc\r\n0\r\n\r\n", Expect::Differs("chunk syntax")),
    ("CL and TE", b"POST / HTTP/1.1\r\nHost: shop\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", Expect::Same),
    ("differing CL", b"POST / HTTP/1.1\r\nHost: shop\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", Expect::Same),
    ("CL list that differs", b"POST / HTTP/1.1\r\nHost: shop\r\nContent-Length: 3, 4\r\n\r\nabcd", Expect::Same),
    ("CL not a number", b"POST / HTTP/1.1\r\nHost: shop\r\nContent-Length: 3x\r\n\r\nabc", Expect::Same),
    ("CL with a sign", b"POST / HTTP/1.1\r\nHost: shop\r\nContent-Length: +3\r\n\r\nabc", Expect::Same),
    ("TE not ending in chunked", b"POST / HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", Expect::Same),
    ("TE chunked twice", b"POST / HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", Expect::Same),
    ("TE on HTTP/1.0", b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", Expect::Same),
    ("two Hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", Expect::Same),
    ("no Host on 1.1", b"GET / HTTP/1.1\r\nX: 1\r\n\r\n", Expect::Same),
    ("space before a colon", b"GET / HTTP/1.1\r\nHost : shop\r\n\r\n", Expect::Same),
    ("obs-fold", b"GET / HTTP/1.1\r\nHost: shop\r\nX: 1\r\n 2\r\n\r\n", Expect::Same),
    ("NUL in a value", b"GET / HTTP/1.1\r\nHost: shop\r\nX: a\0b\r\n\r\n", Expect::Same),
    ("HTTP/2.0 in an HTTP/1 line", b"GET / HTTP/2.0\r\nHost: shop\r\n\r\n", Expect::Same),
    ("bare LF line ends", b"GET / HTTP/1.1\nHost: shop\n\n", Expect::Differs("bare LF")),
    ("bare LF in one field", b"GET / HTTP/1.1\r\nHost: shop\nX: 1\r\n\r\n", Expect::Differs("bare LF")),
    // Found by tests/http1_differential.rs (the in-process differential):
    ("userinfo in Host", b"GET / HTTP/1.1\r\nHost: user@shop\r\n\r\n", Expect::Same),
    ("`<` in the target", b"GET /a<b HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("`{` and `|` in the target", b"GET /a{b}?c|d HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Same),
    ("a fragment in the target", b"GET /a#b HTTP/1.1\r\nHost: shop\r\n\r\n", Expect::Differs("fragment")),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_engines_forward_or_refuse_the_same_requests() {
    let (proxy_server, proxy_seen) = recording_server().await;
    let (engine_server, engine_seen) = recording_server().await;
    let proxy = start(proxy_server, "proxy");
    let engine = start(engine_server, "engine");
    let mut failures = Vec::new();
    for (case, bytes, expect) in CASES {
        let a = exchange(proxy.addr, (proxy_server, &proxy_seen), &[bytes]).await;
        let b = exchange(engine.addr, (engine_server, &engine_seen), &[bytes]).await;
        match expect {
            Expect::Same if a != b => {
                failures.push(format!("{case}:\n  proxy:  {a:?}\n  engine: {b:?}"))
            }
            Expect::Differs(why) if a == b => {
                failures.push(format!("{case}: expected to differ ({why}), both {a:?}"))
            }
            Expect::Differs(why) => println!(
                "{case}: differs on purpose ({why}): proxy {:?}, engine {:?}",
                a.statuses, b.statuses
            ),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Each stream split in two at every byte: what arrives in pieces is read as if whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_split_at_any_byte_is_read_alike() {
    let (proxy_server, proxy_seen) = recording_server().await;
    let (engine_server, engine_seen) = recording_server().await;
    let proxy = start(proxy_server, "proxy");
    let engine = start(engine_server, "engine");
    for (case, bytes, _) in CASES.iter().filter(|(c, ..)| {
        [
            "pipelined",
            "CL lines of one value",
            "CL and TE",
            "cookie and odd case",
            "chunked, extensions and a trailer",
        ]
        .contains(c)
    }) {
        let whole = exchange(engine.addr, (engine_server, &engine_seen), &[bytes]).await;
        for cut in 1..bytes.len() {
            let parts: [&[u8]; 2] = [&bytes[..cut], &bytes[cut..]];
            let b = exchange(engine.addr, (engine_server, &engine_seen), &parts).await;
            assert_eq!(b, whole, "{case} split at {cut} (engine)");
            if cut % 7 == 0 {
                let a = exchange(proxy.addr, (proxy_server, &proxy_seen), &parts).await;
                assert_eq!(a, whole, "{case} split at {cut} (proxy)");
            }
        }
    }
}
