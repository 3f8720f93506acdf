//! Criterion benchmarks of the whole routing decision, cookie parsing included.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use http::header::{HeaderMap, HeaderValue, COOKIE};
use tether::routing::{cookie_values, ClusterRouter, Tried};
use tether::routing::{Decision, Outcome};

/// A 32-hex Tomcat session id; the route is appended per cluster size.
const SID: &str = "0123456789ABCDEF0123456789ABCDEF";
/// Cookies a browser sends alongside the session cookie.
const OTHER_COOKIES_BEFORE: &str = "_ga=GA1.2.1234567890.1700000000; theme=dark; lang=en-GB";
const OTHER_COOKIES_AFTER: &str = "consent=yes; _gid=GA1.2.987654321.1700000000";

/// A sticky Tomcat cluster of `n` servers s0..s{n-1}, built from YAML like a real config.
fn router(n: usize) -> ClusterRouter {
    let mut yaml = String::from(
        "listeners:\n  - { name: web, address: \"127.0.0.1:8080\", cluster: c }\n\
         clusters:\n  - name: c\n    servers:\n",
    );
    for i in 0..n {
        yaml += &format!(
            "      - {{ name: s{i}, address: \"10.0.{}.{}:8080\" }}\n",
            i / 250,
            i % 250 + 1
        );
    }
    let config = tether::config::parse(&yaml, "bench").expect("valid config");
    ClusterRouter::new(&config.clusters[0], None)
}

/// A realistic Cookie header carrying `JSESSIONID={sid}`.
fn cookie_header(sid: &str) -> HeaderMap {
    let value = format!("{OTHER_COOKIES_BEFORE}; JSESSIONID={sid}; {OTHER_COOKIES_AFTER}");
    let mut h = HeaderMap::new();
    h.insert(COOKIE, HeaderValue::from_str(&value).unwrap());
    h
}

/// One benchmark case: a request and the outcome it must get (checked once up front, so a
/// bench never measures the wrong path).
struct Request {
    name: &'static str,
    path: Vec<u8>,
    headers: HeaderMap,
    outcome: Outcome,
}

fn requests(n: usize) -> Vec<Request> {
    // The middle server, so a linear scan would show up as a cost at 1,000 servers.
    let sticky = format!("{SID}.s{}", n / 2);
    let no_session = {
        let mut h = HeaderMap::new();
        let value = format!("{OTHER_COOKIES_BEFORE}; {OTHER_COOKIES_AFTER}");
        h.insert(COOKIE, HeaderValue::from_str(&value).unwrap());
        h
    };
    vec![
        Request {
            name: "sticky_cookie",
            path: b"/shop/cart/checkout?step=2".to_vec(),
            headers: cookie_header(&sticky),
            outcome: Outcome::RouteHit,
        },
        Request {
            name: "sticky_path_param",
            path: format!("/shop/cart/checkout;jsessionid={sticky}?step=2").into_bytes(),
            headers: no_session.clone(),
            outcome: Outcome::RouteHit,
        },
        Request {
            name: "new_session",
            path: b"/shop/".to_vec(),
            headers: no_session,
            outcome: Outcome::NewSession,
        },
        Request {
            name: "orphan_hash",
            path: b"/shop/cart/checkout?step=2".to_vec(),
            headers: cookie_header(&format!("{SID}.retired")),
            outcome: Outcome::HashFallback,
        },
    ]
}

fn decide(c: &mut Criterion) {
    let now = tether::routing::now_ms();
    let tried = Tried::default();
    for n in [3, 100, 1000] {
        let r = router(n);
        let mut group = c.benchmark_group(format!("decide/{n}_servers"));
        for req in requests(n) {
            let got = r.decide(&req.path, &req.headers, &tried, now);
            assert!(
                matches!(got, Decision::Route { outcome, .. } if outcome == req.outcome),
                "{}: {got:?}",
                req.name
            );
            group.bench_function(BenchmarkId::from_parameter(req.name), |b| {
                b.iter(|| r.decide(black_box(&req.path), black_box(&req.headers), &tried, now))
            });
        }
        group.finish();
    }
}

/// Baseline: finding the session cookie in the same header, without any routing.
fn cookie_parsing(c: &mut Criterion) {
    let h = cookie_header(&format!("{SID}.s500"));
    let value = h.get(COOKIE).unwrap().as_bytes();
    c.bench_function("baseline/cookie_values", |b| {
        b.iter(|| cookie_values(black_box(value), b"JSESSIONID").next())
    });
}

criterion_group!(benches, decide, cookie_parsing);
criterion_main!(benches);
