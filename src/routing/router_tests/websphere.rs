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

/// A four-clone WebSphere cluster (c1..c4 on n1..n4) with a table of `max` partitions.
fn websphere(max: usize) -> ClusterRouter {
    let mut cfg = four();
    cfg.session_style = SessionStyle::Websphere;
    cfg.partition_table_max = max;
    for (i, s) in cfg.servers.iter_mut().enumerate() {
        s.clone_id = Some(format!("c{}", i + 1));
    }
    ClusterRouter::new(&cfg, None)
}

/// One `$WSPT` value of 50 junk partitions, all claimed by c4.
fn junk(n: u32) -> String {
    (n * 50..n * 50 + 50)
        .map(|i| format!("junk{i}=c4"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `$WSPT` poisoning (hardening item 10): a server fills the table with partitions no
/// request uses. A real partition is still learned, routed, and kept through more junk.
#[test]
fn junk_partitions_never_lock_out_a_partition_requests_use() {
    let r = websphere(200);
    let t = r.partitions().unwrap();
    for n in 0..4 {
        r.learn_wspt(junk(n).as_bytes());
    }
    assert_eq!(t.len(), 200, "full of junk");

    let l = r.learn_wspt(b"7329011=c2");
    assert_eq!((l.changed, l.full), (1, 0), "a full table makes room");
    let session = cookie("JSESSIONID=0000A2MB4IJozU_VM8IffsMNfdR:7329011");
    let decide = || r.decide(b"/app", &session, &Tried::default(), NOW);
    assert_eq!(decide(), route(idx(&r, "n2"), Outcome::PartitionHit));

    // Twenty more junk responses turn the table over five times; the partition requests
    // use stays.
    for n in 4..24 {
        r.learn_wspt(junk(n).as_bytes());
        assert_eq!(decide(), route(idx(&r, "n2"), Outcome::PartitionHit), "{n}");
    }
    assert_eq!(t.len(), 200);
    assert!(t.evicted() >= 1_000);
    assert_eq!(r.partition_owner(b"7329011"), Some("c2"));
}
