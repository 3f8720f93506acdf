//! What a Luau script costs a request (the `script` plugin's phases, called as tether calls
//! them, with the request's state made and dropped each time): no plugin, a no-op script
//! (a `request` phase that does nothing), and a routing script that reads a cookie and a
//! field and looks the user up in a table. Printed as time per request and the difference
//! from no plugin (`cargo bench --bench script`).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pingora_http::RequestHeader;
use std::sync::Arc;
use tether_plugins::{Chain, Connection, KnownTargets, LogSummary, RequestState};

const NOOP: &str = "return { request = function(r, ctx) end }";

const ROUTING: &str = r#"
local users = {}
for i = 1, 1000 do users[string.format("%03d", i)] = (i % 2 == 0) and "shop/b" or "shop/a" end
return {
  route = function(r, ctx)
    if r:cookie("canary") == "1" then return "shop/b" end
    local user = r:header("x-user")
    return user and users[user]
  end,
}
"#;

fn chain(source: Option<&str>, targets: &Arc<KnownTargets>) -> Chain {
    let specs: Vec<_> = source
        .map(|s| {
            let entry = serde_yaml::Value::Mapping(
                [
                    ("name".into(), "script".into()),
                    ("source".into(), s.into()),
                ]
                .into_iter()
                .collect(),
            );
            tether_plugins::parse(&entry, targets).expect("valid script")
        })
        .into_iter()
        .collect();
    Chain::new(&specs, None, targets, |s| tether_plugins::build(s, targets))
}

fn request() -> RequestHeader {
    let mut req = RequestHeader::build("GET", b"/shop/cart", None).unwrap();
    req.insert_header("Host", "shop.example").unwrap();
    req.insert_header("X-User", "042").unwrap();
    req.insert_header("Cookie", "JSESSIONID=ABC.tc1; theme=dark")
        .unwrap();
    req
}

fn script(c: &mut Criterion) {
    let targets = Arc::new(KnownTargets::new([("shop", vec!["a", "b"])]));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let conn = Connection::default();
    let summary = LogSummary {
        status: 200,
        cluster: Some(0),
        server: Some(0),
    };
    let mut g = c.benchmark_group("script");
    for (name, source) in [
        ("none", None),
        ("noop", Some(NOOP)),
        ("routing", Some(ROUTING)),
    ] {
        let chain = chain(source, &targets);
        let mut req = request();
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let mut state = RequestState::default();
                    let flow = chain.request(&mut req, &conn, &mut state).await;
                    let route = chain.route(&req, &conn, &mut state).await;
                    chain.logging(&summary, &mut state);
                    black_box((flow, route))
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, script);
criterion_main!(benches);
