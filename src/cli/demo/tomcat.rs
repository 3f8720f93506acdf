//! The demo's Tomcat scenario: new sessions by weight, stickiness, a killed server's
//! sessions failing over without a client error, and the server coming back.

use crate::cli::sim::{HttpClient, TomcatSim};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// A browser-like client: one keep-alive connection and its session cookie.
struct Browser {
    http: HttpClient,
    cookie: Option<String>,
    server: String,
}

impl Browser {
    /// One GET; remembers the session cookie and the server that answered.
    async fn get(&mut self) -> Result<String, String> {
        let cookie = self.cookie.as_ref().map(|c| format!("JSESSIONID={c}"));
        let headers: Vec<(&str, &str)> = cookie.iter().map(|c| ("Cookie", c.as_str())).collect();
        let resp = self
            .http
            .get("/shop/cart", &headers)
            .await
            .map_err(|e| e.to_string())?;
        if resp.status != 200 {
            return Err(format!("HTTP {}", resp.status));
        }
        if let Some(c) = resp.set_cookie("JSESSIONID") {
            self.cookie = Some(c);
        }
        let server = resp.header("x-server").unwrap_or("?").to_string();
        self.server = server.clone();
        Ok(server)
    }
}

pub async fn wait_ready(addr: SocketAddr) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn line(label: &str, value: impl std::fmt::Display) {
    println!("  {label:<44} {value}");
}

/// A session id of the scenario, for the `curl` lines.
static SAMPLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `curl` lines a person can try against the Tomcat listener.
pub fn print_curls(addr: SocketAddr) {
    let sample = SAMPLE.get().map(String::as_str).unwrap_or("ABC.tc1");
    println!("  curl -i http://{addr}/");
    println!("  curl -i -b 'JSESSIONID={sample}' http://{addr}/");
    println!("  curl -i 'http://{addr}/app;jsessionid={sample}'");
    println!(
        "  curl -i -b 'JSESSIONID=ORPHAN.gone' http://{addr}/   # unknown route: consistent hash"
    );
}

pub async fn run(addr: SocketAddr, sims: &[TomcatSim], servers: &[(&str, u32)]) {
    wait_ready(addr).await;
    let mut browsers: Vec<Browser> = (0..40)
        .map(|_| Browser {
            http: HttpClient::new(addr),
            cookie: None,
            server: String::new(),
        })
        .collect();

    println!("1. 40 new sessions, balanced by weight (smooth weighted round robin)");
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for b in &mut browsers {
        if let Ok(s) = b.get().await {
            *counts.entry(s).or_default() += 1;
        }
    }
    let total_weight: u32 = servers.iter().map(|s| s.1).sum();
    println!(
        "  {:<8} {:>6} {:>14} {:>10}",
        "server", "weight", "new sessions", "expected"
    );
    for (name, weight) in servers {
        println!(
            "  {:<8} {:>6} {:>14} {:>10}",
            name,
            weight,
            counts.get(*name).copied().unwrap_or(0),
            40 * weight / total_weight
        );
    }

    println!("\n2. every session sends 5 more requests");
    let (mut stayed, mut sent) = (0, 0);
    for b in &mut browsers {
        let home = b.server.clone();
        for _ in 0..5 {
            sent += 1;
            if b.get().await.as_deref() == Ok(home.as_str()) {
                stayed += 1;
            }
        }
    }
    line(
        "requests answered by the session's server",
        format!("{stayed}/{sent}"),
    );

    let victim = &sims[2];
    println!(
        "\n3. {} is killed; every session sends one request",
        victim.name()
    );
    victim.stop().await;
    let (mut errors, mut moved) = (0, BTreeMap::<String, u32>::new());
    for b in browsers.iter_mut().filter(|b| b.server == victim.name()) {
        match b.get().await {
            Ok(s) => *moved.entry(s).or_default() += 1,
            Err(_) => errors += 1,
        }
    }
    for b in browsers.iter_mut().filter(|b| b.server != victim.name()) {
        if b.get().await.is_err() {
            errors += 1;
        }
    }
    line(
        &format!("{}'s sessions failed over to", victim.name()),
        format!("{moved:?}"),
    );
    line("client errors", errors);

    println!(
        "\n4. {} comes back; after recover_after (2s) a request probes it",
        victim.name()
    );
    if let Err(e) = victim.restart().await {
        println!("  restart failed: {e}");
    }
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let mut back = 0;
    for _ in 0..12 {
        let mut b = Browser {
            http: HttpClient::new(addr),
            cookie: None,
            server: String::new(),
        };
        if b.get().await.as_deref() == Ok(victim.name()) {
            back += 1;
        }
    }
    line(&format!("new sessions on {} (of 12)", victim.name()), back);

    let sample = browsers.iter().find_map(|b| b.cookie.clone());
    SAMPLE.get_or_init(|| sample.unwrap_or_default());
}
