//! TLS and HTTP/2 with real clients (curl, openssl s_client, an HTTP/2 client library) and
//! certificates generated for the test run.

mod common;

use common::pki::Pki;
use common::{free_port, scratch_dir, server_line, tomcats, Opts, Tether};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;
use tether::cli::sim::TomcatSim;

/// `tls:` of a listener (indented 4), with `more` fields (indented 6).
fn tls_yaml(pki: &Pki, more: &str) -> String {
    format!(
        "    tls:\n      cert: {}\n      key: {}\n      sni:\n        - {{ names: [b.test], cert: {}, key: {} }}\n{more}",
        pki.path("a.crt"),
        pki.path("a.key"),
        pki.path("b.crt"),
        pki.path("b.key"),
    )
}

fn start(sims: &[TomcatSim], cluster_extra: &str, listener_extra: String, admin: bool) -> Tether {
    let mut cluster = format!("{cluster_extra}    servers:\n");
    for s in sims {
        cluster.push_str(&server_line(s, ""));
    }
    Tether::start_with(Opts {
        cluster,
        listener_extra,
        admin,
        metrics: true,
        ..Opts::default()
    })
}

/// Runs curl against `https://a.test:PORT{path}` (resolved to tether); returns
/// (exit code, stdout).
fn curl(t: &Tether, pki: &Pki, host: &str, path: &str, args: &[&str]) -> (i32, String) {
    let port = t.addr.port();
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "--cacert", &pki.path("ca.pem")])
        .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
        .args(args)
        .arg(format!("https://{host}:{port}{path}"))
        .output()
        .expect("curl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The subject of the certificate tether serves for `servername` (None: no SNI).
fn served_subject(addr: SocketAddr, servername: Option<&str>) -> String {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-connect", &addr.to_string()]);
    match servername {
        Some(n) => cmd.args(["-servername", n]),
        None => cmd.arg("-noservername"),
    };
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("openssl s_client");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with("subject="))
        .unwrap_or("")
        .to_string()
}

