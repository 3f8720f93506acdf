//! The routing snapshot: one router per cluster and each listener's cluster, swapped whole.
//!
//! Requests load the current snapshot once (an `ArcSwap` load, no lock) and keep the
//! cluster's router in their context for every retry; a reload builds a new snapshot off
//! the request path, reusing live server state by name, and stores it.

use crate::config::Config;
use crate::metrics::ClusterMetrics;
use crate::routing::ClusterRouter;
use arc_swap::ArcSwap;
use std::sync::Arc;
use tether_plugins::{Chain, KnownTargets};

pub struct Snapshot {
    pub clusters: Box<[Arc<ClusterRouter>]>,
    /// Metric handles of each cluster, in the same order.
    pub metrics: Box<[Arc<ClusterMetrics>]>,
    /// Listener index (order of the config) → its default cluster's index.
    pub listeners: Box<[Option<usize>]>,
    /// Each listener's host/path routes.
    pub routes: Box<[Arc<ListenerRoutes>]>,
    /// Does each listener set `X-Forwarded-*` on upstream requests?
    pub forwarded: Box<[bool]>,
    /// Per listener: the proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Box<[Box<[ipnet::IpNet]>]>,
    /// Per listener: the balancers that send a PROXY protocol header, when it is on.
    pub proxy_protocol: Box<[Option<Box<[ipnet::IpNet]>>]>,
    /// Each listener's limits on what one client may hold or send.
    pub limits: Box<[crate::config::ListenerLimits]>,
    /// Each listener's per-client limits, when it has them.
    pub client_limits: Box<[Option<Arc<crate::state::client_limits::ClientLimiter>>]>,
    /// Each listener's TLS acceptor (None: plain), set by whoever builds the snapshot
    /// (the files are loaded again, which can fail: not here).
    pub tls: Box<[Option<Arc<crate::state::tls::Acceptor>>]>,
    /// Each listener's redirect to https, when it only redirects.
    pub redirects: Box<[Option<crate::config::Redirect>]>,
    /// Each cluster's TLS to its servers (None: plain HTTP), set like `tls`.
    pub upstream_tls: Box<[Option<Arc<crate::state::tls::UpstreamTls>>]>,
    /// Each cluster's Tomcat `SSLValve` header names, when set.
    pub ssl_headers: Box<[Option<Arc<crate::config::SslHeaders>>]>,
    /// Per cluster: AJP/1.3 to its servers, when it speaks it.
    pub ajp: Box<[Option<Arc<crate::config::Ajp>>]>,
    /// Routing plugins of each listener, then of each cluster (empty chains cost nothing).
    pub listener_chains: Box<[Arc<Chain>]>,
    pub cluster_chains: Box<[Arc<Chain>]>,
    /// Pages for tether's own answers (`error_pages`), per listener and per cluster.
    pub listener_pages: Box<[Option<crate::config::ErrorPages>]>,
    /// Per listener: files for the requests no route or default cluster takes (`serve`).
    pub listener_files: Box<[Option<Arc<crate::config::Files>>]>,
    /// Per listener: its `compress` (a route's own is in its [`RouteInfo`]).
    pub listener_compress: Box<[Option<Arc<crate::config::Compress>>]>,
    /// Per listener: the `Alt-Svc` field its HTTP/1.1 and HTTP/2 answers carry (with
    /// `http3`, unless its max age is zero).
    pub alt_svc: Box<[Option<http::HeaderValue>]>,
    pub cluster_pages: Box<[Option<crate::config::ErrorPages>]>,
    /// Whether any chain has a plugin: requests skip the plugin phases when none does.
    has_plugins: bool,
    /// Whether a plugin of any chain changes messages (`Plugin::edits_messages`): then
    /// tether's HTTP/1 engine hands requests to pingora-proxy.
    plugins_edit: bool,
}

