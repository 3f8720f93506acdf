//! A real Prometheus server (Debian's `prometheus` package) and `promtool`, for tests.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tether::cli::sim::HttpClient;

/// The path of a tool, or a panic that says how to get it (`./run test` installs it).
pub fn tool(name: &str) -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` is not installed: install Debian's `prometheus` package (./run test does)");
}

/// Runs `promtool` with `args`, feeding `stdin`; returns (success, output).
pub fn promtool(args: &[&str], stdin: &[u8]) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new(tool("promtool"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A Prometheus server scraping one target every second; killed when dropped.
pub struct Prometheus {
    pub addr: SocketAddr,
    child: Child,
}

impl Prometheus {
    pub fn start(dir: &Path, target: SocketAddr) -> Prometheus {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let conf = dir.join("prometheus.yml");
        std::fs::write(
            &conf,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: tether\n    static_configs:\n      - targets: [\"{target}\"]\n"
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(tool("prometheus"))
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "prometheus did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Prometheus { addr, child }
    }

    /// Runs an instant query; returns the `data.result` array.
    pub async fn query(&self, expr: &str) -> Vec<serde_json::Value> {
        let mut c = HttpClient::new(self.addr);
        let path = format!(
            "/api/v1/query?query={}",
            tether_plugins::percent_encode(expr)
        );
        let resp = c.get(&path, &[]).await.expect("query prometheus");
        let json: serde_json::Value = serde_json::from_slice(&resp.body).unwrap_or_default();
        assert_eq!(json["status"], "success", "{expr}: {json}");
        json["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
