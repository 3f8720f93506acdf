//! Servers named by DNS, resolved again while tether runs (nginx's `resolve`, HAProxy's
//! `resolvers`): every `resolver.interval`, and at once after a reload, each named server
//! is looked up (with the system's resolver, or the `resolver.nameservers`). A new address
//! takes effect without a reload: the running config gets it, and a new snapshot keeps
//! every server's live state. A name that never resolved keeps its server held down; one
//! that stops resolving keeps its last address (a DNS outage is not a server outage), and
//! each is logged.

use super::Control;
use crate::base::every::Every;
use crate::config::{Config, Resolver};
use async_trait::async_trait;
use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::TokioResolver;
use log::{info, warn};
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::net::SocketAddr;
use std::sync::Arc;

/// A look-up's answer for one server: its cluster, name, host and port as the config
/// says them, and an address or why there is none.
struct Answer {
    cluster: String,
    server: String,
    host: String,
    result: Result<SocketAddr, String>,
}

/// A name that keeps failing is said at most this often (per process).
static STILL_FAILING: Every = Every::new(60_000);

impl Control {
    /// Applies the resolver's answers: a server whose address changed, or that resolved
    /// for the first time, gets it in the running config and a new snapshot.
    fn resolved(&self, answers: Vec<Answer>) {
        let _guard = self.rebuild.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.config.load_full();
        let mut next = (*current).clone();
        let mut changed = false;
        for a in answers {
            let Some(s) = next
                .clusters
                .iter_mut()
                .filter(|c| c.name == a.cluster)
                .flat_map(|c| c.servers.iter_mut())
                .find(|s| s.name == a.server && s.host.as_deref() == Some(a.host.as_str()))
            else {
                continue;
            };
            match a.result {
                Ok(addr) if s.unresolved.is_some() || s.address != addr => {
                    info!(
                        "cluster {} server {}: `{}` is {addr} (was {})",
                        a.cluster,
                        a.server,
                        a.host,
                        if s.unresolved.is_some() {
                            "unresolved".to_string()
                        } else {
                            s.address.to_string()
                        }
                    );
                    s.address = addr;
                    s.unresolved = None;
                    changed = true;
                }
                Ok(_) => {}
                Err(why) if s.unresolved.is_some() => {
                    if STILL_FAILING.due(crate::routing::now_ms()).is_some() {
                        warn!(
                            "cluster {} server {}: {why}; it stays down until it resolves",
                            a.cluster, a.server
                        );
                    }
                    if s.unresolved.as_deref() != Some(why.as_str()) {
                        s.unresolved = Some(why);
                        changed = true;
                    }
                }
                Err(why) => {
                    if STILL_FAILING.due(crate::routing::now_ms()).is_some() {
                        warn!(
                            "cluster {} server {}: {why}; it keeps its last address {}",
                            a.cluster, a.server, s.address
                        );
                    }
                }
            }
        }
        if changed {
            self.rebuild_snapshot(&next);
            self.config.store(Arc::new(next));
        }
    }
}

/// A reloaded config's named servers that wait for the resolver take the address it
/// last gave for the same name and port, so a reload does not hold them down again.
pub(super) fn carry_addresses(new: &mut Config, running: &Config) {
    for c in new.clusters.iter_mut() {
        let Some(old) = running.clusters.iter().find(|o| o.name == c.name) else {
            continue;
        };
        for s in c.servers.iter_mut().filter(|s| s.unresolved.is_some()) {
            let known = old.servers.iter().find(|o| {
                o.name == s.name
                    && o.host == s.host
                    && o.unresolved.is_none()
                    && o.address.port() == s.address.port()
            });
            if let Some(o) = known {
                s.address = o.address;
                s.unresolved = None;
            }
        }
    }
}

/// The background service that resolves the names.
pub struct DnsRefresh {
    control: Arc<Control>,
}

impl DnsRefresh {
    pub fn new(control: Arc<Control>) -> DnsRefresh {
        DnsRefresh { control }
    }

    /// Looks up every named server of the running config.
    async fn round(&self, nameservers: &mut Option<(Vec<SocketAddr>, TokioResolver)>) {
        let config = self.control.config();
        let settings = &config.resolver;
        let asks: Vec<(String, String, String, u16)> = config
            .clusters
            .iter()
            .flat_map(|c| {
                c.servers.iter().filter_map(|s| {
                    let host = s.host.clone()?;
                    Some((c.name.clone(), s.name.clone(), host, s.address.port()))
                })
            })
            .collect();
        if asks.is_empty() {
            return;
        }
        let resolver = if settings.nameservers.is_empty() {
            None
        } else {
            if nameservers.as_ref().map(|(n, _)| n) != Some(&settings.nameservers) {
                *nameservers = Some((settings.nameservers.clone(), build(settings)));
            }
            nameservers.as_ref().map(|(_, r)| r)
        };
        let looked = asks.iter().map(|(_, _, host, port)| async move {
            let shown = format!("{host}:{port}");
            let found = tokio::time::timeout(settings.timeout, look_up(resolver, host, *port));
            match found.await {
                Ok(Ok(addr)) => Ok(addr),
                Ok(Err(why)) => Err(format!("`{shown}` does not resolve: {why}")),
                Err(_) => Err(format!(
                    "`{shown}` does not resolve: no answer in {:?}",
                    settings.timeout
                )),
            }
        });
        let results = futures::future::join_all(looked).await;
        let answers = asks
            .into_iter()
            .zip(results)
            .map(|((cluster, server, host, _), result)| Answer {
                cluster,
                server,
                host,
                result,
            })
            .collect();
        self.control.resolved(answers);
    }
}

/// A resolver asking `settings.nameservers` (UDP, then TCP for a truncated answer); its
/// answers are cached for their TTL.
fn build(settings: &Resolver) -> TokioResolver {
    let servers: Vec<NameServerConfig> = settings
        .nameservers
        .iter()
        .flat_map(|&a| {
            [
                NameServerConfig::new(a, Protocol::Udp),
                NameServerConfig::new(a, Protocol::Tcp),
            ]
        })
        .collect();
    let config = ResolverConfig::from_parts(None, Vec::new(), servers);
    let mut opts = ResolverOpts::default();
    opts.timeout = settings.timeout;
    opts.attempts = 2;
    TokioResolver::builder_with_config(config, TokioConnectionProvider::default())
        .with_options(opts)
        .build()
}

/// `host`'s first address with `port`: from the nameservers' resolver, or the system's.
async fn look_up(
    resolver: Option<&TokioResolver>,
    host: &str,
    port: u16,
) -> Result<SocketAddr, String> {
    match resolver {
        Some(r) => {
            let ips = r.lookup_ip(host).await.map_err(|e| e.to_string())?;
            let ip = ips.iter().next().ok_or("no address")?;
            Ok(SocketAddr::new(ip, port))
        }
        None => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| e.to_string())?
            .next()
            .ok_or_else(|| "no address".to_string()),
    }
}

#[async_trait]
impl BackgroundService for DnsRefresh {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut nameservers = None;
        loop {
            self.round(&mut nameservers).await;
            let every = self.control.config().resolver.interval;
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = self.control.names_changed.notified() => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}
