//! Server states and health: draining, stopped, down, failover, backups, retries and
//! recovery probes. Domains, redirects and sticky_force are in `domains.rs`.

use super::*;

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
fn explain_names_the_session_and_claims_nothing() {
    let r = ClusterRouter::new(&four(), None);
    let n1 = idx(&r, "n1");
    // A stale cookie of a server no longer there, then the live session: the live one
    // decides, and is the id explained.
    let h = cookie("JSESSIONID=OLD.gone; JSESSIONID=ABC.n1");
    let e = r.explain(b"/", &h, NOW);
    assert_eq!(e.session_id.as_deref(), Some(&b"ABC.n1"[..]));
    assert_eq!(e.token.as_deref(), Some(&b"n1"[..]));
    assert_eq!(e.decision, route(n1, Outcome::RouteHit));
    // Only the stale one: it is the id, and it is hashed.
    let e = r.explain(b"/", &cookie("JSESSIONID=OLD.gone"), NOW);
    assert_eq!(e.token.as_deref(), Some(&b"gone"[..]));
    assert!(matches!(
        e.decision,
        Decision::Route {
            outcome: Outcome::HashFallback,
            ..
        }
    ));
    // No session: where the next new session goes, without taking the turn.
    let none = HeaderMap::new();
    let first = r.explain(b"/", &none, NOW);
    assert_eq!(first.session_id, None);
    assert_eq!(
        r.explain(b"/", &none, NOW),
        first,
        "the round robin did not move"
    );
    assert_eq!(
        r.decide(b"/", &none, &Tried::default(), NOW),
        first.decision
    );
    // A server due its recovery probe: explain says it would be probed, and leaves the
    // probe to the request that is sent.
    r.servers()[n1].live.mark_down(NOW);
    let h = cookie("JSESSIONID=ABC.n1");
    let due = NOW + RECOVER_MS;
    for _ in 0..3 {
        assert_eq!(
            r.explain(b"/", &h, due).decision,
            route(n1, Outcome::RouteHit)
        );
    }
    let sent = r.decide(b"/", &h, &Tried::default(), due);
    assert_eq!(
        sent,
        route(n1, Outcome::RouteHit),
        "the probe was still there"
    );
}
