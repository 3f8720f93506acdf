//! tether to real Tomcats (Debian's `tomcat10`) over AJP/1.3, the connector mod_jk sites
//! run with a `secret`: Tomcat sees the client as it would behind mod_jk (its address and port, the
//! host and port it addressed, the query, its fields, the body; over TLS its cipher and
//! certificate, on HTTP/1.1 and HTTP/2), sessions stay on the instance named in their id,
//! and a wrong secret is refused by Tomcat; and the application sees the same request over
//! AJP as over HTTP behind `RemoteIpValve` and `SSLValve`. In operation (stops, restarts,
//! large bodies): `ajp_operations.rs`.
//!
//! The test skips (prints "skipped: tomcat10 not installed") only when the package is
//! missing; `./run test` installs it.

mod common;

use common::pki::Pki;
use common::real_tomcat::{lines, tether_over_ajp, RealTomcat, AJP_SECRET};
use common::{scratch_dir, Opts, Tether};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_tomcats_over_ajp_see_the_client_and_keep_their_sessions() {
    let dir = scratch_dir("ajp");
    let Some(mut tomcats) = RealTomcat::start_all(&dir, &["tc1", "tc2"]) else {
        println!("skipped: tomcat10 not installed");
        return;
    };
    let t = tether_over_ajp(&tomcats, &dir, AJP_SECRET, "");
    let mut client = t.client();

    // What the servlet API sees, over AJP: the client's address, the host and port it
    // addressed, the query, its own fields; no attribute a client could have set.
    let r = client
        .get(
            "/echo.jsp?a=1&b=two",
            &[
                ("Host", "shop.example:8443"),
                ("X-Test", "yes"),
                ("ghost", "x"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let page = lines(&r.body);
    assert_eq!(page["method"], "GET");
    assert_eq!(page["uri"], "/echo.jsp");
    assert_eq!(page["query"], "a=1&b=two");
    assert_eq!(page["server"], "shop.example:8443", "{page:?}");
    assert_eq!(page["remote"], "127.0.0.1");
    assert_eq!(
        (page["scheme"].as_str(), page["secure"].as_str()),
        ("http", "false")
    );
    assert_eq!(page["header"], "yes");
    assert_eq!(
        page["ghost"], "null",
        "a client's field is never an AJP attribute"
    );

    // The client's port too (`AJP_REMOTE_PORT`), as the connection it came on has it.
    let mut raw = std::net::TcpStream::connect(t.addr).unwrap();
    let port = raw.local_addr().unwrap().port();
    raw.write_all(b"GET /echo.jsp HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    raw.read_to_end(&mut answer).unwrap();
    assert_eq!(lines(&answer)["remote_port"], port.to_string());

    // A POST's body arrives whole, in packets past the first when it is larger (Tomcat
    // asks for them with GET_BODY_CHUNK).
    let body: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let sum: u64 = body.iter().map(|&b| u64::from(b)).sum();
    let r = client
        .request(
            "POST",
            "/echo.jsp",
            &[("Content-Type", &b"application/octet-stream"[..])],
            &body,
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(lines(&r.body)["body"], format!("{}/{sum}", body.len()));

    // A body larger than request_buffer streams from the client as Tomcat asks for it,
    // and a chunked one arrives de-chunked.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    let sum: u64 = big.iter().map(|&b| u64::from(b)).sum();
    let r = client
        .request("POST", "/echo.jsp", &[], &big)
        .await
        .unwrap();
    assert_eq!(lines(&r.body)["body"], format!("{}/{sum}", big.len()));
    let file = dir.join("big.bin");
    std::fs::write(&file, &big).unwrap();
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "-H", "Transfer-Encoding: chunked"])
        .args(["--data-binary", &format!("@{}", file.display())])
        .arg(format!("http://{}/echo.jsp", t.addr))
        .output()
        .expect("curl");
    assert_eq!(
        lines(&out.stdout)["body"],
        format!("{}/{sum}", big.len()),
        "chunked"
    );

    // Sessions: each new one on an instance, then every request of it on that instance
    // (the route after the id's `.`, Tomcat's own jvmRoute).
    let mut seen = HashMap::new();
    for _ in 0..6 {
        let mut browser = t.client();
        let first = browser.get("/", &[]).await.unwrap();
        assert_eq!(first.status, 200);
        let page = lines(&first.body);
        let route = page["jvmRoute"].clone();
        let session = page["session"].clone();
        assert!(session.ends_with(&format!(".{route}")), "{session}");
        let cookie = format!("JSESSIONID={session}");
        for n in 2..=4 {
            let again = browser.get("/", &[("Cookie", &cookie)]).await.unwrap();
            let page = lines(&again.body);
            assert_eq!(page["jvmRoute"], route, "the session stays on its instance");
            assert_eq!(page["count"], n.to_string());
        }
        *seen.entry(route).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 2, "new sessions on both instances: {seen:?}");

    // A tether with another secret: Tomcat refuses every request.
    let wrong = tether_over_ajp(&tomcats, &dir, "not-the-secret", "");
    let r = wrong.client().get("/echo.jsp", &[]).await.unwrap();
    assert_eq!(r.status, 403);

    // `compress:` over AJP: Tomcat's streamed answer compressed, the same bytes after decoding.
    // HTTP/2 by tether's own front end: Pingora's proxy speaks no AJP.
    let squeezing =
        "    h2c: true\n    http2: engine\n    compress: { types: [application/octet-stream] }\n";
    let squeezing = tether_over_ajp(&tomcats, &dir, AJP_SECRET, squeezing);
    let expected: Vec<u8> = (0..1 << 20)
        .map(|i| b'a' + (i % 65536 % 26) as u8)
        .collect();
    for version in ["--http1.1", "--http2-prior-knowledge"] {
        let url = format!("http://{}/big.jsp?mib=1", squeezing.addr);
        let head = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-D",
                "-",
                "-H",
                "Accept-Encoding: br",
                version,
            ])
            .arg(&url)
            .output()
            .expect("curl");
        let head = String::from_utf8_lossy(&head.stdout).to_ascii_lowercase();
        assert!(head.contains("content-encoding: br"), "{version}: {head}");
        let out = Command::new("curl")
            .args(["-s", "--compressed", version])
            .arg(&url)
            .output()
            .expect("curl");
        assert!(
            out.stdout == expected,
            "{version}: {} bytes",
            out.stdout.len()
        );
    }
    drop(squeezing);

    // Over TLS, HTTP/1.1 and HTTP/2: Tomcat sees a secure request, its cipher and key size,
    // and the client's certificate, as through mod_jk.
    let pki = Pki::new(&dir.join("pki"));
    let tls = format!(
        "    http2: engine\n{}      client_auth: {{ ca: {}, mode: optional }}\n",
        pki.listener_tls(),
        pki.path("ca.pem")
    );
    let secure = tether_over_ajp(&tomcats, &dir, AJP_SECRET, &tls);
    let body = dir.join("body.bin");
    std::fs::write(&body, vec![7u8; 30_000]).unwrap();
    for (version, protocol) in [("--http1.1", "HTTP/1.1"), ("--http2", "HTTP/2.0")] {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "10", "--cacert", &pki.path("ca.pem")])
            .args([
                "--cert",
                &pki.path("client.crt"),
                "--key",
                &pki.path("client.key"),
            ])
            .args([
                "--resolve",
                &format!("a.test:{}:127.0.0.1", secure.addr.port()),
            ])
            .args([version, "--data-binary", &format!("@{}", body.display())])
            .arg(format!(
                "https://a.test:{}/echo.jsp?tls=1",
                secure.addr.port()
            ))
            .output()
            .expect("curl");
        let page = lines(&out.stdout);
        assert_eq!(
            page.get("protocol").map(String::as_str),
            Some(protocol),
            "{page:?}"
        );
        assert_eq!(
            (page["scheme"].as_str(), page["secure"].as_str()),
            ("https", "true")
        );
        assert_eq!(page["server"], format!("a.test:{}", secure.addr.port()));
        assert!(page["cipher"].starts_with("TLS_"), "{page:?}");
        assert_ne!(page["keysize"], "null", "{page:?}");
        assert!(page["cert"].contains("CN=client one"), "{page:?}");
        assert_eq!(page["body"], format!("30000/{}", 30_000 * 7));
    }
    // Over HTTP/2 too, a body larger than request_buffer streams as Tomcat asks for it.
    let out = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "10",
            "--cacert",
            &pki.path("ca.pem"),
            "--http2",
        ])
        .args([
            "--resolve",
            &format!("a.test:{}:127.0.0.1", secure.addr.port()),
        ])
        .args([
            "--data-binary",
            &format!("@{}", dir.join("big.bin").display()),
        ])
        .arg(format!("https://a.test:{}/echo.jsp", secure.addr.port()))
        .output()
        .expect("curl");
    assert_eq!(
        lines(&out.stdout)["body"],
        format!("{}/{sum}", big.len()),
        "HTTP/2"
    );

    // A client certificate issued by an intermediate CA: Tomcat gets the chain the
    // client sent (leaf, then intermediate), as mod_jk's `+ForwardSSLCertChain` sends it.
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "--cacert", &pki.path("ca.pem")])
        .args(["--cert", &pki.path("client-chained.crt")])
        .args(["--key", &pki.path("client-chained.key")])
        .args([
            "--resolve",
            &format!("a.test:{}:127.0.0.1", secure.addr.port()),
        ])
        .arg(format!("https://a.test:{}/echo.jsp", secure.addr.port()))
        .output()
        .expect("curl");
    let page = lines(&out.stdout);
    assert!(page["cert"].contains("CN=client two"), "{page:?}");
    assert_eq!(page["chain"], "2", "the leaf and its intermediate");

    // A killed instance: its sessions fail over to the other one, which starts them anew,
    // and no client sees an error (mod_jk's failover, over AJP).
    let mut on_tc1 = Vec::new();
    while on_tc1.len() < 3 {
        let page = lines(&t.client().get("/", &[]).await.unwrap().body);
        if page["jvmRoute"] == "tc1" {
            on_tc1.push(page["session"].clone());
        }
    }
    tomcats[0].kill();
    for session in on_tc1 {
        let cookie = format!("JSESSIONID={session}");
        let r = t.client().get("/", &[("Cookie", &cookie)]).await.unwrap();
        assert_eq!(r.status, 200, "failed over without an error");
        let page = lines(&r.body);
        assert_eq!(page["jvmRoute"], "tc2");
        assert_eq!(page["new"], "true", "a new session on the survivor");
    }
    drop(tomcats);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `curl` gets of `/echo.jsp` through `t` (a POST of `hello` with `X-Test`), from
