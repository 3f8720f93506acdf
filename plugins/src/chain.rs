//! A plugin chain: the plugins of one listener or cluster, run in order.

use crate::{Connection, Flow, KnownTargets, LogSummary, Plugin, PluginSpec, RequestState, Route};
use pingora_http::{RequestHeader, ResponseHeader};
use std::sync::Arc;

/// One plugin of a chain, with what it was built from.
#[derive(Clone)]
struct Link {
    spec: PluginSpec,
    /// The names the plugin resolved its answers against. Plugins hold cluster and server
    /// *indexes* (in caches, in name tables), so a plugin is only valid for a config whose
    /// clusters and servers sit at the same places.
    targets: Arc<KnownTargets>,
    plugin: Arc<dyn Plugin>,
}

#[derive(Default, Clone)]
pub struct Chain {
    plugins: Vec<Link>,
}

impl Chain {
    /// Builds the chain for `specs` against `targets`. A plugin of `previous` is reused (so
    /// a reload that does not touch it keeps its state, such as a look-up cache) only when
    /// its spec is equal *and* it was built against the same clusters and servers in the
    /// same order; otherwise it is rebuilt, because its cached indexes would point at other
    /// clusters (or past the end of the list) in the new config.
    pub fn new(
        specs: &[PluginSpec],
        previous: Option<&Chain>,
        targets: &Arc<KnownTargets>,
        build: impl Fn(&PluginSpec) -> Arc<dyn Plugin>,
    ) -> Chain {
        let plugins = specs
            .iter()
            .map(|spec| {
                let reused = previous.and_then(|p| {
                    p.plugins
                        .iter()
                        .find(|l| &l.spec == spec && *l.targets == **targets)
                });
                let plugin = reused
                    .map(|l| l.plugin.clone())
                    .unwrap_or_else(|| build(spec));
                Link {
                    spec: spec.clone(),
                    targets: targets.clone(),
                    plugin,
                }
            })
            .collect();
        Chain { plugins }
    }

    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// Does a plugin of the chain change messages ([`Plugin::edits_messages`])?
    pub fn edits_messages(&self) -> bool {
        self.each().any(|p| p.edits_messages())
    }

    fn each(&self) -> impl Iterator<Item = &Arc<dyn Plugin>> {
        self.plugins.iter().map(|l| &l.plugin)
    }

    /// The first answer a plugin gives, or `Continue`.
    pub async fn request(
        &self,
        req: &mut RequestHeader,
        conn: &Connection,
        state: &mut RequestState,
    ) -> Flow {
        for p in self.each() {
            if let f @ Flow::Respond { .. } = p.request(req, conn, state).await {
                return f;
            }
        }
        Flow::Continue
    }

    /// The first routing opinion a plugin gives, or `Continue`.
    pub async fn route(
        &self,
        req: &RequestHeader,
        conn: &Connection,
        state: &mut RequestState,
    ) -> Route {
        for p in self.each() {
            match p.route(req, conn, state).await {
                Route::Continue => continue,
                decided => return decided,
            }
        }
        Route::Continue
    }

    pub async fn upstream_request(&self, req: &mut RequestHeader, state: &mut RequestState) {
        for p in self.each() {
            p.upstream_request(req, state).await;
        }
    }

    pub async fn upstream_response(&self, resp: &mut ResponseHeader, state: &mut RequestState) {
        for p in self.each() {
            p.upstream_response(resp, state).await;
        }
    }

    pub async fn response(&self, resp: &mut ResponseHeader, state: &mut RequestState) {
        for p in self.each() {
            p.response(resp, state).await;
        }
    }

    pub fn logging(&self, summary: &LogSummary, state: &mut RequestState) {
        for p in self.each() {
            p.logging(summary, state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route_lookup::Settings;

    fn spec() -> PluginSpec {
        let entry: serde_yaml::Value = serde_yaml::from_str(
            "{ name: route_lookup, key: { header: X-User }, url: 'http://127.0.0.1:9/r/{key}', answer: { header: X-Route } }",
        )
        .unwrap();
        PluginSpec::RouteLookup(Settings::parse(&entry).unwrap())
    }

    fn targets(clusters: &[(&'static str, Vec<&'static str>)]) -> Arc<KnownTargets> {
        Arc::new(KnownTargets::new(clusters.iter().cloned()))
    }

    fn chain(previous: Option<&Chain>, targets: &Arc<KnownTargets>) -> Chain {
        Chain::new(&[spec()], previous, targets, |s| crate::build(s, targets))
    }

    fn same_plugin(a: &Chain, b: &Chain) -> bool {
        Arc::ptr_eq(&a.plugins[0].plugin, &b.plugins[0].plugin)
    }

    #[tokio::test]
    async fn plugins_are_reused_only_against_the_same_clusters() {
        let first = targets(&[("shop", vec!["a", "b"]), ("was", vec!["w1"])]);
        let old = chain(None, &first);
        // Same spec, same clusters and servers in the same places: the cache survives.
        let same = targets(&[("shop", vec!["a", "b"]), ("was", vec!["w1"])]);
        assert!(same_plugin(&old, &chain(Some(&old), &same)));
        // Reordered clusters, a removed cluster, reordered or renamed servers: the old
        // plugin's cached indexes would be wrong, so it is rebuilt.
        for changed in [
            targets(&[("was", vec!["w1"]), ("shop", vec!["a", "b"])]),
            targets(&[("was", vec!["w1"])]),
            targets(&[("shop", vec!["b", "a"]), ("was", vec!["w1"])]),
            targets(&[("shop", vec!["a", "c"]), ("was", vec!["w1"])]),
        ] {
            let next = chain(Some(&old), &changed);
            assert!(!same_plugin(&old, &next), "{changed:?}");
        }
    }
}