/// `h3=":PORT"; ma=SECONDS` for a listener that serves HTTP/3 and says so.
fn alt_svc(l: &crate::config::Listener) -> Option<http::HeaderValue> {
    if !l.http3 || l.alt_svc_max_age.is_zero() {
        return None;
    }
    let (port, age) = (l.address.port(), l.alt_svc_max_age.as_secs());
    http::HeaderValue::from_str(&format!("h3=\":{port}\"; ma={age}")).ok()
}

impl Snapshot {
    /// Builds routers for `config`, carrying live state over from `previous` by cluster
    /// and server name.
    pub fn build(config: &Config, previous: Option<&Snapshot>) -> Snapshot {
        let targets = Arc::new(KnownTargets::new(config.clusters.iter().map(|c| {
            (
                c.name.as_str(),
                c.servers.iter().map(|s| s.name.as_str()).collect(),
            )
        })));
        let build = |spec: &tether_plugins::PluginSpec| tether_plugins::build(spec, &targets);
        let listener_chains: Box<[Arc<Chain>]> = config
            .listeners
            .iter()
            .enumerate()
            .map(|(i, l)| {
                Arc::new(Chain::new(
                    &l.plugins,
                    previous
                        .and_then(|p| p.listener_chains.get(i))
                        .map(|c| c.as_ref()),
                    &targets,
                    build,
                ))
            })
            .collect();
        let cluster_chains: Box<[Arc<Chain>]> = config
            .clusters
            .iter()
            .map(|c| {
                let old = previous.and_then(|p| {
                    let i = p.clusters.iter().position(|r| r.name == c.name)?;
                    p.cluster_chains.get(i)
                });
                Arc::new(Chain::new(
                    &c.plugins,
                    old.map(|c| c.as_ref()),
                    &targets,
                    build,
                ))
            })
            .collect();
        let routes: Box<[Arc<ListenerRoutes>]> = config
            .listeners
            .iter()
            .map(|l| {
                let routes = l
                    .routes
                    .iter()
                    .map(|r| RouteInfo {
                        name: r.name.as_str().into(),
                        action: r.action.clone(),
                        chain: Arc::new(Chain::new(&r.plugins, None, &targets, build)),
                        hits: crate::metrics::route_counter(&l.name, &r.name),
                        max_request_body: r.max_request_body,
                        error_pages: r.error_pages.clone(),
                        compress: r.compress.clone().or_else(|| l.compress.clone()),
                    })
                    .collect();
                Arc::new(ListenerRoutes {
                    table: crate::routing::routes::RouteTable::new(&l.routes, l.route_order),
                    routes,
                })
            })
            .collect();
        let has_plugins = config.listeners.iter().any(|l| !l.plugins.is_empty())
            || config.clusters.iter().any(|c| !c.plugins.is_empty())
            || config
                .listeners
                .iter()
                .any(|l| l.routes.iter().any(|r| !r.plugins.is_empty()));
        let plugins_edit = listener_chains
            .iter()
            .chain(cluster_chains.iter())
            .chain(
                routes
                    .iter()
                    .flat_map(|r| r.routes.iter().map(|i| &i.chain)),
            )
            .any(|c| c.edits_messages());
        let mut clusters = Vec::new();
        let mut metrics = Vec::new();
        for c in &config.clusters {
            let old = previous.and_then(|p| p.clusters.iter().find(|r| r.name == c.name));
            let router = ClusterRouter::new(c, old.map(|r| r.as_ref()));
            metrics.push(Arc::new(ClusterMetrics::new(
                &router,
                old.map(|r| r.as_ref()),
            )));
            clusters.push(Arc::new(router));
        }
        Snapshot {
            alt_svc: config.listeners.iter().map(alt_svc).collect(),
            listener_files: config.listeners.iter().map(|l| l.serve.clone()).collect(),
            listener_compress: config
                .listeners
                .iter()
                .map(|l| l.compress.clone())
                .collect(),
            listener_pages: config
                .listeners
                .iter()
                .map(|l| l.error_pages.clone())
                .collect(),
            cluster_pages: config
                .clusters
                .iter()
                .map(|c| c.error_pages.clone())
                .collect(),
            clusters: clusters.into(),
            metrics: metrics.into(),
            listeners: config.listeners.iter().map(|l| l.cluster).collect(),
            routes,
            forwarded: config
                .listeners
                .iter()
                .map(|l| l.forwarded_headers)
                .collect(),
            trusted_proxies: config
                .listeners
                .iter()
                .map(|l| l.trusted_proxies.clone().into_boxed_slice())
                .collect(),
            proxy_protocol: config
                .listeners
                .iter()
                .map(|l| l.proxy_protocol.clone().map(Vec::into_boxed_slice))
                .collect(),
            limits: config.listeners.iter().map(|l| l.limits).collect(),
            client_limits: config
                .listeners
                .iter()
                .map(|l| {
                    let old = previous.and_then(|p| {
                        p.client_limits
                            .iter()
                            .flatten()
                            .find(|c| c.listener() == l.name)
                    });
                    let limits = l.client_limits.as_ref()?;
                    Some(Arc::new(crate::state::client_limits::ClientLimiter::new(
                        &l.name,
                        limits,
                        l.limits.max_connections,
                        old.map(|c| c.as_ref()),
                    )))
                })
                .collect(),
            tls: config.listeners.iter().map(|_| None).collect(),
            redirects: config.listeners.iter().map(|l| l.redirect_https).collect(),
            upstream_tls: config.clusters.iter().map(|_| None).collect(),
            ssl_headers: config
                .clusters
                .iter()
                .map(|c| c.ssl_headers.clone().map(Arc::new))
                .collect(),
            ajp: config
                .clusters
                .iter()
                .map(|c| c.ajp.clone().map(Arc::new))
                .collect(),
            listener_chains,
            cluster_chains,
            has_plugins,
            plugins_edit,
        }
    }