/// the loopback address 127.0.0.7 (a client of its own); `tls`: over TLS to `a.test`, with
/// `version` (`--http1.1`, `--http2`), and with the client certificate when `cert`.
fn echo_page(t: &Tether, tls: Option<(&Pki, &str, bool)>) -> HashMap<String, String> {
    let mut curl = Command::new("curl");
    curl.args(["-s", "--max-time", "10", "--interface", "127.0.0.7"])
        .args(["-H", "X-Test: yes", "--data-binary", "hello"]);
    let url = match tls {
        None => format!("http://127.0.0.1:{}/echo.jsp?q=1", t.addr.port()),
        Some((pki, version, cert)) => {
            curl.args(["--cacert", &pki.path("ca.pem"), version])
                .args(["--resolve", &format!("a.test:{}:127.0.0.1", t.addr.port())]);
            if cert {
                curl.args(["--cert", &pki.path("client.crt")])
                    .args(["--key", &pki.path("client.key")]);
            }
            format!("https://a.test:{}/echo.jsp?q=1", t.addr.port())
        }
    };
    let out = curl.arg(url).output().expect("curl");
    lines(&out.stdout)
}

/// The same application over AJP and over HTTP behind `RemoteIpValve` and `SSLValve` (the
/// way to connect a Tomcat without AJP): for a plain client, and TLS clients on HTTP/1.1
/// and HTTP/2 with and without a certificate, the servlet API tells the same of the
/// request, but for what only AJP carries (the client's port and protocol, and the chain
/// of its certificate: over HTTP, Tomcat sees the port of tether's connection, HTTP/1.1,
/// and the certificate alone) and the server port of a TLS request, which
/// `RemoteIpValve` sets to 443.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ajp_the_application_sees_what_it_sees_over_http_with_the_valves() {
    let dir = scratch_dir("ajp-side-by-side");
    let Some(tomcats) = RealTomcat::start_all(&dir, &["tc1"]) else {
        println!("skipped: tomcat10 not installed");
        return;
    };
    let pki = Pki::new(&dir.join("pki"));
    let tls = format!(
        "    http2: engine\n{}      client_auth: {{ ca: {}, mode: optional }}\n",
        pki.listener_tls(),
        pki.path("ca.pem")
    );
    let over_http = |listener: &str| {
        Tether::start_with(Opts {
            cluster: format!(
                "    ssl_headers: {{}}\n    servers:\n      - {{ name: tc1, address: \"{}\", route: tc1 }}\n",
                tomcats[0].addr()
            ),
            listener_extra: format!("    http1: engine\n{listener}"),
            ..Opts::default()
        })
    };
    let ajp = (
        tether_over_ajp(&tomcats, &dir, AJP_SECRET, ""),
        tether_over_ajp(&tomcats, &dir, AJP_SECRET, &tls),
    );
    let http = (over_http(""), over_http(&tls));
    let cases = [
        ("plain", None),
        ("TLS, HTTP/1.1", Some("--http1.1")),
        ("TLS, HTTP/2", Some("--http2")),
    ];
    for (case, version) in cases {
        for cert in [false, true] {
            if version.is_none() && cert {
                continue;
            }
            let pages = match version {
                None => (echo_page(&ajp.0, None), echo_page(&http.0, None)),
                Some(v) => (
                    echo_page(&ajp.1, Some((&pki, v, cert))),
                    echo_page(&http.1, Some((&pki, v, cert))),
                ),
            };
            let (mut over_ajp, mut over_http) = pages;
            assert_eq!(over_ajp["remote"], "127.0.0.7", "{case}: {over_ajp:?}");
            assert_eq!(over_ajp["body"], "5/532", "{case}: {over_ajp:?}");
            for page in [&mut over_ajp, &mut over_http] {
                page.remove("remote_port");
                page.remove("protocol");
                // AJP carries the chain the client sent; SSLValve takes one certificate.
                page.remove("chain");
                let server = page["server"].split(':').next().unwrap().to_string();
                page.insert("server".into(), server);
            }
            assert_eq!(over_ajp, over_http, "{case}, certificate: {cert}");
        }
    }
}
