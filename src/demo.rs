//! `tether demo`: simulated Tomcat servers behind a real tether listener, a scripted
//! scenario that shows stickiness, weights and failover, then a proxy left running to curl.

mod scenario;

use crate::config;
use crate::service::{build_server, RunOptions};
use crate::sim::TomcatSim;
use std::net::{SocketAddr, TcpListener};
use std::process::ExitCode;

/// The demo's servers: (name / jvmRoute, weight).
const SERVERS: [(&str, u32); 3] = [("tc1", 1), ("tc2", 1), ("tc3", 2)];

pub fn run(listen: Option<SocketAddr>) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tether demo: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let sims = rt.block_on(async {
        let mut sims = Vec::new();
        for (name, _) in SERVERS {
            sims.push(TomcatSim::start(name, name).await?);
        }
        std::io::Result::Ok(sims)
    });
    let sims = match sims {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tether demo: cannot start the simulated servers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr = listen.unwrap_or_else(default_listen);
    let yaml = demo_yaml(addr, &sims);
    let config = match config::parse(&yaml, "demo config") {
        Ok(c) => c,
        Err(e) => {
            eprint!("{e}");
            return ExitCode::FAILURE;
        }
    };
    println!("tether demo: 3 simulated Tomcat servers behind tether on http://{addr}\n");
    let (server, _snapshot) = build_server(&config, RunOptions::default());
    std::thread::spawn(move || {
        rt.block_on(async move {
            scenario::run(addr, &sims, &SERVERS).await;
            // Keep the simulated servers serving for people to curl.
            std::future::pending::<()>().await;
        })
    });
    server.run_forever()
}

/// 127.0.0.1:8080 when it is free, else any free loopback port.
fn default_listen() -> SocketAddr {
    let preferred = SocketAddr::from(([127, 0, 0, 1], 8080));
    let probe = TcpListener::bind(preferred).or_else(|_| TcpListener::bind("127.0.0.1:0"));
    match probe.and_then(|l| l.local_addr()) {
        Ok(a) => a,
        Err(_) => preferred,
    }
}

fn demo_yaml(addr: SocketAddr, sims: &[TomcatSim]) -> String {
    let tmp = std::env::temp_dir();
    let pid = std::process::id();
    let mut yaml = format!(
        "server:\n  threads: 2\n  grace_period_seconds: 0\n  graceful_shutdown_timeout_seconds: 1\n  \
         pid_file: {}/tether-demo-{pid}.pid\n  upgrade_sock: {}/tether-demo-{pid}.sock\n\
         listeners:\n  - {{ name: web, address: \"{addr}\", cluster: shop }}\n\
         clusters:\n  - name: shop\n    recover_after: 2s\n    servers:\n",
        tmp.display(),
        tmp.display()
    );
    for (sim, (name, weight)) in sims.iter().zip(SERVERS) {
        yaml.push_str(&format!(
            "      - {{ name: {name}, address: \"{}\", weight: {weight} }}\n",
            sim.addr()
        ));
    }
    yaml
}
