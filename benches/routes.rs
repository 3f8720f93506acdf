//! The cost of finding a request's route among 1,000 host/path routes: exact
//! paths (a hash look-up), wildcard paths deep in the precedence order, and a miss.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tether::config::{Route, RouteAction};
use tether::routing::routes::RouteTable;

fn routes(n: usize) -> Vec<Route> {
    let mut out = Vec::new();
    for i in 0..n {
        let (host, path) = match i % 4 {
            0 => (None, format!("/app{i}/*")),
            1 => (Some(format!("host{i}.example.com")), format!("/svc{i}/*")),
            2 => (None, format!("/exact/{i}")),
            _ => (Some("*.example.org".to_string()), format!("/img{i}/*.gif")),
        };
        out.push(Route {
            name: format!("r{i}"),
            host,
            path,
            action: RouteAction::Cluster(i % 3),
            exclude: false,
            disabled: false,
            plugins: vec![],
            max_request_body: None,
            error_pages: None,
            compress: None,
        });
    }
    out
}

fn bench(c: &mut Criterion) {
    let table = RouteTable::new(&routes(1000), tether::config::RouteOrder::Specific);
    let mut g = c.benchmark_group("routes_1000");
    g.bench_function("exact", |b| {
        b.iter(|| table.find(black_box(b"www.example.com"), 80, black_box(b"/exact/502")))
    });
    g.bench_function("wildcard_first", |b| {
        b.iter(|| table.find(black_box(b"www.example.com"), 80, black_box(b"/app0/x/y")))
    });
    g.bench_function("wildcard_last", |b| {
        b.iter(|| {
            table.find(
                black_box(b"a.example.org"),
                80,
                black_box(b"/img999/a/b.gif"),
            )
        })
    });
    g.bench_function("miss", |b| {
        b.iter(|| {
            table.find(
                black_box(b"www.example.com"),
                80,
                black_box(b"/nothing/here"),
            )
        })
    });
    g.bench_function("with_jsessionid", |b| {
        b.iter(|| {
            table.find(
                black_box(b"www.example.com"),
                80,
                black_box(b"/exact/502;jsessionid=ABCDEF0123456789.n1"),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