    /// Recomputes whether any chain has a plugin (after the listener chains were remapped).
    pub fn refresh_has_plugins(&mut self) {
        self.has_plugins = self
            .listener_chains
            .iter()
            .chain(self.cluster_chains.iter())
            .any(|c| !c.is_empty())
            || self
                .routes
                .iter()
                .any(|l| l.routes.iter().any(|r| !r.chain.is_empty()));
    }

    /// Does any listener or cluster have routing plugins?
    pub fn has_plugins(&self) -> bool {
        self.has_plugins
    }

    /// Does a plugin change messages (so tether's HTTP/1 engine hands requests over)?
    pub fn plugins_edit(&self) -> bool {
        self.plugins_edit
    }

    /// The router and metric handles of listener `listener`'s default cluster.
    pub fn cluster_for(
        &self,
        listener: usize,
    ) -> Option<(&Arc<ClusterRouter>, &Arc<ClusterMetrics>)> {
        let i = self.listeners[listener]?;
        Some((&self.clusters[i], &self.metrics[i]))
    }
}

/// A listener's routes: the matcher and, per route, what the request path needs.
#[derive(Default)]
pub struct ListenerRoutes {
    pub table: crate::routing::routes::RouteTable,
    pub routes: Box<[RouteInfo]>,
}

pub struct RouteInfo {
    pub name: Arc<str>,
    pub action: crate::config::RouteAction,
    /// The route's plugins (empty chains cost nothing).
    pub chain: Arc<Chain>,
    /// `tether_route_requests_total` of this route, resolved once.
    pub hits: pingora_prometheus::prometheus::IntCounter,
    /// The route's `max_request_body`, over the listener's.
    pub max_request_body: Option<u64>,
    /// The route's `error_pages`, over the cluster's and the listener's.
    pub error_pages: Option<crate::config::ErrorPages>,
    /// The route's `compress`, else the listener's.
    pub compress: Option<Arc<crate::config::Compress>>,
}

/// The shared, swappable snapshot.
pub type SharedSnapshot = Arc<ArcSwap<Snapshot>>;
