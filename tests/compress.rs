//! `compress:`: a server's answers compressed as curl (`--compressed`, each coding) and a
//! browser take them, identical after decoding, on HTTP/1.1, HTTP/2 and HTTP/1.0; what must
//! not be compressed (a type not listed, a small answer, `no-transform`, a server's own
//! coding, a range) goes as it came, byte for byte.

mod common;

use common::{Opts, Tether};
use std::collections::HashMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A page of 100 KiB or so, text that compresses as pages do.
fn page() -> String {
    let mut out = String::from("<!doctype html><html><body><p id=end>");
    let words = [
        "session", "tomcat", "tether", "route", "cluster", "sticky", "replica",
    ];
    let mut x: u32 = 7;
    while out.len() < 100 * 1024 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        out.push_str(words[(x >> 16) as usize % words.len()]);
        out.push(' ');
    }
    out.push_str("</p></body></html>");
    out
}

/// The server's answers by path: `(fields, body, chunked)`.
fn answers() -> HashMap<&'static str, (String, Vec<u8>, bool)> {
    let page = page().into_bytes();
    let gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(5));
        e.write_all(&page).unwrap();
        e.finish().unwrap()
    };
    let mut a = HashMap::new();
    let html = "Content-Type: text/html; charset=utf-8\r\nETag: \"v1\"\r\n";
    a.insert("/page", (html.to_string(), page.clone(), false));
    a.insert("/chunked", (html.to_string(), page.clone(), true));
    a.insert(
        "/json",
        (
            "Content-Type: application/json\r\n".into(),
            b"{\"k\":\""
                .iter()
                .chain(&[b'v'; 5000])
                .chain(b"\"}")
                .copied()
                .collect(),
            false,
        ),
    );
    a.insert(
        "/png",
        ("Content-Type: image/png\r\n".into(), page.clone(), false),
    );
    a.insert("/small", (html.to_string(), b"<p>tiny</p>".to_vec(), false));
    a.insert(
        "/keep",
        (
            format!("{html}Cache-Control: no-transform\r\n"),
            page.clone(),
            false,
        ),
    );
    a.insert(
        "/gz",
        (format!("{html}Content-Encoding: gzip\r\n"), gz, false),
    );
    a
}

/// A server that answers each path as [`answers`] says, on kept connections.
async fn server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answers = std::sync::Arc::new(answers());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let answers = answers.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let end = loop {
                        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break at + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end);
                    let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                    let (fields, body, chunked) =
                        answers.get(path.as_str()).cloned().unwrap_or_default();
                    let mut out = format!("HTTP/1.1 200 OK\r\n{fields}").into_bytes();
                    if chunked {
                        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                        for part in body.chunks(7000) {
                            out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                            out.extend_from_slice(part);
                            out.extend_from_slice(b"\r\n");
                        }
                        out.extend_from_slice(b"0\r\n\r\n");
                    } else {
                        out.extend_from_slice(
                            format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
                        );
                        out.extend_from_slice(&body);
                    }
                    if s.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// What curl gets: status, fields (lower-case names), body as it came on the wire (or
/// decoded with `--compressed`).
fn curl(args: &[&str], url: &str) -> (u16, HashMap<String, String>, Vec<u8>) {
    let got = common::curl::curl(args, url);
    (got.status, got.fields, got.body)
}

fn start(server: std::net::SocketAddr) -> Tether {
    start_with(server, "    h2c: true\n    compress: {}\n")
}

