//! "Why this server": what tether would do with a request, and why, as
//! JSON. The admin API's `POST /explain` asks the running process (live states, health,
//! live sessions, partition tables); `tether explain -c FILE` asks a config file (every
//! server up), to review a change before it ships. Nothing is claimed or counted: the
//! decision is the router's own, run dry ([`crate::routing::ClusterRouter::explain`]).

use crate::config::{Config, RouteAction};
use crate::routing::routes::Found;
use crate::routing::{cookie_values, now_ms, path_parameter, Decision, Health, Reject, Tried};
use crate::state::snapshot::Snapshot;
use http::header::{HeaderMap, HeaderName, HeaderValue, COOKIE};
use serde::Deserialize;
use serde_json::{json, Value};

/// The request to explain (`POST /explain`'s body).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    /// The listener it arrives on (default: the first).
    pub listener: Option<String>,
    #[serde(default = "get")]
    pub method: String,
    /// The target: `/shop/cart;jsessionid=ABC.n1?x=1`.
    pub url: String,
    /// Its fields, in order: `[["Cookie", "JSESSIONID=ABC.n1"], ["Host", "shop.example"]]`.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
}

fn get() -> String {
    "GET".into()
}

/// What tether would do with `ask`, under `config` and the live state of `snapshot`.
pub fn explain(config: &Config, snapshot: &Snapshot, ask: &Ask) -> Result<Value, String> {
    let listener = match &ask.listener {
        Some(name) => config
            .listeners
            .iter()
            .position(|l| &l.name == name)
            .ok_or_else(|| format!("no listener `{name}`"))?,
        None => 0,
    };
    let l = config
        .listeners
        .get(listener)
        .ok_or("the config has no listener")?;
    if !ask.url.starts_with('/') {
        return Err(format!("url `{}` must start with `/`", ask.url));
    }
    let mut headers = HeaderMap::new();
    for (name, value) in &ask.headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not a field name"))?;
        let v = HeaderValue::from_str(value)
            .map_err(|_| format!("the value of `{name}` is not valid"))?;
        headers.append(n, v);
    }
    // As a request's: the query is not matched; the route table reads `;parameters` itself.
    let path = ask.url.split('?').next().unwrap_or("/");
    let host = headers
        .get(http::header::HOST)
        .map(|h| h.as_bytes())
        .unwrap_or_default();
    let (host, port) = crate::pipeline::host_and_port(host, l.address.port());
    // The host/path routes, then the listener's cluster.
    let routes = &snapshot.routes[listener];
    let found = routes.table.find(host, port, path.as_bytes());
    let (route, cluster) = match found {
        Found::Route(i) | Found::Excluded(i) => {
            let info = &routes.routes[i];
            let excluded = matches!(found, Found::Excluded(_));
            let answer = match (&info.action, excluded) {
                (_, true) => Some(match &l.serve {
                    Some(files) => {
                        json!({ "files": files.root, "why": "the route excludes this path" })
                    }
                    None => json!({ "status": 404, "why": "the route excludes this path" }),
                }),
                (RouteAction::Serve(files), _) => Some(json!({ "files": files.root })),
                (RouteAction::Respond { status, .. }, _) => Some(json!({ "status": status })),
                (RouteAction::Redirect { to, status }, _) => {
                    Some(json!({ "status": status, "location": to }))
                }
                (RouteAction::Cluster(_), _) => None,
            };
            if let Some(answer) = answer {
                return Ok(json!({
                    "listener": l.name,
                    "route": info.name.as_ref(),
                    "answered_by_route": answer,
                }));
            }
            let RouteAction::Cluster(c) = info.action else {
                unreachable!("answered above")
            };
            (Some(info.name.to_string()), Some(c))
        }
        Found::None => (None, snapshot.listeners[listener]),
    };
    let Some(cluster) = cluster else {
        if let Some(files) = &l.serve {
            return Ok(
                json!({ "listener": l.name, "route": null, "answered_by_route": { "files": files.root, "why": "no route matches and the listener has no cluster" } }),
            );
        }
        return Ok(
            json!({ "listener": l.name, "route": null, "answered_by_route": { "status": 404, "why": "no route matches and the listener has no cluster" } }),
        );
    };
    let router = &snapshot.clusters[cluster];
    let plugins = !snapshot.listener_chains[listener].is_empty()
        || !snapshot.cluster_chains[cluster].is_empty();
    let now = now_ms();
    let seen = router.explain(ask.url.as_bytes(), &headers, now);
    let session = seen.session_id.as_ref().map(|id| {
        let text = String::from_utf8_lossy(id).into_owned();
        json!({
            "id": text,
            "found_in": found_in(router, ask.url.as_bytes(), &headers, id),
            "token": seen.token.as_ref().map(|t| String::from_utf8_lossy(t).into_owned()),
            "names": seen.token.as_ref().map(|t| names(router, t)),
        })
    });
    // Where the request would go if each server in turn failed.
    let mut chain = Vec::new();
    let mut tried = Tried::default();
    for _ in 0..router.max_attempts {
        match router
            .explain_after(ask.url.as_bytes(), &headers, now, &tried)
            .decision
        {
            Decision::Route { server, outcome } => {
                chain.push(json!({ "server": router.servers()[server].config.name, "outcome": outcome.as_str() }));
                tried.push(server);
            }
            Decision::Reject(_) => break,
        }
    }
    let decision = match seen.decision {
        Decision::Route { server, outcome } => json!({
            "server": router.servers()[server].config.name,
            "outcome": outcome.as_str(),
        }),
        Decision::Reject(r) => json!({
            "status": 503,
            "rejected": match r { Reject::StickyForce => "sticky_force", Reject::NoServer => "no_server", Reject::Busy => "busy" },
        }),
    };
    let counts = router.live_sessions().map(|t| t.scan());
    let servers: Vec<Value> = router
        .servers()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({
                "name": s.config.name,
                "state": s.live.state().name(),
                "health": match s.live.health() { Health::Up => "up", Health::Down { .. } => "down" },
                "down_reason": s.live.down_reason().as_deref(),
                "weight": s.live.weight(),
                "live_sessions": counts.as_ref().and_then(|c| c.get(i)).map(|c| c.live),
            })
        })
        .collect();
    Ok(json!({
        "listener": l.name,
        "method": ask.method,
        "route": route,
        "cluster": router.name,
        "plugins": plugins.then_some("this listener or cluster has plugins, which may choose another cluster or server: not run here"),
        "session": session,
        "decision": decision,
        "failover_chain": chain,
        "servers": servers,
    }))
}

