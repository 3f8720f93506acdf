//! `tether demo`: simulated Tomcat and WebSphere servers behind real tether listeners, a
//! scripted scenario that shows stickiness, weights, failover and the WebSphere partition
//! table, then the proxy left running to curl.

mod fleet;
mod tomcat;
mod websphere;

use crate::cli::sim::{TomcatSim, WasCluster, WebSphereSim};
use crate::config;
use crate::process::service::{build_server, RunOptions};
use std::net::{SocketAddr, TcpListener};
use std::process::ExitCode;

/// The Tomcat servers: (name / jvmRoute, weight).
const TOMCATS: [(&str, u32); 3] = [("tc1", 1), ("tc2", 1), ("tc3", 2)];
/// The WebSphere clones: (name, CloneID, partitions owned at start).
const CLONES: [(&str, &str, [&str; 2]); 3] = [
    ("was1", "v544d0o0", ["7329011", "-184020"]),
    ("was2", "v544d0o1", ["5521900", "-990113"]),
    ("was3", "v544d0o2", ["8810001", "-310077"]),
];

struct Sims {
    tomcats: Vec<TomcatSim>,
    was: WasCluster,
    clones: Vec<WebSphereSim>,
}

async fn start_sims() -> std::io::Result<Sims> {
    let mut tomcats = Vec::new();
    for (name, _) in TOMCATS {
        tomcats.push(TomcatSim::start(name, name).await?);
    }
    let was = WasCluster::new();
    let mut clones = Vec::new();
    for (name, clone, partitions) in CLONES {
        clones.push(WebSphereSim::start(&was, name, clone, &partitions).await?);
    }
    Ok(Sims {
        tomcats,
        was,
        clones,
    })
}

/// `tether demo --fleet`: two instances sharing a `redis-server` (see `demo/fleet.rs`).
pub fn run_fleet() -> ExitCode {
    fleet::run()
}

/// The demo's runtime (one worker); `None` after saying why, as `what` (the command).
fn runtime(what: &str) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("{what}: cannot start a runtime: {e}");
            None
        }
    }
}

pub fn run(listen: Option<SocketAddr>) -> ExitCode {
    let Some(rt) = runtime("tether demo") else {
        return ExitCode::FAILURE;
    };
    let sims = match rt.block_on(start_sims()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tether demo: cannot start the simulated servers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let web = listen.unwrap_or_else(|| free_listen(8080));
    let was = free_listen(web.port().wrapping_add(1));
    let yaml = demo_yaml(web, was, &sims);
    let config = match config::parse(&yaml, "demo config") {
        Ok(c) => c,
        Err(e) => {
            eprint!("{e}");
            return ExitCode::FAILURE;
        }
    };
    println!("tether demo");
    println!("  http://{web} -> 3 simulated Tomcat servers (weights 1, 1, 2)");
    println!("  http://{was} -> 3 simulated WebSphere clones with memory-to-memory replication\n");
    let (server, control) = match build_server(config, None, RunOptions::default()) {
        Ok(built) => built,
        Err(e) => {
            eprintln!("tether demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let snapshot = control.snapshot().clone();
    std::thread::spawn(move || {
        rt.block_on(async move {
            tomcat::run(web, &sims.tomcats, &TOMCATS).await;
            websphere::run(was, &sims.was, &sims.clones, &snapshot).await;
            println!("\ntether keeps serving (Ctrl-C to stop). Try:");
            tomcat::print_curls(web);
            websphere::print_curls(was);
            // Keep the simulated servers serving for people to curl.
            std::future::pending::<()>().await;
        })
    });
    let signals = crate::process::signals::Signals::new(control);
    server.run(pingora_core::server::RunArgs {
        shutdown_signal: Box::new(signals),
    });
    ExitCode::SUCCESS
}

/// 127.0.0.1:`preferred` when it is free, else any free loopback port.
fn free_listen(preferred: u16) -> SocketAddr {
    let preferred = SocketAddr::from(([127, 0, 0, 1], preferred));
    let probe = TcpListener::bind(preferred).or_else(|_| TcpListener::bind("127.0.0.1:0"));
    match probe.and_then(|l| l.local_addr()) {
        Ok(a) => a,
        Err(_) => preferred,
    }
}

fn demo_yaml(web: SocketAddr, was: SocketAddr, sims: &Sims) -> String {
    let tmp = std::env::temp_dir();
    let pid = std::process::id();
    let mut yaml = format!(
        "server:\n  threads: 2\n  grace_period_seconds: 0\n  graceful_shutdown_timeout_seconds: 1\n  \
         pid_file: {}/tether-demo-{pid}.pid\n  upgrade_sock: {}/tether-demo-{pid}.sock\n\
         listeners:\n  - {{ name: web, address: \"{web}\", cluster: shop }}\n\
         \x20 - {{ name: was, address: \"{was}\", cluster: was }}\n\
         clusters:\n  - name: shop\n    recover_after: 2s\n    servers:\n",
        tmp.display(),
        tmp.display()
    );
    for (sim, (name, weight)) in sims.tomcats.iter().zip(TOMCATS) {
        yaml.push_str(&format!(
            "      - {{ name: {name}, address: \"{}\", weight: {weight} }}\n",
            sim.addr()
        ));
    }
    yaml.push_str(
        "  - name: was\n    session_style: websphere\n    recover_after: 60s\n    servers:\n",
    );
    for (sim, (name, clone, _)) in sims.clones.iter().zip(CLONES) {
        yaml.push_str(&format!(
            "      - {{ name: {name}, address: \"{}\", clone_id: {clone} }}\n",
            sim.addr()
        ));
    }
    yaml
}
