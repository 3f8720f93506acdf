//! WebSphere clone lists: the clone ids in a session id and how they pick a server.

use super::*;

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
