//! Running the routing plugins of a request, for every front end: the listener's chain,
//! then the chosen cluster's (DESIGN section 5). Sessions still win inside the chosen cluster: the plugins
//! only pick the cluster, and a server for requests without a session of that cluster.

use crate::state::snapshot::Snapshot;
use pingora_http::RequestHeader;
use std::sync::Arc;
use tether_plugins::{Connection, Flow, ProxyFacts, Route, TlsFacts};

/// Where the plugins send a request.
struct Routed {
    pub cluster: usize,
    /// A server for a request that carries no session of `cluster`.
    pub preferred: Option<usize>,
}

/// A plugin's own answer to the client.
pub struct PluginAnswer {
    pub status: u16,
    /// Fields a script sets on its answer (`Location` for a redirect, ...).
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl PluginAnswer {
    /// The answer, as every front end writes it.
    pub fn answer(&self) -> super::Answer<'_> {
        super::Answer::Plugin {
            status: self.status,
            fields: &self.headers,
            body: &self.body,
        }
    }
}

/// Runs the request and route phases of both chains.
/// `start` is the cluster the listener or the matched route gives; `route_chain` the
/// matched route's plugins, which run after the listener's and may choose as they do.
async fn route(
    snapshot: &Snapshot,
    listener: usize,
    start: usize,
    route_chain: Option<&tether_plugins::Chain>,
    req: &mut RequestHeader,
    conn: &Connection,
    state: &mut tether_plugins::RequestState,
) -> Result<Routed, PluginAnswer> {
    let mut routed = Routed {
        cluster: start,
        preferred: None,
    };
    let chains = [Some(&*snapshot.listener_chains[listener]), route_chain];
    for chain in chains.into_iter().flatten() {
        if chain.is_empty() {
            continue;
        }
        if let Flow::Respond {
            status,
            headers,
            body,
        } = chain.request(req, conn, state).await
        {
            return Err(PluginAnswer {
                status,
                headers,
                body,
            });
        }
        match chain.route(req, conn, state).await {
            Route::Continue => {}
            Route::Respond {
                status,
                headers,
                body,
            } => {
                return Err(PluginAnswer {
                    status,
                    headers,
                    body,
                })
            }
            // Plugins are built against the snapshot's own clusters (see `Chain::new`); a
            // target outside it is ignored rather than trusted with an index.
            Route::To(t) if valid(snapshot, t) => {
                routed.cluster = t.cluster;
                routed.preferred = t.server;
            }
            Route::To(_) => {}
        }
    }
    let chain = &snapshot.cluster_chains[routed.cluster];
    if !chain.is_empty() {
        if let Flow::Respond {
            status,
            headers,
            body,
        } = chain.request(req, conn, state).await
        {
            return Err(PluginAnswer {
                status,
                headers,
                body,
            });
        }
        match chain.route(req, conn, state).await {
            Route::Respond {
                status,
                headers,
                body,
            } => {
                return Err(PluginAnswer {
                    status,
                    headers,
                    body,
                })
            }
            // A cluster's plugins choose among its own servers only.
            Route::To(t) if t.cluster == routed.cluster && valid(snapshot, t) => {
                routed.preferred = t.server.or(routed.preferred)
            }
            _ => {}
        }
    }
    Ok(routed)
}

/// What the connection's PROXY protocol v2 header said (the listener keeps it in the
/// connection's proxy digest, which Pingora hands to every request, HTTP/1 or HTTP/2, and
/// tether's engine reads from the connection's stream).
pub fn proxy_facts(
    digest: Option<&pingora_core::protocols::raw_connect::ProxyDigest>,
) -> Option<Arc<ProxyFacts>> {
    digest?
        .user_data
        .as_ref()?
        .downcast_ref::<Arc<ProxyFacts>>()
        .cloned()
}

/// What the plugins are told of a request headed for cluster `start` on listener `name`:
/// the client, the balancer's and the TLS handshake's facts, the listener and route, and
/// tether's routing (the snapshot) for a script that asks about the session.
fn connection(
    snapshot: &Arc<Snapshot>,
    name: &Arc<str>,
    ctx: &super::RequestCtx,
    start: usize,
    proxy: Option<Arc<ProxyFacts>>,
    tls: Option<Arc<TlsFacts>>,
) -> Connection {
    Connection {
        client: ctx.client,
        proxy,
        tls,
        listener: Some(name.clone()),
        route: ctx.route.clone(),
        cluster: Some(start),
        sessions: Some(snapshot.clone()),
    }
}

/// What the TLS handshake recorded (`tls::ConnTls`), when the connection is TLS.
pub fn tls_facts(
    digest: Option<&pingora_core::protocols::tls::SslDigest>,
) -> Option<Arc<TlsFacts>> {
    let conn = digest?.extension.get::<crate::state::tls::ConnTls>()?;
    Some(conn.facts.clone())
}

/// The logging phase of the chains a request ran through (`ctx.plugins`).
pub fn log(ctx: &mut super::RequestCtx, status: u16, server: Option<usize>) {
    if let Some((snapshot, listener, cluster)) = &ctx.plugins {
        let summary = tether_plugins::LogSummary {
            status,
            cluster: Some(*cluster),
            server,
        };
        let state = &mut ctx.plugin_state;
        snapshot.listener_chains[*listener].logging(&summary, state);
        snapshot.cluster_chains[*cluster].logging(&summary, state);
    }
}

/// Does `t` name a cluster (and server) of `snapshot`?
fn valid(snapshot: &Snapshot, t: tether_plugins::Target) -> bool {
    snapshot
        .clusters
        .get(t.cluster)
        .is_some_and(|c| t.server.is_none_or(|s| s < c.servers().len()))
}

/// Runs the plugins of a request headed for cluster `start` (the listener's, or its
/// route's; `route_chain` the route's plugins) over `req`, its head as the plugins read and
/// edit it, with the connection's `facts` (PROXY header, TLS): the cluster they choose (a
/// server they prefer for a new session goes in `ctx`), or a plugin's own answer (counted
/// under `start`).
#[allow(clippy::too_many_arguments)]
pub async fn choose(
    snapshot: &Arc<Snapshot>,
    listener: usize,
    name: &Arc<str>,
    ctx: &mut super::RequestCtx,
    start: usize,
    route_chain: Option<&tether_plugins::Chain>,
    req: &mut RequestHeader,
    facts: (Option<Arc<ProxyFacts>>, Option<Arc<TlsFacts>>),
) -> Result<usize, PluginAnswer> {
    let conn = connection(snapshot, name, ctx, start, facts.0, facts.1);
    let routed = route(
        snapshot,
        listener,
        start,
        route_chain,
        req,
        &conn,
        &mut ctx.plugin_state,
    )
    .await;
    match routed {
        Ok(routed) => {
            ctx.preferred = routed.preferred;
            ctx.plugins = Some((snapshot.clone(), listener, routed.cluster));
            Ok(routed.cluster)
        }
        Err(answer) => {
            ctx.metrics = Some(snapshot.metrics[start].clone());
            Err(answer)
        }
    }
}
