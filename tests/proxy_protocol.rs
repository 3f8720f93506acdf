//! The PROXY protocol from real senders: HAProxy in TCP mode with
//! `send-proxy` (v1) and `send-proxy-v2`, and nginx's `stream` module with
//! `proxy_protocol on`, in front of tether. The server behind tether and
//! the access log see the real client (a distinct loopback address); a connection without
//! the header, or from a peer not in `from`, is closed and counted.

mod common;

use common::{free_port, scrape, server_line, tomcats, Opts, Tether};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A sender (HAProxy or nginx), stopped by its pid when the test ends.
struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// HAProxy with two TCP frontends to `tether`: one sending PROXY v1, one v2.
fn haproxy(dir: &std::path::Path, tether: SocketAddr) -> (Haproxy, SocketAddr, SocketAddr) {
    let v1 = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let v2 = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let cfg = format!(
        "global\n  maxconn 200\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n\
         frontend v1\n  bind {v1}\n  default_backend to_v1\n\
         backend to_v1\n  server t {tether} send-proxy\n\
         frontend v2\n  bind {v2}\n  default_backend to_v2\n\
         backend to_v2\n  server t {tether} send-proxy-v2\n"
    );
    (run_haproxy(dir, &cfg, &[v1, v2]), v1, v2)
}

