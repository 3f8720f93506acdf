//! Table-driven tests of the routing decision: every rule of DESIGN section 2, balance,
//! consistent hashing and hostile input.

use super::*;
use crate::config::{Balance, Cluster, Server, ServerState, SessionStyle};
use crate::routing::{Outcome, Reject};
use http::header::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use std::net::SocketAddr;
use std::time::Duration;

// This file is loaded with `#[path]` from router.rs, so rustc treats it like a `mod.rs`
// and would look for child modules beside it; the `#[path]`s point into router_tests/.
#[path = "router_tests/balance.rs"]
mod balance;
#[path = "router_tests/domains.rs"]
mod domains;
#[path = "router_tests/hashing.rs"]
mod hashing;
#[path = "router_tests/hostile.rs"]
mod hostile;
#[path = "router_tests/reload.rs"]
mod reload;
#[path = "router_tests/session_ids.rs"]
mod session_ids;
#[path = "router_tests/states.rs"]
mod states;
#[path = "router_tests/websphere.rs"]
mod websphere;

/// The `now` every table case decides at (ms); far from 0 so "down since" fits before it.
const NOW: u64 = 1_000_000;
/// Default `recover_after` of the test clusters.
const RECOVER_MS: u64 = 10_000;

// ---------------------------------------------------------------------------------------
// Building clusters and requests
// ---------------------------------------------------------------------------------------

fn addr(i: usize) -> SocketAddr {
    // 10.0.x.y keeps 1,000+ servers unique; no socket is ever opened.
    SocketAddr::from(([10, 0, (i / 250) as u8, (i % 250 + 1) as u8], 8080))
}

fn server(i: usize, name: &str) -> Server {
    Server {
        name: name.into(),
        address: addr(i),
        route: name.into(),
        clone_id: None,
        weight: 1,
        domain: None,
        redirect: None,
        backup: false,
        state: ServerState::Active,
        max_inflight: 0,
        host: None,
        unresolved: None,
    }
}

/// A sticky Tomcat cluster with the config defaults and servers named `names`.
fn cluster(names: &[&str]) -> Cluster {
    Cluster {
        name: "test".into(),
        session_style: SessionStyle::Tomcat,
        session_cookie: "JSESSIONID".into(),
        session_path: "jsessionid".into(),
        session_header: None,
        sticky: true,
        sticky_force: false,
        max_attempts: 3,
        balance: Balance::Weighted,
        recover_after: Duration::from_millis(RECOVER_MS),
        connect_timeout: Duration::from_secs(1),
        read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        clone_separator: b':',
        private_headers: false,
        partition_table_max: 1_000,
        session_timeout: Duration::from_secs(1800),
        session_table_max: 1_000,
        drain_rescue: false,
        slow_start: Duration::ZERO,
        outlier: None,
        health_check: None,
        fail_on_status: vec![],
        plugins: vec![],
        tls: None,
        ajp: None,
        ssl_headers: None,
        queue: crate::config::Queue {
            length: 0,
            timeout: Duration::from_secs(1),
        },
        retry: crate::config::Retry::default(),
        max_inflight_per: Default::default(),
        error_pages: None,
        replace_server_errors: 0,
        servers: names
            .iter()
            .enumerate()
            .map(|(i, n)| server(i, n))
            .collect(),
    }
}

/// `count` servers named s0, s1, ...
fn numbered(count: usize) -> Cluster {
    let names: Vec<String> = (0..count).map(|i| format!("s{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    cluster(&refs)
}

/// The standard table cluster: n1..n4, all active, weight 1.
fn four() -> Cluster {
    cluster(&["n1", "n2", "n3", "n4"])
}

/// Small edits of the standard cluster, by server name.
trait Edit {
    fn srv(&mut self, name: &str) -> &mut Server;
    fn index(&self, name: &str) -> usize;
}

impl Edit for Cluster {
    fn srv(&mut self, name: &str) -> &mut Server {
        self.servers
            .iter_mut()
            .find(|s| s.name == name)
            .expect("server in cluster")
    }
    fn index(&self, name: &str) -> usize {
        self.servers
            .iter()
            .position(|s| s.name == name)
            .expect("server in cluster")
    }
}

fn idx(r: &ClusterRouter, name: &str) -> usize {
    r.servers()
        .iter()
        .position(|s| s.config.name == name)
        .expect("server in router")
}

fn name(r: &ClusterRouter, i: usize) -> &str {
    &r.servers()[i].config.name
}

fn set_state(r: &ClusterRouter, names: &[&str], state: ServerState) {
    names
        .iter()
        .for_each(|n| r.servers()[idx(r, n)].live.set_state(state));
}

/// Marks `names` down just now (well inside `recover_after`).
fn mark_down(r: &ClusterRouter, names: &[&str]) {
    names.iter().for_each(|n| {
        r.servers()[idx(r, n)].live.mark_down(NOW - 1);
    });
}

/// A header map from (name, value) pairs; repeated names make several headers.
fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

fn cookie(value: &str) -> HeaderMap {
    headers(&[("cookie", value)])
}

fn route(server: usize, outcome: Outcome) -> Decision {
    Decision::Route { server, outcome }
}

// ---------------------------------------------------------------------------------------
// The rule table
// ---------------------------------------------------------------------------------------

/// What a case expects.
#[derive(Debug)]
enum Want {
    /// This server, for this reason.
    Route(&'static str, Outcome),
    /// Any server but these (consistent hash or balancing), for this reason.
    NotIn(&'static [&'static str], Outcome),
    /// One of these servers, for this reason.
    OneOf(&'static [&'static str], Outcome),
    Reject(Reject),
}

struct Case {
    what: &'static str,
    setup: fn(&mut Cluster),
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    /// Live-state changes after the router is built.
    live: fn(&ClusterRouter),
    tried: &'static [&'static str],
    want: Want,
}

/// Defaults for the fields most cases leave alone.
const BASE: Case = Case {
    what: "",
    setup: |_| {},
    path: "/app/page",
    headers: &[],
    live: |_| {},
    tried: &[],
    want: Want::Reject(Reject::NoServer),
};

fn run(cases: &[Case]) {
    for case in cases {
        let mut cfg = four();
        (case.setup)(&mut cfg);
        let router = ClusterRouter::new(&cfg, None);
        (case.live)(&router);
        let mut tried = Tried::default();
        case.tried.iter().for_each(|n| tried.push(idx(&router, n)));
        let h = headers(case.headers);
        // `explain` looks without claiming (probe, round robin): asked first, it tells what
        // `decide` then does.
        let explained = router.explain(case.path.as_bytes(), &h, NOW);
        let got = router.decide(case.path.as_bytes(), &h, &tried, NOW);
        if case.tried.is_empty() {
            assert_eq!(explained.decision, got, "{}: explain agrees", case.what);
        }
        let shown = match got {
            Decision::Route { server, outcome } => format!("{} {outcome:?}", name(&router, server)),
            Decision::Reject(r) => format!("{r:?}"),
        };
        let ok = match (&case.want, got) {
            (Want::Route(n, o), Decision::Route { server, outcome }) => {
                name(&router, server) == *n && outcome == *o
            }
            (Want::NotIn(ns, o), Decision::Route { server, outcome }) => {
                !ns.contains(&name(&router, server)) && outcome == *o
            }
            (Want::OneOf(ns, o), Decision::Route { server, outcome }) => {
                ns.contains(&name(&router, server)) && outcome == *o
            }
            (Want::Reject(w), Decision::Reject(r)) => *w == r,
            _ => false,
        };
        assert!(ok, "{}: want {:?}, got {shown}", case.what, case.want);
    }
}
