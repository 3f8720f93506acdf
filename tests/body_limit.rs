//! `max_request_body` (Apache's `LimitRequestBody`, nginx's `client_max_body_size`, the
//! plug-in's `PostSizeLimit`), per listener and per route: a body whose `Content-Length`
//! is too large gets 413 before any server sees the request; a chunked or length-less
//! body that grows past the bound is cut off with 413; on HTTP/1 and HTTP/2.

mod common;

use common::{tomcats, Opts, Tether};
use std::io::{Read, Write};
use std::process::{Command, Stdio};

fn start(sim: &tether::cli::sim::TomcatSim) -> Tether {
    Tether::start_with(Opts {
        cluster: common::cluster_yaml("", std::slice::from_ref(sim)),
        listener_extra: "    h2c: true\n    limits: { max_request_body: 1000 }\n    routes:\n      - { path: \"/big/*\", cluster: shop, max_request_body: 100000 }\n".into(),
        ..Opts::default()
    })
}

/// A chunked POST of `len` bytes in 1 KiB chunks on its own connection: the status.
fn chunked(t: &Tether, path: &str, len: usize) -> u16 {
    let mut s = std::net::TcpStream::connect(t.addr).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: shop\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let chunk = [b'x'; 1024];
    let mut sent = 0;
    // tether may answer and close before the whole body went: writes then fail.
    while sent < len {
        let n = chunk.len().min(len - sent);
        let framed = [format!("{n:x}\r\n").as_bytes(), &chunk[..n], b"\r\n"].concat();
        if s.write_all(&framed).is_err() {
            break;
        }
        sent += n;
    }
    let _ = s.write_all(b"0\r\n\r\n");
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace()
        .nth(1)
        .unwrap_or("0")
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_past_the_bound_get_413_and_a_declared_one_never_reaches_a_server() {
    let sims = tomcats(1).await;
    let t = start(&sims[0]);
    let mut c = t.client();
    let small = c.request("POST", "/x", &[], &[b'x'; 1000]).await.unwrap();
    assert_eq!(small.status, 200, "at the bound");
    let seen = sims[0].requests();
    let large = c.request("POST", "/x", &[], &[b'x'; 1001]).await.unwrap();
    assert_eq!(large.status, 413);
    assert!(String::from_utf8_lossy(&large.body).contains("larger"));
    assert_eq!(sims[0].requests(), seen, "refused before a server saw it");
    // A route's own bound.
    let r = t
        .client()
        .request("POST", "/big/x", &[], &[b'x'; 50_000])
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    // Chunked bodies: counted as they come, the first part and what streams after it.
    let seen = sims[0].requests();
    assert_eq!(chunked(&t, "/x", 2000), 413);
    assert_eq!(
        sims[0].requests(),
        seen,
        "read whole before a server: never sent"
    );
    assert_eq!(chunked(&t, "/big/x", 90_000), 200);
    assert_eq!(
        chunked(&t, "/big/x", 300_000),
        413,
        "cut off while it streams"
    );
}

#[test]
fn http2_bodies_are_bounded_too() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sims = rt.block_on(tomcats(1));
    let t = start(&sims[0]);
    let curl = |path: &str, args: &[&str], body: &[u8]| {
        let mut child = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code} %{http_version}",
            ])
            .args(["--http2-prior-knowledge", "-X", "POST"])
            .args(args)
            .arg(format!("http://{}{path}", t.addr))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("curl");
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(body);
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let body = vec![b'x'; 2000];
    // With a length: refused before a server; without one (from a pipe): cut off.
    assert_eq!(curl("/x", &["--data-binary", "@-"], &body), "413 2");
    assert_eq!(curl("/x", &["-T", "-"], &body), "413 2");
    assert_eq!(curl("/big/x", &["-T", "-"], &body), "200 2");
}