fn seen(sim: &TomcatSim, name: &str) -> Option<String> {
    sim.last_request_headers()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_sni_alpn_and_what_the_server_is_told() {
    let dir = scratch_dir("tls-basic");
    let pki = Pki::new(&dir);
    let sims = tomcats(1).await;
    let t = start(&sims, "", tls_yaml(&pki, ""), true);
    // The certificates and their expiry, as the admin API (and the console) shows them.
    let (_, status) = t.admin("GET", "/status", None, b"").await;
    let certs = status["certificates"].as_array().unwrap();
    let names: Vec<&str> = certs.iter().map(|c| c["names"].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "b.test"], "{status}");
    assert!(certs
        .iter()
        .all(|c| c["listener"] == "web" && c["days_left"].as_i64().unwrap() > 365));
    assert_eq!(status["listeners"][0]["tls"], true);
    // HTTP/1.1 and HTTP/2, chosen by ALPN.
    let (code, out) = curl(
        &t,
        &pki,
        "a.test",
        "/",
        &["--http1.1", "-w", "\n%{http_version}"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("\n1.1"), "{out}");
    assert_eq!(
        seen(&sims[0], "x-forwarded-proto").as_deref(),
        Some("https")
    );
    let (code, out) = curl(
        &t,
        &pki,
        "a.test",
        "/",
        &["--http2", "-w", "\n%{http_version}"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("\n2"), "{out}");
    // The certificate by SNI, the default one when SNI is missing or unknown.
    assert!(served_subject(t.addr, Some("b.test")).contains("b.test"));
    assert!(served_subject(t.addr, Some("a.test")).contains("a.test"));
    assert!(served_subject(t.addr, Some("nope.test")).contains("a.test"));
    assert!(served_subject(t.addr, None).contains("a.test"));
    // Plain HTTP to the TLS port: no answer, counted.
    let _ = tether::cli::sim::send_raw(t.addr, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").await;
    // The client may see the alert before tether counted the failure: scrape until it did.
    let mut scrape = String::new();
    for _ in 0..50 {
        scrape = common::scrape(t.metrics.unwrap()).await;
        if scrape.contains(r#"result="plain_http""#) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for series in [
        r#"tether_tls_handshakes_total{listener="web",result="ok"}"#,
        r#"tether_tls_handshakes_total{listener="web",result="plain_http"}"#,
        r#"tether_http_requests_total{listener="web",version="2"}"#,
        r#"tether_tls_certificate_expiry_timestamp_seconds{certificate="b.test",listener="web"}"#,
    ] {
        assert!(scrape.contains(series), "{series} in\n{scrape}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimum_version_is_enforced() {
    let dir = scratch_dir("tls-version");
    let pki = Pki::new(&dir);
    let sims = tomcats(1).await;
    let t = start(
        &sims,
        "",
        tls_yaml(&pki, "      min_version: \"1.3\"\n"),
        false,
    );
    let (code, _) = curl(&t, &pki, "a.test", "/", &["--tls-max", "1.2"]);
    assert_ne!(code, 0, "TLS 1.2 refused");
    let (code, _) = curl(&t, &pki, "a.test", "/", &["--tlsv1.3"]);
    assert_eq!(code, 0, "TLS 1.3 accepted");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_reach_websphere_and_tomcat_as_their_headers() {
    let dir = scratch_dir("tls-mtls");
    let pki = Pki::new(&dir);
    let sims = tomcats(1).await;
    let required = format!(
        "      client_auth: {{ ca: {}, mode: required }}\n",
        pki.path("ca.pem")
    );
    // A WebSphere cluster with the plug-in's private headers.
    let mut cluster = String::from(
        "    session_style: websphere\n    websphere: { private_headers: true }\n    servers:\n",
    );
    cluster.push_str(&server_line(&sims[0], "clone_id: c1"));
    let t = Tether::start_with(Opts {
        cluster,
        listener_extra: tls_yaml(&pki, &required),
        ..Opts::default()
    });
    let (code, _) = curl(&t, &pki, "a.test", "/", &[]);
    assert_ne!(code, 0, "no client certificate: refused");
    let with_cert = [
        "--cert",
        &pki.path("client.crt"),
        "--key",
        &pki.path("client.key"),
    ];
    let (code, out) = curl(&t, &pki, "a.test", "/", &with_cert);
    assert_eq!(code, 0, "{out}");
    let pem = std::fs::read(pki.path("client.crt")).unwrap();
    let der = boring::x509::X509::from_pem(&pem)
        .unwrap()
        .to_der()
        .unwrap();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    assert_eq!(seen(&sims[0], "$wscc").as_deref(), Some(b64.as_str()));
    assert_eq!(seen(&sims[0], "$wsis").as_deref(), Some("true"));
    assert_eq!(seen(&sims[0], "$wssc").as_deref(), Some("https"));
    // curl offers h2 first, and tether prefers it.
    assert_eq!(seen(&sims[0], "$wspr").as_deref(), Some("HTTP/2.0"));
    assert!(seen(&sims[0], "$wscs").is_some_and(|c| !c.is_empty()));
    let mut h1 = with_cert.to_vec();
    h1.push("--http1.1");
    assert_eq!(curl(&t, &pki, "a.test", "/", &h1).0, 0);
    assert_eq!(seen(&sims[0], "$wspr").as_deref(), Some("HTTP/1.1"));

    // A Tomcat cluster with SSLValve headers; client certificates optional.
    let optional = format!(
        "      client_auth: {{ ca: {}, mode: optional }}\n",
        pki.path("ca.pem")
    );
    let t = start(
        &sims,
        "    ssl_headers: {}\n",
        tls_yaml(&pki, &optional),
        false,
    );
    let (code, _) = curl(&t, &pki, "a.test", "/", &["-H", "ssl_client_cert: forged"]);
    assert_eq!(code, 0, "optional: served without a certificate");
    assert_eq!(
        seen(&sims[0], "ssl_client_cert"),
        None,
        "a client cannot send it"
    );
    assert!(seen(&sims[0], "ssl_cipher").is_some());
    let (code, _) = curl(&t, &pki, "a.test", "/", &with_cert);
    assert_eq!(code, 0);
    let cert = seen(&sims[0], "ssl_client_cert").unwrap_or_default();
    assert!(
        cert.starts_with("-----BEGIN CERTIFICATE----- ") && cert.contains(&b64[..60]),
        "{cert}"
    );
    assert!(seen(&sims[0], "ssl_cipher_usekeysize").is_some_and(|b| b.parse::<u32>().is_ok()));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_listener_sends_everyone_to_https() {
    let sims = tomcats(1).await;
    let t = start(
        &sims,
        "",
        "    redirect_https: { port: 8443 }\n".into(),
        false,
    );
    let r = t
        .client()
        .get("/a/b?c=1", &[("Host", "shop.example:8080")])
        .await
        .unwrap();
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location"),
        Some("https://shop.example:8443/a/b?c=1")
    );
    assert_eq!(sims[0].requests(), 0);
}

/// `openssl s_server` serving HTTPS with the a.test certificate; killed on drop.
struct TlsServer {
    child: std::process::Child,
    addr: SocketAddr,
}

impl TlsServer {
    fn start(pki: &Pki) -> TlsServer {
        TlsServer::start_with(pki, &[])
    }

    /// With `extra` arguments to `openssl s_server` (e.g. to require a client certificate).
    fn start_with(pki: &Pki, extra: &[&str]) -> TlsServer {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let child = Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-accept", &addr.to_string()])
            .args(["-cert", &pki.path("a.crt"), "-key", &pki.path("a.key")])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_server");
        for _ in 0..100 {
            if std::net::TcpStream::connect(addr).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        TlsServer { child, addr }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_servers_are_verified() {
    let dir = scratch_dir("tls-upstream");
    let pki = Pki::new(&dir);
    let server = TlsServer::start(&pki);
    let cluster = |tls: String| {
        format!(
            "    max_attempts: 1\n    tls: {tls}\n    servers:\n      - {{ name: s1, address: \"{}\" }}\n",
            server.addr
        )
    };
    let start = |c: String| {
        Tether::start_with(Opts {
            cluster: c,
            ..Opts::default()
        })
    };
    // The right CA and name: served.
    let t = start(cluster(format!(
        "{{ ca: {}, sni: a.test }}",
        pki.path("ca.pem")
    )));
    let r = t.client().get("/", &[]).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body_str());
    drop(t);
    // Another CA, or a name the certificate does not carry: refused (502).
    for tls in [
        format!("{{ ca: {}, sni: a.test }}", pki.path("other-ca.pem")),
        format!("{{ ca: {}, sni: wrong.test }}", pki.path("ca.pem")),
    ] {
        let t = start(cluster(tls.clone()));
        let r = t.client().get("/", &[]).await.unwrap();
        assert_eq!(r.status, 502, "{tls}");
    }
    // Verification off must be said, and is logged.
    let t = Tether::start_with(Opts {
        cluster: cluster("{ verify: false }".into()),
        log: Some("warn"),
        ..Opts::default()
    });
    let r = t.client().get("/", &[]).await.unwrap();
    assert_eq!(r.status, 200);
    assert!(t.log().contains("without verifying"), "{}", t.log());

    // A server that requires a client certificate: tether presents its own.
    let strict = TlsServer::start_with(&pki, &["-Verify", "1", "-CAfile", &pki.path("ca.pem")]);
    let cluster = |tls: String| {
        format!(
            "    max_attempts: 1\n    tls: {tls}\n    servers:\n      - {{ name: s1, address: \"{}\" }}\n",
            strict.addr
        )
    };
    let base = format!("ca: {}, sni: a.test", pki.path("ca.pem"));
    let t = start(cluster(format!(
        "{{ {base}, client_cert: {}, client_key: {} }}",
        pki.path("client.crt"),
        pki.path("client.key")
    )));
    assert_eq!(t.client().get("/", &[]).await.unwrap().status, 200);
    drop(t);
    let t = start(cluster(format!("{{ {base} }}")));
    assert_eq!(
        t.client().get("/", &[]).await.unwrap().status,
        502,
        "no client certificate: the server refuses"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_reload_under_load_and_bad_ones_are_refused() {
    let dir = scratch_dir("tls-reload");
    let pki = Pki::new(&dir);
    let sims = tomcats(2).await;
    let t = start(&sims, "", tls_yaml(&pki, ""), true);
    let conf = std::fs::read_to_string(t.config_path()).unwrap();
    // Continuous load: curl processes, each with 20 keep-alive requests, one after another.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let port = t.addr.port();
    let ca = pki.path("ca.pem");
    let load = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut ok, mut failed) = (0, 0);
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let url = format!("https://a.test:{port}/");
                let mut cmd = Command::new("curl");
                cmd.args(["-s", "-w", "%{http_code}\n", "--cacert", &ca])
                    .args(["--resolve", &format!("a.test:{port}:127.0.0.1")]);
                for _ in 0..20 {
                    cmd.args(["-o", "/dev/null", &url]);
                }
                let out = cmd.output().unwrap();
                for line in String::from_utf8_lossy(&out.stdout).lines() {
                    if line == "200" {
                        ok += 1
                    } else {
                        failed += 1
                    }
                }
            }
            (ok, failed)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A good new certificate: served from the next connection on.
    std::fs::write(
        t.config_path(),
        conf.replace(&pki.path("a.crt"), &pki.path("a2.crt"))
            .replace(&pki.path("a.key"), &pki.path("a2.key")),
    )
    .unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    assert!(served_subject(t.addr, Some("a.test")).contains("a.test second"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Bad ones: refused with the file named, the running certificate keeps serving.
    for (cert, key, says) in [
        ("expired.crt", "expired.key", "expired"),
        ("a2.crt", "other.key", "does not fit"),
        ("missing.crt", "a2.key", "cannot read"),
    ] {
        std::fs::write(
            t.config_path(),
            conf.replace(&pki.path("a.crt"), &pki.path(cert))
                .replace(&pki.path("a.key"), &pki.path(key)),
        )
        .unwrap();
        let (status, json) = t.admin("POST", "/reload", None, b"").await;
        assert_eq!(status, 400, "{cert}: {json}");
        assert!(json.to_string().contains(says), "{cert}: {json}");
        assert!(served_subject(t.addr, Some("a.test")).contains("a.test second"));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (ok, failed) = load.join().unwrap();
    eprintln!("{ok} requests over TLS during 4 reloads, {failed} failed");
    assert!(ok > 20);
    assert_eq!(failed, 0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn tether_t_names_the_bad_certificate_and_its_field() {
    let dir = scratch_dir("tls-check");
    let pki = Pki::new(&dir);
    let yaml = |cert: &str, key: &str| {
        format!(
            "listeners:\n  - name: web\n    address: 127.0.0.1:8443\n    cluster: shop\n    tls: {{ cert: {}, key: {} }}\nclusters:\n  - name: shop\n    servers:\n      - {{ name: n1, address: 127.0.0.1:8081 }}\n",
            pki.path(cert),
            pki.path(key)
        )
    };
    for (cert, key, path, says) in [
        (
            "expired.crt",
            "expired.key",
            "listeners[0].tls.cert",
            "expired",
        ),
        ("a.crt", "other.key", "listeners[0].tls.key", "does not fit"),
        ("nope.crt", "a.key", "listeners[0].tls.cert", "cannot read"),
        ("a.crt", "nope.key", "listeners[0].tls.key", "cannot read"),
        (
            "a.key",
            "a.key",
            "listeners[0].tls.cert",
            "no PEM certificate",
        ),
    ] {
        let e = tether::config::parse(&yaml(cert, key), "t.yaml").expect_err(cert);
        assert!(e.has(path, says), "{cert}/{key}: {e}");
    }
    assert!(tether::config::parse(&yaml("a.crt", "a.key"), "t.yaml").is_ok());
    // TLS to servers addressed by IP needs the name their certificate carries.
    let upstream = "listeners:\n  - { name: web, address: 127.0.0.1:8080, cluster: shop }\nclusters:\n  - name: shop\n    tls: {}\n    servers:\n      - { name: n1, address: 127.0.0.1:8081 }\n";
    let e = tether::config::parse(upstream, "t.yaml").expect_err("no sni");
    assert!(e.has("clusters[0].tls.sni", "addressed by IP"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}
