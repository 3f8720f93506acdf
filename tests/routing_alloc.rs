//! `decide` must not touch the heap: a counting global allocator checks it on 1,000 servers.

use http::header::{HeaderMap, HeaderValue, COOKIE};
use tether::config::{Cluster, Server};
use tether::routing::{ClusterRouter, Decision, Outcome, Tried};

#[path = "common/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// Heap allocations `f` makes on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = counting::so_far();
    let out = f();
    (counting::so_far() - before, out)
}

/// A 1,000-server Tomcat cluster, s0..s999, built from YAML like a real config.
fn router() -> ClusterRouter {
    let mut yaml = String::from(
        "listeners:\n  - { name: web, address: \"127.0.0.1:8080\", cluster: big }\nclusters:\n  - name: big\n    servers:\n",
    );
    for i in 0..1000 {
        yaml += &format!(
            "      - {{ name: s{i}, address: \"10.0.{}.{}:8080\" }}\n",
            i / 250,
            i % 250 + 1
        );
    }
    let config = tether::config::parse(&yaml, "alloc-test").expect("valid config");
    let cluster: &Cluster = &config.clusters[0];
    assert_eq!(cluster.servers.len(), 1000);
    assert!(cluster.servers.iter().all(|s: &Server| s.route == s.name));
    ClusterRouter::new(cluster, None)
}

fn cookie(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(COOKIE, HeaderValue::from_str(value).unwrap());
    h
}

/// Decides once to warm up (lazy statics, first-use paths), then counts a second decision.
fn measure(r: &ClusterRouter, path: &[u8], headers: &HeaderMap) -> (u64, Decision) {
    let tried = Tried::default();
    let now = tether::routing::now_ms();
    r.decide(path, headers, &tried, now);
    allocations(|| r.decide(path, headers, &tried, now))
}

/// (what, request path, request headers, the decision it must produce)
type Case = (&'static str, &'static [u8], HeaderMap, fn(Decision) -> bool);

#[test]
fn decide_does_not_allocate() {
    let r = router();
    let s500 = r
        .servers()
        .iter()
        .position(|s| s.config.name == "s500")
        .unwrap();
    let sid = "0123456789abcdef0123456789ABCDEF";
    let cases: &[Case] = &[
        (
            "sticky hit via cookie",
            b"/app/cart",
            cookie(&format!("theme=dark; JSESSIONID={sid}.s500; _ga=GA1.2.3")),
            |d| {
                matches!(
                    d,
                    Decision::Route {
                        outcome: Outcome::RouteHit,
                        ..
                    }
                )
            },
        ),
        (
            "sticky hit via ;jsessionid=",
            b"/app/cart;jsessionid=0123456789abcdef0123456789ABCDEF.s500?item=7",
            HeaderMap::new(),
            |d| {
                matches!(
                    d,
                    Decision::Route {
                        outcome: Outcome::RouteHit,
                        ..
                    }
                )
            },
        ),
        (
            "new session",
            b"/app/",
            cookie("theme=dark; _ga=GA1.2.3"),
            |d| {
                matches!(
                    d,
                    Decision::Route {
                        outcome: Outcome::NewSession,
                        ..
                    }
                )
            },
        ),
        (
            "orphaned session (hash fallback)",
            b"/app/cart",
            cookie(&format!("JSESSIONID={sid}.retired")),
            |d| {
                matches!(
                    d,
                    Decision::Route {
                        outcome: Outcome::HashFallback,
                        ..
                    }
                )
            },
        ),
    ];
    let mut report = Vec::new();
    for (what, path, headers, expect) in cases {
        let (n, decision) = measure(&r, path, headers);
        assert!(expect(decision), "{what}: {decision:?}");
        report.push(format!("{what}: {n} allocation(s)"));
    }
    // The sticky hit is checked on the right server, too.
    let (_, hit) = measure(&r, b"/", &cookie(&format!("JSESSIONID={sid}.s500")));
    assert_eq!(
        hit,
        Decision::Route {
            server: s500,
            outcome: Outcome::RouteHit
        }
    );
    println!("{}", report.join("\n"));
    assert!(
        report.iter().all(|l| l.ends_with(": 0 allocation(s)")),
        "{report:#?}"
    );
}

#[test]
fn failover_does_not_allocate() {
    let r = router();
    let s500 = r
        .servers()
        .iter()
        .position(|s| s.config.name == "s500")
        .unwrap();
    r.servers()[s500].live.mark_down(tether::routing::now_ms());
    let (n, d) = measure(&r, b"/", &cookie("JSESSIONID=0123456789abcdef.s500"));
    assert!(
        matches!(d, Decision::Route { outcome: Outcome::Failover, server } if server != s500),
        "{d:?}"
    );
    assert_eq!(n, 0, "failover allocated");
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the guard: a zero above means nothing only if a real allocation shows up here.
    let (n, v) = allocations(|| std::hint::black_box(vec![1u8; 64]));
    assert_eq!(v.len(), 64);
    assert!(n >= 1);
}
