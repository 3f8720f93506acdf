//! Table-driven tests of the routing decision: every rule of DESIGN section 2, balance,
//! consistent hashing and hostile input.

use super::*;
use crate::config::{Balance, Cluster, Server, ServerState, SessionStyle};
use crate::routing::{Health, Outcome, Reject, MAX_SESSION_ID_LEN};
use http::header::{HeaderName, HeaderValue};
use std::collections::HashMap as Map;
use std::net::SocketAddr;
use std::time::Duration;

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
        let got = router.decide(case.path.as_bytes(), &headers(case.headers), &tried, NOW);
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

#[test]
fn where_the_session_id_comes_from() {
    use Outcome::*;
    run(&[
        Case {
            what: "path parameter beats the cookie",
            path: "/app;jsessionid=A.n2",
            headers: &[("cookie", "JSESSIONID=B.n1")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "path parameter ends at ?",
            path: "/app;jsessionid=A.n2?jsessionid=B.n1",
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "path parameter in the query string does not count",
            path: "/app?x=1;jsessionid=A.n2",
            headers: &[("cookie", "JSESSIONID=B.n3")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "empty path parameter falls through to the cookie",
            path: "/app;jsessionid=",
            headers: &[("cookie", "JSESSIONID=B.n3")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "cookie JSESSIONID",
            headers: &[("cookie", "a=1; JSESSIONID=A.n3; b=2")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "XJSESSIONID is another cookie",
            headers: &[("cookie", "XJSESSIONID=A.n3")],
            want: Want::NotIn(&[], NewSession),
            ..BASE
        },
        Case {
            what: "JSESSIONIDX is another cookie",
            headers: &[("cookie", "JSESSIONIDX=A.n3")],
            want: Want::NotIn(&[], NewSession),
            ..BASE
        },
        Case {
            what: "cookie names are case-sensitive",
            headers: &[("cookie", "jsessionid=A.n3")],
            want: Want::NotIn(&[], NewSession),
            ..BASE
        },
        Case {
            what: "look-alikes skipped, the exact name found after them",
            headers: &[(
                "cookie",
                "XJSESSIONID=A.n1; JSESSIONIDX=B.n2; jsessionid=C.n3; JSESSIONID=D.n4",
            )],
            want: Want::Route("n4", RouteHit),
            ..BASE
        },
        Case {
            what: "several Cookie headers: unknown routes skipped, first known route wins",
            headers: &[
                ("cookie", "a=1; JSESSIONID=A.gone"),
                ("cookie", "JSESSIONID=B.n3; JSESSIONID=C.n1"),
            ],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "only unknown routes: hash of the first one",
            headers: &[
                ("cookie", "JSESSIONID=A.gone"),
                ("cookie", "JSESSIONID=B.gone2"),
            ],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "surrounding quotes removed",
            headers: &[("cookie", "JSESSIONID=\"A.n4\"")],
            want: Want::Route("n4", RouteHit),
            ..BASE
        },
        Case {
            what: "route is the text after the first dot",
            headers: &[("cookie", "JSESSIONID=ABC.n1")],
            want: Want::Route("n1", RouteHit),
            ..BASE
        },
        Case {
            what: "two dots: not a route, and no such domain",
            headers: &[("cookie", "JSESSIONID=ABC.n2.n1")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "two dots: the first part is tried as a domain",
            setup: |c| {
                c.srv("n3").domain = Some("rack1".into());
                c.srv("n4").domain = Some("rack1".into());
            },
            headers: &[("cookie", "JSESSIONID=ABC.rack1.n1")],
            want: Want::OneOf(&["n3", "n4"], DomainHit),
            ..BASE
        },
        Case {
            what: "no dot: no route, hash fallback",
            headers: &[("cookie", "JSESSIONID=ABCDEF")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "configured cookie name",
            setup: |c| c.session_cookie = "SID".into(),
            headers: &[("cookie", "JSESSIONID=B.n1; SID=A.n2")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "configured path parameter name",
            setup: |c| c.session_path = "sid".into(),
            path: "/x;jsessionid=B.n1;sid=A.n2",
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "session header when configured",
            setup: |c| c.session_header = Some("X-Session".into()),
            headers: &[("x-session", "A.n2")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "session header after the cookies",
            setup: |c| c.session_header = Some("X-Session".into()),
            headers: &[("x-session", "A.n2"), ("cookie", "JSESSIONID=B.n3")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "session header used when cookies name no server",
            setup: |c| c.session_header = Some("X-Session".into()),
            headers: &[("x-session", "A.n2"), ("cookie", "JSESSIONID=B.gone")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "session header ignored when not configured",
            headers: &[("x-session", "A.n2")],
            want: Want::NotIn(&[], NewSession),
            ..BASE
        },
    ]);
}

#[test]
fn server_state_and_health() {
    use Outcome::*;
    use ServerState::*;
    run(&[
        Case {
            what: "route hit on an active server",
            headers: &[("cookie", "JSESSIONID=A.n1")],
            want: Want::Route("n1", RouteHit),
            ..BASE
        },
        Case {
            what: "route hit on a draining server",
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| set_state(r, &["n1"], Draining),
            want: Want::Route("n1", RouteHit),
            ..BASE
        },
        Case {
            what: "draining servers get no new session",
            live: |r| set_state(r, &["n1", "n2", "n3"], Draining),
            want: Want::Route("n4", NewSession),
            ..BASE
        },
        Case {
            what: "draining servers get no hash-fallback session",
            headers: &[("cookie", "JSESSIONID=A.gone")],
            live: |r| set_state(r, &["n1", "n2", "n3"], Draining),
            want: Want::Route("n4", HashFallback),
            ..BASE
        },
        Case {
            what: "stopped server: failover",
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| set_state(r, &["n1"], Stopped),
            want: Want::NotIn(&["n1"], Failover),
            ..BASE
        },
        Case {
            what: "down server: failover by hash among the rest",
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1"]),
            want: Want::NotIn(&["n1"], Failover),
            ..BASE
        },
        Case {
            what: "down server: failover to its redirect",
            setup: |c| c.srv("n1").redirect = Some(c.index("n3")),
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1"]),
            want: Want::Route("n3", Failover),
            ..BASE
        },
        Case {
            what: "redirect down too: same-domain server",
            setup: |c| {
                c.srv("n1").redirect = Some(c.index("n3"));
                c.srv("n1").domain = Some("d".into());
                c.srv("n2").domain = Some("d".into());
            },
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1", "n3"]),
            want: Want::Route("n2", Failover),
            ..BASE
        },
        Case {
            what: "redirect draining: it takes no failover (a new session for it)",
            setup: |c| {
                c.srv("n1").redirect = Some(c.index("n3"));
                c.srv("n1").domain = Some("d".into());
                c.srv("n2").domain = Some("d".into());
            },
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| {
                mark_down(r, &["n1"]);
                set_state(r, &["n3"], Draining);
            },
            want: Want::Route("n2", Failover),
            ..BASE
        },
        Case {
            what: "down server without redirect: same-domain server",
            setup: |c| {
                c.srv("n1").domain = Some("d".into());
                c.srv("n4").domain = Some("d".into());
            },
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1"]),
            want: Want::Route("n4", Failover),
            ..BASE
        },
        Case {
            what: "whole domain down: hash among the rest",
            setup: |c| {
                c.srv("n1").domain = Some("d".into());
                c.srv("n4").domain = Some("d".into());
            },
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1", "n4"]),
            want: Want::NotIn(&["n1", "n4"], Failover),
            ..BASE
        },
        Case {
            what: "failover avoids draining and down servers",
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| {
                mark_down(r, &["n1", "n2"]);
                set_state(r, &["n3"], Draining);
            },
            want: Want::Route("n4", Failover),
            ..BASE
        },
        Case {
            what: "sticky_force: down server answers 503",
            setup: |c| c.sticky_force = true,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1"]),
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
        Case {
            what: "sticky_force: stopped server answers 503, redirect or not",
            setup: |c| {
                c.sticky_force = true;
                c.srv("n1").redirect = Some(1);
            },
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| set_state(r, &["n1"], Stopped),
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
        Case {
            what: "sticky_force: draining server still serves its sessions",
            setup: |c| c.sticky_force = true,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| set_state(r, &["n1"], Draining),
            want: Want::Route("n1", RouteHit),
            ..BASE
        },
        Case {
            what: "sticky_force: unknown route still hashes",
            setup: |c| c.sticky_force = true,
            headers: &[("cookie", "JSESSIONID=A.gone")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "sticky_force: whole domain down answers 503",
            setup: |c| {
                c.sticky_force = true;
                c.srv("n2").domain = Some("d".into());
            },
            headers: &[("cookie", "JSESSIONID=A.d.x")],
            live: |r| mark_down(r, &["n2"]),
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
        Case {
            what: "unknown route: hash over active, up servers",
            headers: &[("cookie", "JSESSIONID=A.gone")],
            live: |r| {
                mark_down(r, &["n1"]);
                set_state(r, &["n2"], Draining);
                set_state(r, &["n3"], Stopped);
            },
            want: Want::Route("n4", HashFallback),
            ..BASE
        },
        Case {
            what: "domain route: a server of the domain",
            setup: |c| {
                c.srv("n2").domain = Some("east".into());
                c.srv("n3").domain = Some("east".into());
            },
            headers: &[("cookie", "JSESSIONID=A.east.x")],
            want: Want::OneOf(&["n2", "n3"], DomainHit),
            ..BASE
        },
        Case {
            what: "domain route: skips a down member",
            setup: |c| {
                c.srv("n2").domain = Some("east".into());
                c.srv("n3").domain = Some("east".into());
            },
            headers: &[("cookie", "JSESSIONID=A.east.x")],
            live: |r| mark_down(r, &["n2"]),
            want: Want::Route("n3", DomainHit),
            ..BASE
        },
        Case {
            what: "domain route: whole domain down fails over",
            setup: |c| c.srv("n2").domain = Some("east".into()),
            headers: &[("cookie", "JSESSIONID=A.east.x")],
            live: |r| mark_down(r, &["n2"]),
            want: Want::NotIn(&["n2"], Failover),
            ..BASE
        },
        Case {
            what: "a route beats a domain of the same name",
            setup: |c| c.srv("n2").domain = Some("n1".into()),
            headers: &[("cookie", "JSESSIONID=A.n1")],
            want: Want::Route("n1", RouteHit),
            ..BASE
        },
        Case {
            what: "first session naming a down server does not hide a live one (mod_jk)",
            headers: &[("cookie", "JSESSIONID=A.n1; JSESSIONID=B.n2")],
            live: |r| mark_down(r, &["n1"]),
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "all named servers down: failover follows the first one's redirect",
            setup: |c| {
                c.srv("n1").redirect = Some(c.index("n3"));
                c.srv("n2").redirect = Some(c.index("n4"));
            },
            headers: &[("cookie", "JSESSIONID=A.n1; JSESSIONID=B.n2")],
            live: |r| mark_down(r, &["n1", "n2"]),
            want: Want::Route("n3", Failover),
            ..BASE
        },
        Case {
            what: "a named down server wins over an orphan for failover",
            setup: |c| c.srv("n1").redirect = Some(c.index("n3")),
            headers: &[("cookie", "JSESSIONID=A.gone; JSESSIONID=B.n1")],
            live: |r| mark_down(r, &["n1"]),
            want: Want::Route("n3", Failover),
            ..BASE
        },
        Case {
            what: "sticky=false ignores the session",
            setup: |c| c.sticky = false,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| set_state(r, &["n2", "n3", "n4"], Draining),
            want: Want::Route("n1", NewSession),
            ..BASE
        },
        Case {
            what: "sticky=false: a draining session server gets nothing",
            setup: |c| c.sticky = false,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| set_state(r, &["n1"], Draining),
            want: Want::NotIn(&["n1"], NewSession),
            ..BASE
        },
        Case {
            what: "nothing active: no server for a new session",
            live: |r| {
                set_state(r, &["n1", "n2"], Stopped);
                set_state(r, &["n3"], Draining);
                mark_down(r, &["n4"]);
            },
            want: Want::Reject(Reject::NoServer),
            ..BASE
        },
        Case {
            what: "nothing active: no server for a failover",
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1", "n2", "n3", "n4"]),
            want: Want::Reject(Reject::NoServer),
            ..BASE
        },
        Case {
            what: "nothing active: no server for an orphan",
            headers: &[("cookie", "JSESSIONID=A.gone")],
            live: |r| set_state(r, &["n1", "n2", "n3", "n4"], Stopped),
            want: Want::Reject(Reject::NoServer),
            ..BASE
        },
    ]);
}

#[test]
fn backups_only_when_no_primary_can_serve() {
    use Outcome::*;
    let backup: fn(&mut Cluster) = |c| c.srv("n4").backup = true;
    run(&[
        Case {
            what: "primaries up: an orphan hashes to a primary",
            setup: backup,
            headers: &[("cookie", "JSESSIONID=A.gone")],
            want: Want::NotIn(&["n4"], HashFallback),
            ..BASE
        },
        Case {
            what: "primaries down: new session on the backup",
            setup: backup,
            live: |r| mark_down(r, &["n1", "n2", "n3"]),
            want: Want::Route("n4", NewSession),
            ..BASE
        },
        Case {
            what: "primaries stopped or draining: orphan on the backup",
            setup: backup,
            headers: &[("cookie", "JSESSIONID=A.gone")],
            live: |r| {
                set_state(r, &["n1", "n2"], ServerState::Stopped);
                set_state(r, &["n3"], ServerState::Draining);
            },
            want: Want::Route("n4", HashFallback),
            ..BASE
        },
        Case {
            what: "primaries down: failover to the backup",
            setup: backup,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1", "n2", "n3"]),
            want: Want::Route("n4", Failover),
            ..BASE
        },
        Case {
            what: "one primary left: failover to it, not the backup",
            setup: backup,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1", "n2"]),
            want: Want::Route("n3", Failover),
            ..BASE
        },
        Case {
            what: "a backup's own session sticks to it",
            setup: backup,
            headers: &[("cookie", "JSESSIONID=A.n4")],
            want: Want::Route("n4", RouteHit),
            ..BASE
        },
    ]);
    // And no new session ever lands on the backup while a primary is up.
    let mut cfg = four();
    backup(&mut cfg);
    let r = ClusterRouter::new(&cfg, None);
    let none = HeaderMap::new();
    for _ in 0..1000 {
        let d = r.decide(b"/", &none, &Tried::default(), NOW);
        assert_ne!(d, route(3, Outcome::NewSession));
    }
}

#[test]
fn retries_avoid_tried_servers() {
    use Outcome::*;
    run(&[
        Case {
            what: "retry away from the session's server is a failover",
            headers: &[("cookie", "JSESSIONID=A.n1")],
            tried: &["n1"],
            want: Want::NotIn(&["n1"], Failover),
            ..BASE
        },
        Case {
            what: "second retry avoids both",
            headers: &[("cookie", "JSESSIONID=A.n1")],
            setup: |c| c.srv("n1").redirect = Some(c.index("n2")),
            tried: &["n1", "n2"],
            want: Want::NotIn(&["n1", "n2"], Failover),
            ..BASE
        },
        Case {
            what: "retry of a new session",
            tried: &["n1", "n2", "n3"],
            want: Want::Route("n4", NewSession),
            ..BASE
        },
        Case {
            what: "retry of an orphan",
            headers: &[("cookie", "JSESSIONID=A.gone")],
            tried: &["n1", "n2", "n4"],
            want: Want::Route("n3", HashFallback),
            ..BASE
        },
        Case {
            what: "every server tried",
            headers: &[("cookie", "JSESSIONID=A.n1")],
            tried: &["n1", "n2", "n3", "n4"],
            want: Want::Reject(Reject::NoServer),
            ..BASE
        },
        Case {
            what: "sticky_force: a retry is refused",
            setup: |c| c.sticky_force = true,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            tried: &["n1"],
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
    ]);
}

#[test]
fn successive_retries_walk_distinct_servers() {
    let r = ClusterRouter::new(&four(), None);
    let h = cookie("JSESSIONID=A.n2");
    let mut tried = Tried::default();
    let mut seen = Vec::new();
    while let Decision::Route { server, .. } = r.decide(b"/", &h, &tried, NOW) {
        assert!(!seen.contains(&server), "{server} chosen twice");
        seen.push(server);
        tried.push(server);
    }
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[0], idx(&r, "n2"), "the session's server first");
}

#[test]
fn down_server_is_probed_once_after_recover_after() {
    let r = ClusterRouter::new(&four(), None);
    let h = cookie("JSESSIONID=A.n1");
    let n1 = idx(&r, "n1");
    r.servers()[n1].live.mark_down(NOW);
    let at = |now| r.decide(b"/", &h, &Tried::default(), now);
    assert!(matches!(
        at(NOW + 1),
        Decision::Route {
            outcome: Outcome::Failover,
            ..
        }
    ));
    assert!(matches!(
        at(NOW + RECOVER_MS - 1),
        Decision::Route {
            outcome: Outcome::Failover,
            ..
        }
    ));
    assert_eq!(
        at(NOW + RECOVER_MS),
        route(n1, Outcome::RouteHit),
        "the probe"
    );
    let after = at(NOW + RECOVER_MS + 1);
    assert!(
        matches!(after, Decision::Route { outcome: Outcome::Failover, server } if server != n1),
        "one probe per period: {after:?}"
    );
    assert_eq!(
        at(NOW + 2 * RECOVER_MS),
        route(n1, Outcome::RouteHit),
        "next period, next probe"
    );
    r.servers()[n1].live.mark_up();
    assert_eq!(at(NOW + 2 * RECOVER_MS + 1), route(n1, Outcome::RouteHit));
}

#[test]
fn websphere_clone_lists() {
    use Outcome::*;
    fn ws(c: &mut Cluster) {
        c.session_style = SessionStyle::Websphere;
        for (i, s) in c.servers.iter_mut().enumerate() {
            s.clone_id = Some(format!("c{}", i + 1));
        }
    }
    run(&[
        Case {
            what: "first clone",
            setup: ws,
            headers: &[("cookie", "JSESSIONID=0000ABCdef:c2:c3")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "routes are not clone ids",
            setup: ws,
            headers: &[("cookie", "JSESSIONID=0000ABCdef:n2")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "unknown first clone: the next one",
            setup: ws,
            headers: &[("cookie", "JSESSIONID=0000ABCdef:zz:c3")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "first clone down: the next clone in the list (its replica)",
            setup: ws,
            headers: &[("cookie", "JSESSIONID=0000ABCdef:c2:c3")],
            live: |r| mark_down(r, &["n2"]),
            want: Want::Route("n3", Failover),
            ..BASE
        },
        Case {
            what: "first clone draining still serves",
            setup: ws,
            headers: &[("cookie", "JSESSIONID=0000ABCdef:c2:c3")],
            live: |r| set_state(r, &["n2"], ServerState::Draining),
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "every listed clone down: failover elsewhere",
            setup: ws,
            headers: &[("cookie", "JSESSIONID=0000ABCdef:c2:c3")],
            live: |r| mark_down(r, &["n2", "n3"]),
            want: Want::NotIn(&["n2", "n3"], Failover),
            ..BASE
        },
        Case {
            what: "every listed clone down, sticky_force: 503",
            setup: |c| {
                ws(c);
                c.sticky_force = true;
            },
            headers: &[("cookie", "JSESSIONID=0000ABCdef:c2:c3")],
            live: |r| mark_down(r, &["n2", "n3"]),
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
        Case {
            what: "no clone known: hash fallback",
            setup: ws,
            headers: &[("cookie", "JSESSIONID=0000ABCdef:x:y")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "no separator: hash fallback",
            setup: ws,
            headers: &[("cookie", "JSESSIONID=0000ABCdef.c2")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "clone separator +",
            setup: |c| {
                ws(c);
                c.clone_separator = b'+';
            },
            headers: &[("cookie", "JSESSIONID=0000ABCdef+c4+c1")],
            want: Want::Route("n4", RouteHit),
            ..BASE
        },
        Case {
            what: "clone separator +: a colon is part of the id",
            setup: |c| {
                ws(c);
                c.clone_separator = b'+';
            },
            headers: &[("cookie", "JSESSIONID=0000ABCdef:c2+c4")],
            want: Want::Route("n4", RouteHit),
            ..BASE
        },
        Case {
            what: "path parameter, websphere style",
            setup: ws,
            path: "/app;jsessionid=0000ABCdef:c3?q",
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
    ]);
}

#[test]
fn domain_with_only_draining_members_still_serves_its_sessions() {
    // The ring walk gives up after a few dozen points when its `peek` says nothing can
    // match; peek used to require *active* while the match allowed *draining*, so in a
    // big cluster a small domain's draining server was usually never reached.
    let mut cfg = numbered(200);
    cfg.servers[7].domain = Some("east".into());
    cfg.servers[8].domain = Some("east".into());
    let r = ClusterRouter::new(&cfg, None);
    r.servers()[7].live.set_state(ServerState::Draining);
    r.servers()[8].live.set_state(ServerState::Stopped);
    for k in 0..200 {
        let h = cookie(&format!("JSESSIONID={k:032x}.east.gone"));
        assert_eq!(
            r.decide(b"/", &h, &Tried::default(), NOW),
            route(7, Outcome::DomainHit),
            "session {k}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Balance
// ---------------------------------------------------------------------------------------

#[test]
fn weights_1_2_4_share_new_sessions() {
    let mut cfg = cluster(&["a", "b", "c"]);
    for (s, w) in cfg.servers.iter_mut().zip([1, 2, 4]) {
        s.weight = w;
    }
    let r = ClusterRouter::new(&cfg, None);
    let none = HeaderMap::new();
    let mut counts = [0u32; 3];
    const N: u32 = 100_000;
    for _ in 0..N {
        match r.decide(b"/", &none, &Tried::default(), NOW) {
            Decision::Route {
                server,
                outcome: Outcome::NewSession,
            } => counts[server] += 1,
            other => panic!("{other:?}"),
        }
    }
    for (i, want) in [1.0 / 7.0, 2.0 / 7.0, 4.0 / 7.0].iter().enumerate() {
        let share = counts[i] as f64 / N as f64;
        assert!((share - want).abs() < 0.01, "server {i}: {share} vs {want}");
    }
}

#[test]
fn weights_skip_unavailable_servers_without_starving_the_rest() {
    let mut cfg = cluster(&["a", "b", "c"]);
    for (s, w) in cfg.servers.iter_mut().zip([1, 2, 4]) {
        s.weight = w;
    }
    let r = ClusterRouter::new(&cfg, None);
    r.servers()[2].live.mark_down(NOW - 1);
    let none = HeaderMap::new();
    let mut counts = [0u32; 3];
    for _ in 0..30_000 {
        if let Decision::Route { server, .. } = r.decide(b"/", &none, &Tried::default(), NOW) {
            counts[server] += 1;
        }
    }
    assert_eq!(counts[2], 0);
    assert!(counts[0] > 5_000 && counts[1] > 5_000, "{counts:?}");
}

#[test]
fn least_inflight_prefers_the_least_loaded() {
    let mut cfg = four();
    cfg.balance = Balance::LeastInflight;
    let r = ClusterRouter::new(&cfg, None);
    let load = |n: &str, k: usize| (0..k).for_each(|_| r.servers()[idx(&r, n)].live.start());
    load("n1", 5);
    load("n2", 3);
    load("n3", 1);
    load("n4", 7);
    let none = HeaderMap::new();
    let pick = || r.decide(b"/", &none, &Tried::default(), NOW);
    assert_eq!(pick(), route(idx(&r, "n3"), Outcome::NewSession));
    load("n3", 5); // n3 now has 6: n2 (3) is the least loaded
    assert_eq!(pick(), route(idx(&r, "n2"), Outcome::NewSession));
    set_state(&r, &["n2"], ServerState::Draining);
    assert_eq!(
        pick(),
        route(idx(&r, "n1"), Outcome::NewSession),
        "draining skipped"
    );
}

#[test]
fn least_inflight_weighs_load_and_spreads_ties() {
    let mut cfg = cluster(&["a", "b"]);
    cfg.balance = Balance::LeastInflight;
    cfg.servers[1].weight = 4;
    let r = ClusterRouter::new(&cfg, None);
    let none = HeaderMap::new();
    // a: 2 in flight at weight 1; b: 4 at weight 4 → b is relatively less loaded.
    (0..2).for_each(|_| r.servers()[0].live.start());
    (0..4).for_each(|_| r.servers()[1].live.start());
    assert_eq!(
        r.decide(b"/", &none, &Tried::default(), NOW),
        route(1, Outcome::NewSession)
    );
    // Idle equal servers: ties rotate instead of always picking the first.
    let mut cfg = cluster(&["a", "b", "c"]);
    cfg.balance = Balance::LeastInflight;
    let r = ClusterRouter::new(&cfg, None);
    let picked: std::collections::HashSet<_> = (0..6)
        .map(|_| format!("{:?}", r.decide(b"/", &none, &Tried::default(), NOW)))
        .collect();
    assert_eq!(picked.len(), 3, "{picked:?}");
}

// ---------------------------------------------------------------------------------------
// Consistent hash
// ---------------------------------------------------------------------------------------

/// A deterministic stream of Tomcat-looking session ids with an unknown route.
fn orphan_ids(count: usize) -> Vec<String> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..count)
        .map(|_| {
            // xorshift64*: enough spread, no dependency.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let a = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let b = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
            format!("{a:016X}{b:016X}.retired")
        })
        .collect()
}

/// The server name each orphaned session is hashed to.
fn hash_names(r: &ClusterRouter, ids: &[String]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            match r.decide(
                b"/",
                &cookie(&format!("JSESSIONID={id}")),
                &Tried::default(),
                NOW,
            ) {
                Decision::Route {
                    server,
                    outcome: Outcome::HashFallback,
                } => name(r, server).to_string(),
                other => panic!("{id}: {other:?}"),
            }
        })
        .collect()
}

#[test]
fn orphans_hash_the_same_across_calls_and_routers() {
    let a = ClusterRouter::new(&numbered(10), None);
    let b = ClusterRouter::new(&numbered(10), None);
    let ids = orphan_ids(50);
    let first = hash_names(&a, &ids);
    assert_eq!(
        first,
        hash_names(&b, &ids),
        "independently built routers agree"
    );
    let h = cookie(&format!("JSESSIONID={}", ids[0]));
    let want = a.decide(b"/", &h, &Tried::default(), NOW);
    for _ in 0..1000 {
        assert_eq!(a.decide(b"/", &h, &Tried::default(), NOW), want);
        assert_eq!(b.decide(b"/", &h, &Tried::default(), NOW), want);
    }
    // The whole cluster is used, not one or two servers.
    let spread: std::collections::HashSet<_> =
        hash_names(&a, &orphan_ids(2000)).into_iter().collect();
    assert_eq!(spread.len(), 10);
}

#[test]
fn removing_a_server_moves_only_its_sessions() {
    let ids = orphan_ids(10_000);
    let full = hash_names(&ClusterRouter::new(&numbered(10), None), &ids);
    let mut smaller = numbered(10);
    smaller.servers.remove(4);
    let without = hash_names(&ClusterRouter::new(&smaller, None), &ids);
    let mut moved = 0;
    for (before, after) in full.iter().zip(&without) {
        if before == "s4" {
            moved += 1;
        } else {
            assert_eq!(before, after, "a session not on s4 moved");
        }
    }
    // About a tenth of the sessions were on s4; a bad hash would show here.
    assert!((600..1400).contains(&moved), "{moved} sessions were on s4");
}

#[test]
fn marking_a_server_down_moves_only_its_sessions_to_where_removal_would() {
    let ids = orphan_ids(10_000);
    let r = ClusterRouter::new(&numbered(10), None);
    let before = hash_names(&r, &ids);
    r.servers()[4].live.mark_down(NOW - 1);
    let down = hash_names(&r, &ids);
    let mut smaller = numbered(10);
    smaller.servers.remove(4);
    let removed = hash_names(&ClusterRouter::new(&smaller, None), &ids);
    for i in 0..ids.len() {
        if before[i] != "s4" {
            assert_eq!(before[i], down[i], "a session not on s4 moved");
        }
        assert_eq!(
            down[i], removed[i],
            "down and removed agree, so instances agree"
        );
    }
    // Draining and stopped servers are left out the same way.
    r.servers()[4].live.mark_up();
    r.servers()[4].live.set_state(ServerState::Draining);
    assert_eq!(hash_names(&r, &ids), removed);
}

#[test]
fn hash_fallback_with_weights_and_a_thousand_servers() {
    // Large weighted ring: every orphan lands on an active server, deterministically.
    let mut cfg = numbered(1000);
    cfg.servers
        .iter_mut()
        .enumerate()
        .for_each(|(i, s)| s.weight = 1 + (i % 5) as u32);
    let r = ClusterRouter::new(&cfg, None);
    for i in (0..1000).step_by(2) {
        r.servers()[i].live.mark_down(NOW - 1);
    }
    for id in orphan_ids(500) {
        let h = cookie(&format!("JSESSIONID={id}"));
        match r.decide(b"/", &h, &Tried::default(), NOW) {
            Decision::Route {
                server,
                outcome: Outcome::HashFallback,
            } => assert_eq!(server % 2, 1),
            other => panic!("{other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Hostile input: never panics, degrades to a sane decision
// ---------------------------------------------------------------------------------------

/// (what, raw path, raw Cookie header values, expected outcome or `None` for a reject)
type BadInput<'a> = (&'a str, &'a [u8], &'a [&'a [u8]], Option<Outcome>);

fn decide_raw(r: &ClusterRouter, path: &[u8], cookies: &[&[u8]]) -> Decision {
    let mut h = HeaderMap::new();
    for c in cookies {
        h.append(
            COOKIE,
            HeaderValue::from_bytes(c).expect("valid header bytes"),
        );
    }
    r.decide(path, &h, &Tried::default(), NOW)
}

fn outcome(d: Decision) -> Option<Outcome> {
    match d {
        Decision::Route { outcome, .. } => Some(outcome),
        Decision::Reject(_) => None,
    }
}

#[test]
fn bad_input_never_panics() {
    let r = ClusterRouter::new(&four(), None);
    let long = format!("JSESSIONID={}.n1", "A".repeat(10 * 1024));
    let at_limit = format!("JSESSIONID={}.n1", "A".repeat(MAX_SESSION_ID_LEN - 3));
    let over_limit = format!("JSESSIONID={}.n1", "A".repeat(MAX_SESSION_ID_LEN - 2));
    let many: String = (0..5000)
        .map(|i| format!("c{i}=v{i}; "))
        .collect::<String>()
        + "JSESSIONID=Z.n3";
    let many_sessions: String = (0..3000)
        .map(|i| format!("JSESSIONID=S{i}.gone; "))
        .collect();
    let long_path = format!("/app;jsessionid={}.n2", "B".repeat(10 * 1024));
    use Outcome::*;
    let cases: &[BadInput] = &[
        (
            "empty ;jsessionid=",
            b"/app;jsessionid=",
            &[],
            Some(NewSession),
        ),
        (
            "empty ;jsessionid= before ?",
            b"/app;jsessionid=?a=b",
            &[],
            Some(NewSession),
        ),
        (
            "bare ;jsessionid",
            b"/app;jsessionid",
            &[],
            Some(NewSession),
        ),
        ("only semicolons", b";;;;;", &[], Some(NewSession)),
        ("empty path", b"", &[], Some(NewSession)),
        (
            "path param of dots",
            b"/;jsessionid=...",
            &[],
            Some(HashFallback),
        ),
        (
            "path param one dot",
            b"/;jsessionid=.",
            &[],
            Some(HashFallback),
        ),
        (
            "path param non-UTF-8 id, good route",
            b"/;jsessionid=\xff\xfe.n1",
            &[],
            Some(RouteHit),
        ),
        (
            "10 KB path parameter ignored",
            long_path.as_bytes(),
            &[],
            Some(NewSession),
        ),
        (
            "10 KB session id ignored",
            b"/",
            &[long.as_bytes()],
            Some(NewSession),
        ),
        (
            "session id at the limit used",
            b"/",
            &[at_limit.as_bytes()],
            Some(RouteHit),
        ),
        (
            "session id one over the limit ignored",
            b"/",
            &[over_limit.as_bytes()],
            Some(NewSession),
        ),
        (
            "10 KB id, then a good one",
            b"/",
            &[long.as_bytes(), b"JSESSIONID=B.n2"],
            Some(RouteHit),
        ),
        (
            "non-UTF-8 cookie bytes",
            b"/",
            &[b"JSESSIONID=\xc3\x28\xa0\xa1.\xff"],
            Some(HashFallback),
        ),
        (
            "non-UTF-8 route of a server's length",
            b"/",
            &[b"JSESSIONID=A.\xffn1"],
            Some(HashFallback),
        ),
        (
            "non-UTF-8 cookie name",
            b"/",
            &[b"\xffJSESSIONID=A.n1"],
            Some(NewSession),
        ),
        (
            "thousands of cookies",
            b"/",
            &[many.as_bytes()],
            Some(RouteHit),
        ),
        (
            "thousands of orphan sessions",
            b"/",
            &[many_sessions.as_bytes()],
            Some(HashFallback),
        ),
        ("only dots", b"/", &[b"JSESSIONID=...."], Some(HashFallback)),
        (
            "only quotes",
            b"/",
            &[b"JSESSIONID=\"\"\"\""],
            Some(HashFallback),
        ),
        ("one quote", b"/", &[b"JSESSIONID=\""], Some(HashFallback)),
        (
            "empty quotes",
            b"/",
            &[b"JSESSIONID=\"\""],
            Some(NewSession),
        ),
        ("empty value", b"/", &[b"JSESSIONID="], Some(NewSession)),
        (
            "quoted dot",
            b"/",
            &[b"JSESSIONID=\".\""],
            Some(HashFallback),
        ),
        (
            "trailing dot",
            b"/",
            &[b"JSESSIONID=ABC."],
            Some(HashFallback),
        ),
        (
            "leading dot route",
            b"/",
            &[b"JSESSIONID=.n1"],
            Some(RouteHit),
        ),
        (
            "dot then dot",
            b"/",
            &[b"JSESSIONID=A..n1"],
            Some(HashFallback),
        ),
        ("no equals", b"/", &[b"JSESSIONID"], Some(NewSession)),
        (
            "equals soup",
            b"/",
            &[b";=;==;JSESSIONID==;="],
            Some(HashFallback),
        ),
        (
            "tabs and spaces",
            b"/",
            &[b" \t JSESSIONID \t = \t A.n4 \t ;"],
            Some(RouteHit),
        ),
        ("empty header", b"/", &[b""], Some(NewSession)),
        (
            "many empty headers",
            b"/",
            &[b"", b";", b"; ;"],
            Some(NewSession),
        ),
    ];
    for (what, path, cookies, want) in cases {
        let got = decide_raw(&r, path, cookies);
        assert_eq!(outcome(got), *want, "{what}: {got:?}");
    }
}

#[test]
fn bad_input_on_a_websphere_cluster_never_panics() {
    let mut cfg = four();
    cfg.session_style = SessionStyle::Websphere;
    cfg.servers
        .iter_mut()
        .enumerate()
        .for_each(|(i, s)| s.clone_id = Some(format!("c{i}")));
    let r = ClusterRouter::new(&cfg, None);
    let inputs: &[&[u8]] = &[
        b"JSESSIONID=:",
        b"JSESSIONID=::::",
        b"JSESSIONID=0000:",
        b"JSESSIONID=0000::c1",
        b"JSESSIONID=:c1",
        b"JSESSIONID=\xff:\xfe:c9",
        b"JSESSIONID=\"0000A:c2\"",
    ];
    for input in inputs {
        let got = decide_raw(&r, b"/", &[input]);
        assert!(
            matches!(got, Decision::Route { .. }),
            "{}: {got:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn random_bytes_never_panic() {
    let r = ClusterRouter::new(&four(), None);
    let mut x: u32 = 12345;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    // Bytes biased towards the ones the parsers care about.
    let alphabet = b"JSESSIONID=;.\"  \t:+n1234?/#\xff\x80";
    for _ in 0..5000 {
        let len = (next() % 80) as usize;
        let mut cookie_bytes = b"JSESSIONID=".to_vec();
        let mut path = b"/a;jsessionid=".to_vec();
        for _ in 0..len {
            cookie_bytes.push(alphabet[next() as usize % alphabet.len()]);
            path.push(alphabet[next() as usize % alphabet.len()]);
        }
        if let Ok(v) = HeaderValue::from_bytes(&cookie_bytes) {
            let mut h = HeaderMap::new();
            h.append(COOKIE, v);
            let _ = r.decide(&path, &h, &Tried::default(), NOW);
            let _ = r.decide(b"/", &h, &Tried::default(), NOW);
        }
    }
}

/// A reload keeps each server's live state by name, so a down server stays down.
#[test]
fn reload_keeps_live_state_by_name() {
    let old = ClusterRouter::new(&four(), None);
    old.servers()[idx(&old, "n2")].live.mark_down(NOW - 1);
    let mut cfg = four();
    cfg.servers.remove(0);
    let new = ClusterRouter::new(&cfg, Some(&old));
    let by_name: Map<&str, bool> = new
        .servers()
        .iter()
        .map(|s| (s.config.name.as_str(), s.live.health() == Health::Up))
        .collect();
    assert!(!by_name["n2"]);
    assert!(by_name["n3"] && by_name["n4"]);
    let h = cookie("JSESSIONID=A.n2");
    assert!(matches!(
        new.decide(b"/", &h, &Tried::default(), NOW),
        Decision::Route {
            outcome: Outcome::Failover,
            ..
        }
    ));
}
