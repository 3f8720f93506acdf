//! Domains (mod_jk's `domain`), redirects to a hot standby, and `sticky_force`.

use super::*;

#[test]
fn a_session_route_may_be_a_domain_name() {
    // mod_jk: "the domain name is used as session route" when no server has it as route.
    use Outcome::*;
    let east: fn(&mut Cluster) = |c| {
        c.srv("n2").domain = Some("east".into());
        c.srv("n3").domain = Some("east".into());
    };
    run(&[
        Case {
            what: "route equal to a domain name",
            setup: east,
            headers: &[("cookie", "JSESSIONID=A.east")],
            want: Want::OneOf(&["n2", "n3"], DomainHit),
            ..BASE
        },
        Case {
            what: "route equal to a domain name that has a dot",
            setup: |c| {
                c.srv("n2").domain = Some("east.dc1".into());
                c.srv("n3").domain = Some("east.dc1".into());
            },
            headers: &[("cookie", "JSESSIONID=A.east.dc1")],
            want: Want::OneOf(&["n2", "n3"], DomainHit),
            ..BASE
        },
        Case {
            what: "dotted route: the part before the dot is still a domain",
            setup: east,
            headers: &[("cookie", "JSESSIONID=A.east.n1")],
            want: Want::OneOf(&["n2", "n3"], DomainHit),
            ..BASE
        },
        Case {
            what: "a dotted domain name is not matched by its first part",
            setup: |c| c.srv("n2").domain = Some("east.dc1".into()),
            headers: &[("cookie", "JSESSIONID=A.east")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "route equal to a domain name: skips a down member",
            setup: east,
            headers: &[("cookie", "JSESSIONID=A.east")],
            live: |r| mark_down(r, &["n2"]),
            want: Want::Route("n3", DomainHit),
            ..BASE
        },
        Case {
            what: "route equal to a domain name: whole domain down fails over",
            setup: east,
            headers: &[("cookie", "JSESSIONID=A.east")],
            live: |r| mark_down(r, &["n2", "n3"]),
            want: Want::NotIn(&["n2", "n3"], Failover),
            ..BASE
        },
        Case {
            what: "route equal to a domain name, sticky_force: whole domain down answers 503",
            setup: |c| {
                c.srv("n2").domain = Some("east".into());
                c.sticky_force = true;
            },
            headers: &[("cookie", "JSESSIONID=A.east")],
            live: |r| mark_down(r, &["n2"]),
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
        Case {
            what: "a server's route beats a domain of the same name",
            setup: |c| c.srv("n2").domain = Some("n1".into()),
            headers: &[("cookie", "JSESSIONID=A.n1")],
            want: Want::Route("n1", RouteHit),
            ..BASE
        },
        Case {
            what: "an empty route is no domain, even an empty one",
            setup: |c| c.srv("n2").domain = Some(String::new()),
            headers: &[("cookie", "JSESSIONID=A.")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
    ]);
}

#[test]
fn a_redirect_is_a_hot_standby_even_when_draining() {
    // mod_jk: the redirect worker is "used even if being disabled, thus offering hot
    // standby"; a stopped or failed one is not.
    use Outcome::*;
    use ServerState::*;
    let to_n3: fn(&mut Cluster) = |c| c.srv("n1").redirect = Some(c.index("n3"));
    run(&[
        Case {
            what: "down server: its draining redirect takes over",
            setup: to_n3,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| {
                mark_down(r, &["n1"]);
                set_state(r, &["n3"], Draining);
            },
            want: Want::Route("n3", Failover),
            ..BASE
        },
        Case {
            what: "stopped server: its draining redirect takes over",
            setup: to_n3,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| {
                set_state(r, &["n1"], Stopped);
                set_state(r, &["n3"], Draining);
            },
            want: Want::Route("n3", Failover),
            ..BASE
        },
        Case {
            what: "draining redirect beats the server's domain",
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
            want: Want::Route("n3", Failover),
            ..BASE
        },
        Case {
            what: "stopped redirect: not used, the domain takes over",
            setup: |c| {
                c.srv("n1").redirect = Some(c.index("n3"));
                c.srv("n1").domain = Some("d".into());
                c.srv("n2").domain = Some("d".into());
            },
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| {
                mark_down(r, &["n1"]);
                set_state(r, &["n3"], Stopped);
            },
            want: Want::Route("n2", Failover),
            ..BASE
        },
        Case {
            what: "stopped redirect, no domain: hash among the rest",
            setup: to_n3,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| {
                mark_down(r, &["n1"]);
                set_state(r, &["n3"], Stopped);
            },
            want: Want::NotIn(&["n1", "n3"], Failover),
            ..BASE
        },
        Case {
            what: "down redirect: not used",
            setup: to_n3,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| mark_down(r, &["n1", "n3"]),
            want: Want::NotIn(&["n1", "n3"], Failover),
            ..BASE
        },
        Case {
            what: "draining redirect already tried: not used again",
            setup: to_n3,
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| {
                mark_down(r, &["n1"]);
                set_state(r, &["n3"], Draining);
            },
            tried: &["n3"],
            want: Want::NotIn(&["n1", "n3"], Failover),
            ..BASE
        },
    ]);
}

#[test]
fn a_domain_takes_sessions_on_active_members_only() {
    // mod_jk picks a domain member among usable (active, not disabled) workers; a
    // draining server takes only the sessions that name it.
    use Outcome::*;
    use ServerState::*;
    run(&[
        Case {
            what: "domain route: a draining member takes none",
            setup: |c| c.srv("n2").domain = Some("east".into()),
            headers: &[("cookie", "JSESSIONID=A.east.x")],
            live: |r| set_state(r, &["n2"], Draining),
            want: Want::NotIn(&["n2"], Failover),
            ..BASE
        },
        Case {
            what: "route equal to a domain name: a draining member takes none",
            setup: |c| c.srv("n2").domain = Some("east".into()),
            headers: &[("cookie", "JSESSIONID=A.east")],
            live: |r| set_state(r, &["n2"], Draining),
            want: Want::NotIn(&["n2"], Failover),
            ..BASE
        },
        Case {
            what: "domain route: the active member, not the draining one",
            setup: |c| {
                c.srv("n2").domain = Some("east".into());
                c.srv("n3").domain = Some("east".into());
            },
            headers: &[("cookie", "JSESSIONID=A.east")],
            live: |r| set_state(r, &["n2"], Draining),
            want: Want::Route("n3", DomainHit),
            ..BASE
        },
        Case {
            what: "domain route, sticky_force: only draining members answers 503",
            setup: |c| {
                c.srv("n2").domain = Some("east".into());
                c.sticky_force = true;
            },
            headers: &[("cookie", "JSESSIONID=A.east")],
            live: |r| set_state(r, &["n2"], Draining),
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
        Case {
            what: "a draining domain member still takes a session naming it",
            setup: |c| c.srv("n2").domain = Some("east".into()),
            headers: &[("cookie", "JSESSIONID=A.n2")],
            live: |r| set_state(r, &["n2"], Draining),
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "failover inside the domain skips a draining member",
            setup: |c| {
                c.srv("n1").domain = Some("d".into());
                c.srv("n2").domain = Some("d".into());
                c.srv("n3").domain = Some("d".into());
            },
            headers: &[("cookie", "JSESSIONID=A.n1")],
            live: |r| {
                mark_down(r, &["n1"]);
                set_state(r, &["n2"], Draining);
            },
            want: Want::Route("n3", Failover),
            ..BASE
        },
    ]);
}

#[test]
fn domain_sessions_reach_its_one_active_member_in_a_big_cluster() {
    // Every session of the domain must find its one active member, whatever its hash:
    // the ring walk gives up after a few dozen points when its `peek` says nothing can
    // match, so `peek` and the match must agree (both: active and up).
    let mut cfg = numbered(200);
    for i in [7, 8, 9] {
        cfg.servers[i].domain = Some("east".into());
    }
    let r = ClusterRouter::new(&cfg, None);
    r.servers()[7].live.set_state(ServerState::Draining);
    r.servers()[9].live.set_state(ServerState::Stopped);
    for k in 0..200 {
        let token = if k % 2 == 0 { "east" } else { "east.gone" };
        let h = cookie(&format!("JSESSIONID={k:032x}.{token}"));
        assert_eq!(
            r.decide(b"/", &h, &Tried::default(), NOW),
            route(8, Outcome::DomainHit),
            "session {k}"
        );
    }
    // With no active member left, the domain's sessions fail over, never to the
    // draining member.
    r.servers()[8].live.set_state(ServerState::Draining);
    for k in 0..200 {
        let h = cookie(&format!("JSESSIONID={k:032x}.east"));
        match r.decide(b"/", &h, &Tried::default(), NOW) {
            Decision::Route {
                server,
                outcome: Outcome::Failover,
            } => assert!(![7, 8, 9].contains(&server), "session {k} on {server}"),
            other => panic!("session {k}: {other:?}"),
        }
    }
}

#[test]
fn sticky_force_refuses_a_session_it_cannot_place() {
    // mod_jk's sticky_session_force: a request with a session id that no server can take
    // gets an error, also when the route names nothing; it is never balanced.
    use Outcome::*;
    let force: fn(&mut Cluster) = |c| c.sticky_force = true;
    run(&[
        Case {
            what: "sticky_force: a route naming no server and no domain answers 503",
            setup: force,
            headers: &[("cookie", "JSESSIONID=A.gone")],
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
        Case {
            what: "sticky_force: a session id without a route answers 503",
            setup: force,
            headers: &[("cookie", "JSESSIONID=ABCDEF")],
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
        Case {
            what: "sticky_force: an unknown route in the path answers 503",
            setup: force,
            path: "/app;jsessionid=A.gone",
            want: Want::Reject(Reject::StickyForce),
            ..BASE
        },
        Case {
            what: "sticky_force: a later cookie naming a usable server still wins",
            setup: force,
            headers: &[("cookie", "JSESSIONID=A.gone; JSESSIONID=B.n2")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "sticky_force: a later cookie naming a domain still wins",
            setup: |c| {
                c.sticky_force = true;
                c.srv("n3").domain = Some("east".into());
            },
            headers: &[("cookie", "JSESSIONID=A.gone; JSESSIONID=B.east")],
            want: Want::Route("n3", DomainHit),
            ..BASE
        },
        Case {
            what: "sticky_force: no session id is a new session",
            setup: force,
            want: Want::NotIn(&[], NewSession),
            ..BASE
        },
        Case {
            what: "without sticky_force a route naming nothing hashes",
            headers: &[("cookie", "JSESSIONID=A.gone")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "sticky_force, websphere: an unknown clone or partition still hashes",
            setup: |c| {
                c.sticky_force = true;
                c.session_style = SessionStyle::Websphere;
                for (i, s) in c.servers.iter_mut().enumerate() {
                    s.clone_id = Some(format!("c{}", i + 1));
                }
            },
            headers: &[("cookie", "JSESSIONID=0000ABCdef:x:y")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
    ]);
    // A routing plugin's server does not take an unplaceable session either; it still
    // takes a request without one.
    let mut cfg = four();
    force(&mut cfg);
    let r = ClusterRouter::new(&cfg, None);
    let n4 = idx(&r, "n4");
    let orphan = cookie("JSESSIONID=A.gone");
    assert_eq!(
        r.decide_with(b"/", &orphan, &Tried::default(), NOW, Some(n4)),
        Decision::Reject(Reject::StickyForce)
    );
    assert_eq!(
        r.decide_with(b"/", &HeaderMap::new(), &Tried::default(), NOW, Some(n4)),
        route(n4, NewSession)
    );
}
