//! Which route wins: table tests of the precedence rules.

use super::*;
use crate::config::{Route, RouteAction};

fn route(host: Option<&str>, path: &str, cluster: usize) -> Route {
    Route {
        name: format!("{host:?}{path}"),
        host: host.map(str::to_string),
        path: path.into(),
        action: RouteAction::Cluster(cluster),
        exclude: false,
        disabled: false,
        plugins: vec![],
        max_request_body: None,
        error_pages: None,
        compress: None,
    }
}

#[test]
fn mod_jk_order_counts_slashes_then_length_exact_or_not() {
    let mut routes = vec![
        route(None, "/ab/*", 0),       // 0: two '/'
        route(None, "/*.jspx", 1),     // 1: one '/', longer than /ab/*
        route(None, "/app/login", 2),  // 2: exact
        route(None, "/app/login*", 3), // 3: same '/', longer: wins over the exact one
        route(None, "/s/*", 4),        // 4: a tie with 5: the file's order
        route(None, "/s/*", 5),        // 5
        route(None, "/*", 6),          // 6
        route(None, "/deep/er/*", 7),  // 7
        route(None, "/*", 7),          // 8: exclusion of cluster 7: no fall-back
    ];
    routes[8].exclude = true;
    let t = RouteTable::new(&routes, RouteOrder::ModJk);
    for (path, want) in [
        ("/ab/x.jspx", Found::Route(0)),
        ("/c/y.jspx", Found::Route(1)),
        ("/app/login", Found::Route(3)),
        ("/app/logi", Found::Route(6)),
        ("/s/x", Found::Route(4)),
        ("/deep/er/x", Found::Excluded(7)),
        ("/deep/x", Found::Route(6)),
    ] {
        assert_eq!(t.find(b"h", 80, path.as_bytes()), want, "{path}");
    }
    // The same routes in tether's own order: the exact path, then literal characters.
    let t = RouteTable::new(&routes, RouteOrder::Specific);
    assert_eq!(t.find(b"h", 80, b"/app/login"), Found::Route(2));
    assert_eq!(t.find(b"h", 80, b"/ab/x.jspx"), Found::Route(1));
}

#[test]
fn specific_precedence_with_hosts() {
    let mut routes = vec![
        route(None, "/*", 0),                           // 0: catch-all
        route(None, "/shop/*", 1),                      // 1
        route(None, "/shop/cart/*", 2),                 // 2: longer
        route(None, "/shop/login", 3),                  // 3: exact
        route(Some("admin.example.com"), "/shop/*", 4), // 4: host-specific
        route(Some("*.example.org"), "/*", 5),          // 5
        route(Some("*:8443"), "/secure/*", 6),          // 6: any host, port 8443
        route(None, "/shop/*.gif", 1),                  // 7: exclusion for cluster 1
        route(None, "/old/*", 7),                       // 8: disabled
        route(None, "/a?c", 8),                         // 9
    ];
    routes[7].exclude = true;
    routes[8].disabled = true;
    let t = RouteTable::new(&routes, RouteOrder::Specific);
    for (host, port, path, want) in [
        ("www.example.com", 80, "/x", Found::Route(0)),
        ("www.example.com", 80, "/shop/a", Found::Route(1)),
        ("www.example.com", 80, "/shop/cart/1", Found::Route(2)),
        ("www.example.com", 80, "/shop/login", Found::Route(3)),
        ("ADMIN.example.com", 80, "/shop/a", Found::Route(4)),
        ("admin.example.com", 80, "/shop/cart/1", Found::Route(2)),
        ("a.example.org", 80, "/x", Found::Route(5)),
        ("example.org", 80, "/x", Found::Route(0)),
        ("h", 8443, "/secure/x", Found::Route(6)),
        ("h", 443, "/secure/x", Found::Route(0)),
        ("h", 80, "/shop/img/a.gif", Found::Excluded(1)),
        ("h", 80, "/shop/cart/a.gif", Found::Route(2)),
        ("h", 80, "/old/x", Found::Route(0)),
        ("h", 80, "/abc", Found::Route(9)),
        ("h", 80, "/shop/login;jsessionid=ABC.n1", Found::Route(3)),
        ("h", 80, "/shop;x=1/login", Found::Route(3)),
    ] {
        assert_eq!(
            t.find(host.as_bytes(), port, path.as_bytes()),
            want,
            "{host}:{port}{path}"
        );
    }
    let empty = RouteTable::new(&[], RouteOrder::Specific);
    assert_eq!(empty.find(b"h", 80, b"/"), Found::None);
    let only = RouteTable::new(&[route(None, "/shop/*", 0)], RouteOrder::Specific);
    assert_eq!(only.find(b"h", 80, b"/other"), Found::None);
}

#[test]
fn the_file_order_breaks_ties() {
    let routes = vec![route(None, "/a/*", 0), route(None, "/a/*", 1)];
    let t = RouteTable::new(&routes, RouteOrder::Specific);
    assert_eq!(t.find(b"h", 80, b"/a/x"), Found::Route(0));
}

#[test]
fn indexed_and_generic_wildcards_compete_by_the_same_rule() {
    // `/shop*/cart/*` is generic (its first segment has a wildcard) but has more literal
    // characters than the indexed `/shop/*`: it wins where both match.
    let routes = vec![route(None, "/shop/*", 0), route(None, "/shop*/cart/*", 1)];
    let t = RouteTable::new(&routes, RouteOrder::Specific);
    assert_eq!(t.find(b"h", 80, b"/shop/cart/x"), Found::Route(1));
    assert_eq!(t.find(b"h", 80, b"/shop/other"), Found::Route(0));
    assert_eq!(t.find(b"h", 80, b"/shopping/cart/x"), Found::Route(1));
    assert_eq!(t.find(b"h", 80, b"/shopping/x"), Found::None);
}