/// Where the session id came from: the path parameter, a cookie, or the session field.
fn found_in(
    router: &crate::routing::ClusterRouter,
    url: &[u8],
    headers: &HeaderMap,
    id: &[u8],
) -> String {
    let [param, cookie] = router.session_names();
    if path_parameter(url, param) == Some(id) {
        return format!("path parameter `;{}=`", String::from_utf8_lossy(param));
    }
    let in_cookie = headers
        .get_all(COOKIE)
        .iter()
        .any(|v| cookie_values(v.as_bytes(), cookie).any(|c| c == id));
    if in_cookie {
        return format!("cookie `{}`", String::from_utf8_lossy(cookie));
    }
    match router.session_header() {
        Some(h) => format!("field `{h}`"),
        None => "the request".into(),
    }
}

/// What a session id's token names: a server by its route or clone id, a mod_jk domain,
/// or (WebSphere) each clone and partition of the list with its owner.
fn names(router: &crate::routing::ClusterRouter, token: &[u8]) -> Vec<String> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let name = |i: usize| router.servers()[i].config.name.clone();
    if !router.is_websphere() {
        return vec![match router.server_named_by(token) {
            Some(i) => format!("server `{}` (its route)", name(i)),
            None if router
                .servers()
                .iter()
                .any(|s| s.config.domain.as_deref().map(str::as_bytes) == Some(token)) =>
            {
                format!("domain `{}`", text(token))
            }
            None => format!(
                "`{}`: no server or domain of this cluster (hashed)",
                text(token)
            ),
        }];
    }
    let sep = [b':', b'+'];
    token
        .split(|b| sep.contains(b))
        .filter(|t| !t.is_empty())
        .map(|t| match router.server_named_by(t) {
            Some(i) => format!("clone `{}`: server `{}`", text(t), name(i)),
            None => match router.partition_owner(t) {
                Some(owner) => format!("partition `{}`: owned by clone `{owner}`", text(t)),
                None => format!("`{}`: no clone, and no partition the table knows", text(t)),
            },
        })
        .collect()
}
