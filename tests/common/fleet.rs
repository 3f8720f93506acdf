//! Fleet test harness: WebSphere clones, a real Redis, and tether instances sharing it.

use super::redis::Redis;
use super::{scrape, Opts, Tether};
use std::time::{Duration, Instant};
use tether::cli::sim::{WasCluster, WebSphereSim};

/// Three clones, each owning two partitions.
pub async fn was_cluster() -> (WasCluster, Vec<WebSphereSim>) {
    let cluster = WasCluster::new();
    let mut sims = Vec::new();
    for (i, parts) in [["101", "102"], ["201", "202"], ["301", "302"]]
        .iter()
        .enumerate()
    {
        let n = i + 1;
        let sim = WebSphereSim::start(&cluster, &format!("was{n}"), &format!("c{n}"), parts)
            .await
            .unwrap();
        sims.push(sim);
    }
    (cluster, sims)
}

pub fn cluster_yaml(sims: &[WebSphereSim]) -> String {
    cluster_yaml_with(sims, "")
}

/// The cluster body for `sims`, with more cluster fields (indented 4) in `extra`.
pub fn cluster_yaml_with(sims: &[WebSphereSim], extra: &str) -> String {
    let mut y =
        format!("    session_style: websphere\n    recover_after: 60s\n{extra}    servers:\n");
    for s in sims {
        y.push_str(&format!(
            "      - {{ name: {}, address: \"{}\", clone_id: {} }}\n",
            s.name(),
            s.addr(),
            s.clone_id()
        ));
    }
    y
}

/// `shared_state:` for instance `name` on `url`, with more fields (indented 2) in `extra`.
pub fn shared_state(url: &str, name: &str, extra: &str) -> String {
    format!("shared_state:\n  url: \"{url}\"\n  instance: {name}\n  key_prefix: test\n{extra}")
}

/// Starts instance `name` of the fleet in front of `sims`, with an admin API and metrics.
pub fn instance(sims: &[WebSphereSim], url: &str, name: &str, extra: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: cluster_yaml(sims),
        top: shared_state(url, name, extra),
        admin: true,
        metrics: true,
        log: Some("info"),
        ..Opts::default()
    })
}

/// Three instances `a`, `b`, `c` on `redis`.
pub fn three(sims: &[WebSphereSim], redis: &Redis) -> Vec<Tether> {
    ["a", "b", "c"]
        .iter()
        .map(|n| instance(sims, &redis.url(), n, ""))
        .collect()
}

/// The value of one sample (`name{labels}` exactly as exposed), 0 when absent.
pub async fn metric(t: &Tether, sample: &str) -> f64 {
    let text = scrape(t.metrics.unwrap()).await;
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The partition table's size on `t` (`GET /status`).
pub async fn table_size(t: &Tether) -> u64 {
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    json["clusters"][0]["partition_table"]["size"]
        .as_u64()
        .unwrap_or(0)
}

/// Waits until `check` holds, up to `limit`; returns how long it took, or panics with `what`.
pub async fn until<F, Fut>(what: &str, limit: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        if start.elapsed() > limit {
            panic!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn wsfo_total(sims: &[WebSphereSim]) -> u64 {
    sims.iter().map(|s| s.wsfo_received()).sum()
}

/// Sends one request of the session `cookie` (a JSESSIONID value) through `t`; returns the
/// server that answered and the session's count there.
pub async fn visit(t: &Tether, cookie: &str) -> (String, u64) {
    let header = format!("JSESSIONID={cookie}");
    let resp = t
        .client()
        .get("/app", &[("Cookie", &header)])
        .await
        .expect("request");
    assert_eq!(resp.status, 200, "no failed request");
    let count = resp.header("x-session-count").unwrap().parse().unwrap();
    (resp.header("x-server").unwrap().to_string(), count)
}

/// `n` new sessions through `t`: (cookie value, home server).
pub async fn sessions(t: &Tether, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let resp = t.client().get("/app", &[]).await.expect("request");
        assert_eq!(resp.status, 200);
        out.push((
            resp.set_cookie("JSESSIONID").unwrap(),
            resp.header("x-server").unwrap().to_string(),
        ));
    }
    out
}

/// A TCP relay to `target` that holds every chunk `delay` before passing it on (a slow
/// Redis, as tether sees it). Returns its address; it runs until the test ends.
pub async fn slow_relay(target: std::net::SocketAddr, delay: Duration) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    async fn pipe(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        delay: Duration,
    ) {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                return;
            }
            tokio::time::sleep(delay).await;
            if to.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    }
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                continue;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pipe(cr, sw, delay));
            tokio::spawn(pipe(sr, cw, delay));
        }
    });
    addr
}
