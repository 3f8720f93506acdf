//! tether to real Tomcats (Debian's `tomcat10`) over AJP/1.3, the connector mod_jk sites
//! run with a `secret`: Tomcat sees the client as it would behind mod_jk (its address and port, the
//! host and port it addressed, the query, its fields, the body; over TLS its cipher and
//! certificate, on HTTP/1.1 and HTTP/2), sessions stay on the instance named in their id,
//! and a wrong secret is refused by Tomcat.
//!
//! The test skips (prints "skipped: tomcat10 not installed") only when the package is
//! missing; `./run test` installs it.

mod common;

use common::pki::Pki;
use common::real_tomcat::{RealTomcat, AJP_SECRET};
use common::{scratch_dir, Opts, Tether};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The page's `key=value` lines.
fn lines(body: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// tether in front of `tomcats` over AJP, with `secret` in its secret file and `listener`
/// (more YAML of its listener).
fn tether_over_ajp(
    tomcats: &[RealTomcat],
    dir: &std::path::Path,
    secret: &str,
    listener: &str,
) -> Tether {
    tether_over_ajp_with(tomcats, dir, (secret, ""), listener)
}

/// As `tether_over_ajp`, with `ajp_extra` in the cluster's `ajp:` mapping.
fn tether_over_ajp_with(
    tomcats: &[RealTomcat],
    dir: &std::path::Path,
    (secret, ajp_extra): (&str, &str),
    listener: &str,
) -> Tether {
    let file = dir.join(format!("ajp-{}.secret", secret.len()));
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    let mut cluster = format!(
        "    recover_after: 60s\n    read_timeout: 30s\n    ajp: {{ secret_file: {}{ajp_extra} }}\n    servers:\n",
        file.display()
    );
    for tc in tomcats {
        cluster.push_str(&format!(
            "      - {{ name: {r}, address: \"{a}\", route: {r} }}\n",
            r = tc.route(),
            a = tc.ajp_addr()
        ));
    }
    Tether::start_with(Opts {
        cluster,
        // AJP is served by tether's own front ends (the suite's second pass puts listeners
        // that do not say on Pingora's proxy).
        listener_extra: format!("    http1: engine\n{listener}"),
        ..Opts::default()
    })
}

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

/// A Tomcat that takes connections but serves nothing (stopped with SIGSTOP, as in a long
/// GC pause or with every thread busy): with `ping: request`, its CPing goes unanswered
/// for `ping_timeout`, it is marked down, and its session's requests (a POST too: nothing
/// of it was sent) are served by the other instance instead of waiting `read_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_tomcat_is_noticed_by_its_cping_and_its_requests_fail_over() {
    let dir = scratch_dir("ajp-cping");
    let Some(tomcats) = RealTomcat::start_all(&dir, &["tc1", "tc2"]) else {
        println!("skipped: tomcat10 not installed");
        return;
    };
    let ping = ", ping: request, ping_timeout: 1s";
    let t = tether_over_ajp_with(&tomcats, &dir, (AJP_SECRET, ping), "");
    let mut client = t.client();
    let on_tc1 = [("Cookie", "JSESSIONID=0123456789ABCDEF.tc1")];
    // Served by tc1 while it runs, which leaves a kept connection to it in the pool.
    let r = client.get("/index.jsp", &on_tc1).await.unwrap();
    assert_eq!(lines(&r.body)["jvmRoute"], "tc1");

    let pid = tomcats[0].pid() as i32;
    // SAFETY: a signal to the JVM this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // The signal is delivered on its own time: wait until the JVM is stopped (state `T`).
    let stopped = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('T'))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !stopped() {
        assert!(std::time::Instant::now() < deadline, "tc1 did not stop");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let r = client.get("/index.jsp", &on_tc1).await;
    let post = client
        .request(
            "POST",
            "/echo.jsp",
            &[("Cookie", &b"JSESSIONID=0123456789ABCDEF.tc1"[..])],
            b"x=1",
        )
        .await;
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let r = r.expect("an answer while tc1 is stopped");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(lines(&r.body)["jvmRoute"], "tc2", "failed over to tc2");
    let post = post.expect("an answer to the POST");
    assert_eq!(post.status, 200, "{}", String::from_utf8_lossy(&post.body));
    assert_eq!(
        lines(&post.body)["body"],
        "3/230",
        "the POST went whole to tc2"
    );
}

