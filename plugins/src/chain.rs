//! A plugin chain: the plugins of one listener or cluster, run in order.

use crate::{Flow, LogSummary, Plugin, PluginSpec, Route};
use pingora_http::{RequestHeader, ResponseHeader};
use std::sync::Arc;

#[derive(Default, Clone)]
pub struct Chain {
    plugins: Vec<(PluginSpec, Arc<dyn Plugin>)>,
}

impl Chain {
    /// Builds the chain for `specs`; plugins whose spec equals one of `previous` are reused,
    /// so a reload that does not touch a plugin keeps its state (a look-up cache).
    pub fn new(
        specs: &[PluginSpec],
        previous: Option<&Chain>,
        build: impl Fn(&PluginSpec) -> Arc<dyn Plugin>,
    ) -> Chain {
        let plugins = specs
            .iter()
            .map(|spec| {
                let reused = previous.and_then(|p| p.plugins.iter().find(|(s, _)| s == spec));
                let plugin = reused
                    .map(|(_, p)| p.clone())
                    .unwrap_or_else(|| build(spec));
                (spec.clone(), plugin)
            })
            .collect();
        Chain { plugins }
    }

    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    fn each(&self) -> impl Iterator<Item = &Arc<dyn Plugin>> {
        self.plugins.iter().map(|(_, p)| p)
    }

    /// The first answer a plugin gives, or `Continue`.
    pub async fn request(&self, req: &mut RequestHeader) -> Flow {
        for p in self.each() {
            if let f @ Flow::Respond { .. } = p.request(req).await {
                return f;
            }
        }
        Flow::Continue
    }

    /// The first routing opinion a plugin gives, or `Continue`.
    pub async fn route(&self, req: &RequestHeader) -> Route {
        for p in self.each() {
            match p.route(req).await {
                Route::Continue => continue,
                decided => return decided,
            }
        }
        Route::Continue
    }

    pub async fn upstream_request(&self, req: &mut RequestHeader) {
        for p in self.each() {
            p.upstream_request(req).await;
        }
    }

    pub async fn upstream_response(&self, resp: &mut ResponseHeader) {
        for p in self.each() {
            p.upstream_response(resp).await;
        }
    }

    pub async fn response(&self, resp: &mut ResponseHeader) {
        for p in self.each() {
            p.response(resp).await;
        }
    }

    pub fn logging(&self, summary: &LogSummary) {
        for p in self.each() {
            p.logging(summary);
        }
    }
}