/// HAProxy with `cfg` (written in `dir`), once it listens on every one of `fronts`.
fn run_haproxy(dir: &std::path::Path, cfg: &str, fronts: &[SocketAddr]) -> Haproxy {
    let file = dir.join("haproxy.cfg");
    std::fs::write(&file, cfg).unwrap();
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy (apt-get install haproxy; ./run test installs it)");
    let h = Haproxy(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while fronts
        .iter()
        .any(|a| std::net::TcpStream::connect(a).is_err())
    {
        assert!(Instant::now() < deadline, "haproxy did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    h
}

/// nginx's `stream` module in front of `tether` with `proxy_protocol on` (v1).
fn nginx(dir: &std::path::Path, tether: SocketAddr) -> (Haproxy, SocketAddr) {
    let front = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let d = dir.display();
    let cfg = format!(
        "load_module /usr/lib/nginx/modules/ngx_stream_module.so;
         daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/nginx.err;
         events {{}}
         stream {{ server {{ listen {front}; proxy_pass {tether}; proxy_protocol on; }} }}
"
    );
    let file = dir.join("nginx.conf");
    std::fs::write(&file, cfg).unwrap();
    let nginx = if std::path::Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    };
    let child = Command::new(nginx)
        .arg("-e")
        .arg(dir.join("nginx.err"))
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx (./run test installs nginx and libnginx-mod-stream)");
    let n = Haproxy(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(front).is_err() {
        assert!(
            Instant::now() < deadline,
            "nginx did not start: {}",
            std::fs::read_to_string(dir.join("nginx.err")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (n, front)
}

/// `raw` from `from` to `to`; what came back before the close.
async fn send_from(from: &str, to: SocketAddr, raw: &[u8]) -> String {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(from.parse().unwrap(), 0))
        .unwrap();
    let mut s = sock.connect(to).await.unwrap();
    s.write_all(raw).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_and_nginx_name_the_real_client_over_proxy_v1_and_v2() {
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        listener_extra: "    proxy_protocol: { from: [\"127.0.0.1\"] }\n".into(),
        access_log: true,
        metrics: true,
        ..Opts::default()
    });
    let (_haproxy, v1, v2) = haproxy(&t.dir, t.addr);
    let (_nginx, by_nginx) = nginx(&t.dir, t.addr);
    let xff = |sim: &tether::cli::sim::TomcatSim| {
        sim.last_request_headers()
            .into_iter()
            .find(|(n, _)| n == "x-forwarded-for")
            .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
    };
    for (version, front, client) in [
        ("v1", v1, "127.0.0.3"),
        ("v2", v2, "127.0.0.4"),
        ("nginx", by_nginx, "127.0.0.6"),
    ] {
        let path = format!("/{version}");
        let answer = send_from(client, front, &get(&path)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{version}: {answer}");
        assert_eq!(
            xff(&sims[0]).as_deref(),
            Some(client),
            "{version}: the server is told the client"
        );
        assert_eq!(
            common::logged_client(&t, &path),
            client,
            "{version}: the access log names it"
        );
    }
    let before = sims[0].requests();
    // Straight to tether from an allowed peer, without the header: closed, counted.
    let answer = send_from("127.0.0.1", t.addr, &get("/plain")).await;
    assert!(!answer.contains("200"), "{answer}");
    // A header from a peer not in `from`: closed before it is read.
    let mut forged = b"PROXY TCP4 198.51.100.1 192.0.2.1 4711 80\r\n".to_vec();
    forged.extend_from_slice(&get("/forged"));
    let answer = send_from("127.0.0.5", t.addr, &forged).await;
    assert!(!answer.contains("200"), "{answer}");
    assert_eq!(sims[0].requests(), before, "neither reached the server");
    let m = scrape(t.metrics.unwrap()).await;
    for reason in ["proxy_protocol_malformed", "proxy_protocol_from"] {
        let line = format!("tether_client_closed_total{{listener=\"web\",reason=\"{reason}\"}} 1");
        assert!(m.contains(&line), "{line} in:\n{m}");
    }
    // And through HAProxy it goes on working.
    let answer = send_from("127.0.0.3", v1, &get("/again")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_comes_before_tls() {
    let sims = tomcats(1).await;
    let dir = common::scratch_dir("proxy-protocol-tls");
    let pki = common::pki::Pki::new(&dir);
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        listener_extra: format!(
            "    proxy_protocol: {{ from: [\"127.0.0.1\"] }}\n{}",
            pki.listener_tls()
        ),
        ..Opts::default()
    });
    let (_haproxy, _v1, v2) = haproxy(&t.dir, t.addr);
    let port = v2.port();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("curl")
            .args(["-s", "--max-time", "10", "--interface", "127.0.0.7"])
            .args(["--cacert", &pki.path("ca.pem")])
            .args(["--resolve", &format!("a.test:{port}:127.0.0.1")])
            .arg(format!("https://a.test:{port}/tls"))
            .output()
            .expect("curl")
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let xff = sims[0]
        .last_request_headers()
        .into_iter()
        .find(|(n, _)| n == "x-forwarded-for")
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned());
    assert_eq!(
        xff.as_deref(),
        Some("127.0.0.7"),
        "the client through PROXY v2 and TLS"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// HAProxy terminating TLS and passing the SNI on in PROXY v2's authority TLV
/// (`proxy-v2-options authority,ssl`): a plugin routes on it, HTTP/1 and HTTP/2 alike
/// (`{ connection: authority }`), and on the client's address (`client_address`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_route_on_the_authority_haproxy_sends_and_on_the_client() {
    let sims = tomcats(3).await;
    let dir = common::scratch_dir("proxy-protocol-tlv");
    let pki = common::pki::Pki::new(&dir);
    let authorities = dir.join("authorities.csv");
    std::fs::write(
        &authorities,
        "key,target\na.test,shop/tc1\nb.test,shop/tc2\n",
    )
    .unwrap();
    let clients = dir.join("clients.csv");
    std::fs::write(&clients, "key,target\n127.0.0.9,shop/tc3\n").unwrap();
    let mut cluster = String::from("    servers:\n");
    for s in &sims {
        cluster.push_str(&server_line(s, ""));
    }
    let t = Tether::start_with(Opts {
        cluster,
        // HAProxy offers h2 to the client and passes it on as h2c.
        listener_extra: "    proxy_protocol: { from: [\"127.0.0.1\"] }\n    h2c: true\n".into(),
        listener_plugins: format!(
            "      - {{ name: route_table, key: {{ connection: authority }}, file: {} }}\n      \
             - {{ name: route_table, key: {{ connection: client_address }}, file: {} }}\n",
            authorities.display(),
            clients.display()
        ),
        ..Opts::default()
    });
    // HAProxy's TLS front: one PEM with the certificate and its key.
    let pem = dir.join("haproxy.pem");
    let both = [
        pki.path("a.crt"),
        pki.path("a.key"),
        pki.path("b.crt"),
        pki.path("b.key"),
    ]
    .map(|p| std::fs::read_to_string(p).unwrap());
    std::fs::write(&pem, format!("{}{}", both[0], both[1])).unwrap();
    let pem_b = dir.join("haproxy-b.pem");
    std::fs::write(&pem_b, format!("{}{}", both[2], both[3])).unwrap();
    let front = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let cfg = format!(
        "global\n  maxconn 200\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n\
         frontend tls\n  bind {front} ssl crt {} crt {} alpn h2,http/1.1\n  default_backend to_tether\n\
         backend to_tether\n  server t {} send-proxy-v2 proxy-v2-options authority,ssl\n",
        pem.display(),
        pem_b.display(),
        t.addr
    );
    let _haproxy = run_haproxy(&dir, &cfg, &[front]);
    let curl = |name: &'static str, from: &'static str, http2: bool| {
        let ca = pki.path("ca.pem");
        let port = front.port();
        async move {
            let out = tokio::task::spawn_blocking(move || {
                Command::new("curl")
                    .args(["-s", "-o", "/dev/null", "-D", "-", "--max-time", "10"])
                    .args(["--interface", from, "--cacert", &ca])
                    .arg(if http2 { "--http2" } else { "--http1.1" })
                    .args(["--resolve", &format!("{name}:{port}:127.0.0.1")])
                    .arg(format!("https://{name}:{port}/"))
                    .output()
                    .expect("curl")
            })
            .await
            .unwrap();
            let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
            head.lines()
                .find_map(|l| l.strip_prefix("x-server: "))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|| format!("no answer: {out:?}"))
        }
    };
    for http2 in [false, true] {
        for _ in 0..3 {
            assert_eq!(
                curl("a.test", "127.0.0.7", http2).await,
                "tc1",
                "h2 {http2}"
            );
            assert_eq!(
                curl("b.test", "127.0.0.7", http2).await,
                "tc2",
                "h2 {http2}"
            );
        }
    }
    // The client's address as the PROXY header names it (HAProxy saw 127.0.0.9); the
    // authority table has no `localhost`, so the client table decides.
    for _ in 0..3 {
        assert_eq!(curl("localhost", "127.0.0.9", false).await, "tc3");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