/// tether in front of `server`, with `listener` (its `compress:` among it) and a route of
/// its own for `/json`.
fn start_with(server: std::net::SocketAddr, listener: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: a, address: \"{server}\", route: a }}\n"),
        listener_extra: format!("{listener}    routes:\n      - {{ path: \"/json\", cluster: shop, compress: {{ types: [application/json], br: 0, zstd: 0, gzip: 1 }} }}\n"),
        ..Opts::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_gets_the_servers_bytes_back_in_every_coding() {
    let server = server().await;
    let t = start(server);
    let expected = answers();
    for version in ["--http1.1", "--http2-prior-knowledge", "--http1.0"] {
        for path in ["/page", "/chunked"] {
            let url = format!("http://{}{path}", t.addr);
            for coding in ["gzip", "br", "zstd"] {
                let accept = format!("Accept-Encoding: {coding}");
                let (status, fields, raw) = curl(&[version, "-H", &accept], &url);
                let what = format!("{version} {path} {coding}");
                assert_eq!(status, 200, "{what}");
                assert_eq!(
                    fields.get("content-encoding").map(String::as_str),
                    Some(coding),
                    "{what}"
                );
                assert_eq!(
                    fields.get("vary").map(String::as_str),
                    Some("Accept-Encoding"),
                    "{what}"
                );
                assert_eq!(
                    fields.get("etag").map(String::as_str),
                    Some("W/\"v1\""),
                    "{what}"
                );
                assert!(!fields.contains_key("content-length"), "{what}");
                assert!(
                    raw.len() < expected["/page"].1.len() / 3,
                    "{what}: {} bytes",
                    raw.len()
                );
                let (_, _, decoded) = curl(&[version, "--compressed", "-H", &accept], &url);
                assert!(
                    decoded == expected["/page"].1,
                    "{what}: the server's bytes after decoding"
                );
            }
            // A client that takes no coding gets the answer as it is, told that it varies.
            let (_, fields, body) = curl(&[version], &url);
            assert!(body == expected["/page"].1, "{version} {path}");
            assert_eq!(
                fields.get("vary").map(String::as_str),
                Some("Accept-Encoding")
            );
            assert!(!fields.contains_key("content-encoding"));
        }
    }
    // A route's own settings: gzip at level 1 only.
    let json = format!("http://{}/json", t.addr);
    let (_, fields, _) = curl(&["-H", "Accept-Encoding: br, zstd, gzip"], &json);
    assert_eq!(
        fields.get("content-encoding").map(String::as_str),
        Some("gzip")
    );
    let (_, _, decoded) = curl(&["--compressed"], &json);
    assert!(decoded == expected["/json"].1);
    // q-values: br refused, zstd preferred over gzip.
    let url = format!("http://{}/page", t.addr);
    let (_, fields, _) = curl(&["-H", "Accept-Encoding: br;q=0, gzip;q=0.5, zstd"], &url);
    assert_eq!(
        fields.get("content-encoding").map(String::as_str),
        Some("zstd")
    );

    // What is not compressed goes as it came, byte for byte.
    for (path, why) in [
        ("/png", "a type not listed"),
        ("/small", "below min_size"),
        ("/keep", "no-transform"),
        ("/gz", "the server's own coding"),
    ] {
        for version in ["--http1.1", "--http2-prior-knowledge"] {
            let url = format!("http://{}{path}", t.addr);
            let (status, fields, raw) =
                curl(&[version, "-H", "Accept-Encoding: gzip, br, zstd"], &url);
            assert_eq!(status, 200, "{path}");
            assert!(
                raw == expected[path].1,
                "{version} {path}: {why}: passed on untouched"
            );
            let own = if path == "/gz" { Some("gzip") } else { None };
            assert_eq!(
                fields.get("content-encoding").map(String::as_str),
                own,
                "{path}"
            );
            assert_eq!(
                fields.get("content-length").map(String::as_str),
                Some(expected[path].1.len().to_string().as_str()),
                "{version} {path}"
            );
        }
    }
    // HEAD: the head as the server sent it.
    let (_, fields, raw) = curl(&["-I", "-H", "Accept-Encoding: gzip"], &url);
    assert!(raw.is_empty());
    assert!(!fields.contains_key("content-encoding"));
}

/// Chromium takes brotli or zstd, and shows the page the server sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_decodes_what_tether_compressed() {
    let server = server().await;
    let t = start(server);
    let driver = common::webdriver::Driver::start();
    let c = driver.browser(800, 600).await;
    c.goto(&format!("http://{}/page", t.addr)).await.unwrap();
    let expected = page();
    let text = expected
        .split("<p id=end>")
        .nth(1)
        .unwrap()
        .split("</p>")
        .next()
        .unwrap()
        .to_string();
    let got = common::webdriver::js(
        &c,
        "const n = performance.getEntriesByType('navigation')[0]; \
         return [document.getElementById('end').textContent, n.encodedBodySize, n.decodedBodySize];",
    )
    .await;
    assert_eq!(
        got[0].as_str().unwrap(),
        text,
        "the page as the server sent it"
    );
    let (encoded, decoded) = (got[1].as_u64().unwrap(), got[2].as_u64().unwrap());
    assert_eq!(decoded, expected.len() as u64);
    assert!(
        encoded * 3 < decoded,
        "sent compressed: {encoded} of {decoded} bytes"
    );
    // What Chromium was sent: the coding it prefers among those it offers.
    let (_, fields, _) = curl(
        &["-H", "Accept-Encoding: gzip, deflate, br, zstd"],
        &format!("http://{}/page", t.addr),
    );
    assert_eq!(
        fields.get("content-encoding").map(String::as_str),
        Some("br")
    );
    // With brotli off, Chromium gets zstd, and decodes it.
    let zstd = start_with(server, "    compress: { br: 0 }\n");
    c.goto(&format!("http://{}/page", zstd.addr)).await.unwrap();
    let got = common::webdriver::js(
        &c,
        "const n = performance.getEntriesByType('navigation')[0]; \
         return [document.getElementById('end').textContent, n.encodedBodySize, n.decodedBodySize];",
    )
    .await;
    assert_eq!(got[0].as_str().unwrap(), text, "the page after zstd");
    assert!(got[1].as_u64().unwrap() * 3 < got[2].as_u64().unwrap());
    let (_, fields, _) = curl(
        &["-H", "Accept-Encoding: gzip, deflate, br, zstd"],
        &format!("http://{}/page", zstd.addr),
    );
    assert_eq!(
        fields.get("content-encoding").map(String::as_str),
        Some("zstd")
    );
    c.close().await.unwrap();
}

/// Over TLS too, on HTTP/1.1 and HTTP/2 (ALPN).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_on_http1_and_http2() {
    let server = server().await;
    let dir = common::scratch_dir("compress-tls");
    let pki = common::pki::Pki::new(&dir.join("pki"));
    let t = start_with(
        server,
        &format!("{}    compress: {{}}\n", pki.listener_tls()),
    );
    let url = format!("https://localhost:{}/chunked", t.addr.port());
    let ca = pki.path("ca.pem");
    for version in ["--http1.1", "--http2"] {
        let (status, fields, _) = curl(
            &["--cacert", &ca, version, "-H", "Accept-Encoding: gzip"],
            &url,
        );
        assert_eq!(status, 200);
        assert_eq!(
            fields.get("content-encoding").map(String::as_str),
            Some("gzip"),
            "{version}"
        );
        let (_, _, decoded) = curl(&["--cacert", &ca, version, "--compressed"], &url);
        assert!(decoded == page().into_bytes(), "{version}");
    }
}
