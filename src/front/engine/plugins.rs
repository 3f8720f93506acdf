//! The routing plugins of a request on tether's engine: its request and route phases run
//! over Pingora's `RequestHeader`, built from the engine's view only for a listener with
//! plugins (it allocates; requests without plugins never build one), by the pipeline's
//! code (`pipeline::plugins`). Plugins that change messages
//! (`Plugin::edits_messages`) are not run here: their listeners' requests go to
//! pingora-proxy.

use super::conn::Conn;
use super::serve::Engine;
use crate::pipeline::plugins::{self, PluginAnswer};
use crate::pipeline::RequestCtx;
use crate::state::snapshot::Snapshot;
use pingora_http::RequestHeader;
use std::sync::Arc;
use tether_plugins::Chain;

impl Engine {
    /// Runs the plugins of a request headed for cluster `start` (the listener's, or its
    /// route's; `route_chain` the route's plugins): the cluster they choose (a server they
    /// prefer for a new session goes in `ctx`), or a plugin's own answer.
    pub(super) async fn plugins(
        &self,
        c: &Conn,
        ctx: &mut RequestCtx,
        snapshot: &Arc<Snapshot>,
        start: usize,
        route_chain: Option<&Chain>,
    ) -> Result<usize, PluginAnswer> {
        let Some(mut req) = request_header(c) else {
            // The head parser and the `http` crate take the same names, methods and
            // targets: not expected, but not a panic either.
            return Err(PluginAnswer {
                status: 400,
                headers: Vec::new(),
                body: crate::pipeline::error_body(400).to_string(),
            });
        };
        let digest = c.stream.get_proxy_digest();
        let facts = (
            plugins::proxy_facts(digest.as_deref()),
            plugins::tls_facts(c.tls().as_deref()),
        );
        plugins::choose(
            snapshot,
            self.listener,
            &self.name,
            ctx,
            start,
            route_chain,
            &mut req,
            facts,
        )
        .await
    }
}

/// The request's head as Pingora's `RequestHeader` (names lower-cased, values as sent).
fn request_header(c: &Conn) -> Option<RequestHeader> {
    let method = http::Method::from_bytes(c.head.method.of(&c.buf)).ok()?;
    let mut req = RequestHeader::build(method, c.head.target.of(&c.buf), None).ok()?;
    req.set_version(match c.head.minor {
        0 => http::Version::HTTP_10,
        _ => http::Version::HTTP_11,
    });
    for (name, value) in c.head.fields(&c.buf) {
        let name = http::HeaderName::from_bytes(name).ok()?;
        let value = http::HeaderValue::from_bytes(value).ok()?;
        req.append_header(name, value).ok()?;
    }
    Some(req)
}