/// tether's peak resident memory (`VmHWM`), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Large bodies both ways over AJP, streamed: a 10 MB upload (with a length, and chunked)
/// arrives whole; a 100 MiB answer reaches the client without tether holding it (its peak
/// memory grows by far less); a servlet's flush reaches the client before the servlet
/// goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_stream_both_ways_and_a_flush_reaches_the_client() {
    let dir = scratch_dir("ajp-large");
    let Some(tomcats) = RealTomcat::start_all(&dir, &["tc1"]) else {
        println!("skipped: tomcat10 not installed");
        return;
    };
    let t = tether_over_ajp(&tomcats, &dir, AJP_SECRET, "");
    let url = |path: &str| format!("http://{}{path}", t.addr);

    let upload: Vec<u8> = (0..10_000_000u32).map(|i| (i % 253) as u8).collect();
    let sum: u64 = upload.iter().map(|&b| u64::from(b)).sum();
    let file = dir.join("upload.bin");
    std::fs::write(&file, &upload).unwrap();
    for chunked in [false, true] {
        let mut curl = Command::new("curl");
        curl.args(["-s", "--max-time", "60"]);
        if chunked {
            curl.args(["-H", "Transfer-Encoding: chunked"]);
        }
        let out = curl
            .args(["--data-binary", &format!("@{}", file.display())])
            .arg(url("/echo.jsp"))
            .output()
            .expect("curl");
        assert_eq!(
            lines(&out.stdout)["body"],
            format!("{}/{sum}", upload.len()),
            "chunked: {chunked}"
        );
    }

    let before = peak_kib(t.pid());
    let out = Command::new("curl")
        .args(["-s", "--max-time", "120", "-o", "/dev/null"])
        .args(["-w", "%{http_code} %{size_download}"])
        .arg(url("/big.jsp?mib=100"))
        .output()
        .expect("curl");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("200 {}", 100u64 << 20)
    );
    let grew = peak_kib(t.pid()).saturating_sub(before);
    assert!(
        grew < 32 * 1024,
        "tether's peak memory grew by {grew} KiB for 100 MiB"
    );

    let gate = dir.join("gate");
    let mut raw = std::net::TcpStream::connect(t.addr).unwrap();
    raw.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "GET /flush.jsp?gate={} HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n\r\n",
        gate.display()
    );
    raw.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("first;") {
        let n = raw
            .read(&mut buf)
            .expect("the flushed part, while the servlet waits");
        assert!(
            n > 0,
            "the connection ended: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    std::fs::write(&gate, b"go").unwrap();
    raw.read_to_end(&mut got).unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("second"), "{text}");
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

/// A Tomcat restarted while requests flow (a crash, then the operator starts it again on
/// its ports): the requests it was serving go to the other instance, none fails, and once
/// it is back it serves its share again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tomcat_restarted_under_load_loses_no_request_and_comes_back() {
    let dir = scratch_dir("ajp-restart");
    let Some(mut tomcats) = RealTomcat::start_all(&dir, &["tc1", "tc2"]) else {
        println!("skipped: tomcat10 not installed");
        return;
    };
    let file = dir.join("ajp.secret");
    std::fs::write(&file, AJP_SECRET).unwrap();
    let mut cluster = format!(
        "    recover_after: 1s\n    health_check: {{ kind: cping, interval: 300ms, timeout: 250ms, rise: 1, fall: 1 }}\n    ajp: {{ secret_file: {} }}\n    servers:\n",
        file.display()
    );
    for tc in &tomcats {
        cluster.push_str(&format!(
            "      - {{ name: {r}, address: \"{a}\", route: {r} }}\n",
            r = tc.route(),
            a = tc.ajp_addr()
        ));
    }
    let t = Tether::start_with(Opts {
        cluster,
        listener_extra: "    http1: engine\n".into(),
        ..Opts::default()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..4 {
        let (addr, stop) = (t.addr, stop.clone());
        load.push(tokio::spawn(async move {
            let mut answers: Vec<(u16, String)> = Vec::new();
            let mut client = tether::sim::HttpClient::new(addr);
            while !stop.load(Ordering::Relaxed) {
                match client.get("/echo.jsp", &[]).await {
                    Ok(r) => {
                        let body = String::from_utf8_lossy(&r.body).into_owned();
                        answers.push((r.status, body));
                    }
                    Err(e) => answers.push((0, e.to_string())),
                }
            }
            answers
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    tokio::task::block_in_place(|| tomcats[0].restart());
    // Back in the pool: new sessions land on it again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let page = lines(&t.client().get("/index.jsp", &[]).await.unwrap().body);
        if page["jvmRoute"] == "tc1" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tc1 never served again"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for task in load {
        for (status, what) in task.await.unwrap() {
            total += 1;
            assert_eq!(
                status,
                200,
                "a request failed while tc1 restarted: {what}; log:\n{}",
                t.log()
            );
        }
    }
    assert!(total > 20, "{total} requests");
}
