//! What a Luau script costs a request (the `script` plugin's phases, called as tether calls
//! them, with the request's state made and dropped each time): no plugin, a no-op script
//! (a `route` phase that does nothing, and a `request` phase that does nothing), and a
//! routing script that reads a cookie and a field and consults the shared dictionary.
//! Prints nanoseconds per request and what each adds to no plugin, against the goals
//! (`cargo bench --bench script`; best of seven runs, so a busy moment does not count).

use pingora_http::RequestHeader;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use tether_plugins::{Chain, Connection, KnownTargets, LogSummary, RequestState};

const NOOP_ROUTE: &str = "return { route = function(r, ctx) end }";
const NOOP_REQUEST: &str = "return { request = function(r, ctx) end }";

const ROUTING: &str = r#"
local users = {}
for i = 1, 1000 do users[string.format("%03d", i)] = (i % 2 == 0) and "shop/b" or "shop/a" end
return {
  route = function(r, ctx)
    if r:cookie("canary") == "1" then return "shop/b" end
    local user = r:header("x-user")
    if not user then return nil end
    local key = "user:" .. user
    local target = shared:get(key)
    if not target then
      target = users[user]
      shared:set(key, target, 60)
    end
    return target
  end,
}
"#;

fn chain(source: Option<&str>, targets: &Arc<KnownTargets>) -> Chain {
    let specs: Vec<_> = source
        .map(|s| {
            let entry: serde_yaml::Value = serde_yaml::from_str(&format!(
                "{{ name: script, shared: {{ name: bench }}, source: {} }}",
                serde_json::to_string(s).unwrap()
            ))
            .unwrap();
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

fn main() {
    let targets = Arc::new(KnownTargets::new([("shop", vec!["a", "b"])]));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let conn = Connection::default();
    let summary = LogSummary {
        status: 200,
        cluster: Some(0),
        server: Some(0),
    };
    const N: u32 = 200_000;
    let mut baseline = None;
    println!("script cost per request (request, route and log phases run as tether runs them)");
    for (name, source, goal_ns) in [
        ("no plugin", None, None),
        ("no-op route phase", Some(NOOP_ROUTE), Some(1_000.0)),
        ("no-op request phase", Some(NOOP_REQUEST), Some(1_000.0)),
        ("routing script", Some(ROUTING), Some(3_000.0)),
    ] {
        let chain = chain(source, &targets);
        let mut req = request();
        let best = rt.block_on(async {
            let mut best = f64::MAX;
            for _ in 0..7 {
                let start = Instant::now();
                for _ in 0..N {
                    let mut state = RequestState::default();
                    let flow = chain.request(&mut req, &conn, &mut state).await;
                    let route = chain.route(&req, &conn, &mut state).await;
                    chain.logging(&summary, &mut state);
                    black_box((flow, route));
                }
                best = best.min(start.elapsed().as_nanos() as f64 / N as f64);
            }
            best
        });
        let base = *baseline.get_or_insert(best);
        match goal_ns {
            None => println!("  {name:<22} {best:>8.0} ns"),
            Some(goal) => {
                let added = best - base;
                let verdict = if added < goal { "under" } else { "OVER" };
                println!(
                    "  {name:<22} {best:>8.0} ns  adds {added:>6.0} ns  ({verdict} the goal of {goal:.0} ns)"
                );
            }
        }
    }
}
