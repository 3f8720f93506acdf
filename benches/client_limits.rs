//! What per-client limits cost a request: the request-rate check and the
//! connection count of one client, on a window sized for 100,000 clients that already
//! holds 100,000, and the same on a listener without limits.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use tether::config::ClientLimits;
use tether::state::client_limits::{ClientLimiter, Connection};

fn limits(connections: Option<u32>, requests: Option<u32>) -> ClientLimits {
    ClientLimits {
        connections,
        requests,
        per: Duration::from_secs(60),
        clients: 100_000,
        allow: vec!["10.0.0.0/8".parse().unwrap()],
        ipv4_prefix: 32,
        ipv6_prefix: 64,
    }
}

fn client(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0xc000_0000 + i))
}

fn bench(c: &mut Criterion) {
    let on = ClientLimiter::new("web", &limits(Some(100), Some(1_000_000)), 10_000, None);
    let now = 120_000;
    for i in 0..100_000 {
        let _ = on.admit_request(client(i), now);
    }
    let mut g = c.benchmark_group("client_limits");
    g.bench_function("request_on", |b| {
        let mut i = 0u32;
        b.iter(|| {
            i = (i + 1) % 100_000;
            black_box(on.admit_request(black_box(client(i)), now))
        })
    });
    g.bench_function("request_allowed_network", |b| {
        let ip = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));
        b.iter(|| black_box(on.admit_request(black_box(ip), now)))
    });
    g.bench_function("connection_open_and_close", |b| {
        let mut i = 0u32;
        b.iter(|| {
            i = (i + 1) % 100_000;
            let open = on.open_connection(black_box(client(i)), &[]);
            black_box(matches!(open, Connection::Counted(_)))
        })
    });
    let off = ClientLimiter::new("web", &limits(Some(100), None), 10_000, None);
    g.bench_function("request_off", |b| {
        b.iter(|| black_box(off.admit_request(black_box(client(7)), now)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
