//! Routing plugins for tether (DESIGN section 5): a trait with a do-nothing default for
//! each phase, explicit result enums, an explicit registry from names to constructors, and
//! the built-in `route_lookup` (the nginx `auth_request` recipe, done safely) and
//! `route_table` plugins.
//!
//! A plugin may only name clusters and servers the config knows ([`KnownTargets`]): a
//! look-up service cannot send traffic to an arbitrary address.

mod chain;
mod config_error;
mod connection;
mod duration;
mod key;
mod lens;
mod metrics;
mod registry;
mod resolve;
pub mod route_lookup;
pub mod route_table;
pub mod script;
mod state;
mod target;

pub use chain::Chain;
pub use connection::{printable, Connection, ProxyFacts, TlsFacts};
pub use duration::parse_duration;
pub use key::{ConnectionKey, KeySource};
pub use lens::{SessionLens, SessionView};
pub use registry::{build, parse, PluginConfigError, PluginSpec, NAMES};
pub use resolve::{no_name_lookups, resolve, without_name_lookups, NOT_LOOKED_UP};
pub use state::RequestState;
pub use target::{KnownTargets, Target};

use async_trait::async_trait;
use pingora_http::{RequestHeader, ResponseHeader};

/// Percent-encodes everything but RFC 3986 unreserved characters (for a key in a URL).
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// What the request phase decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// Go on with the next plugin and then routing.
    Continue,
    /// Answer the client now with this status, these fields and a short plain-text body.
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
}

/// What the route phase decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// No opinion: the next plugin, or the listener's cluster.
    Continue,
    /// Answer the client now.
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Send the request to this cluster (and, for a new session, this server).
    To(Target),
}

/// A summary of a finished request for the logging phase.
#[derive(Debug, Clone)]
pub struct LogSummary {
    pub status: u16,
    pub cluster: Option<usize>,
    pub server: Option<usize>,
}

/// A routing plugin. Every phase has a do-nothing default; a plugin overrides the ones it
/// needs. Phases run in this order: request, route, upstream request, upstream response,
/// response, logging; each is given the request's [`RequestState`], where a plugin keeps
/// what one phase tells a later one.
#[async_trait]
pub trait Plugin: Send + Sync {
    /// The registry name (`route_lookup`, ...).
    fn name(&self) -> &'static str;

    /// Does the plugin change messages (its request, upstream request, upstream response
    /// or response phase)? tether's HTTP/1 engine runs the request, route and logging
    /// phases of plugins that do not over its own view of a request, and builds Pingora's
    /// header types only for them; a listener whose chains change messages has its
    /// requests served by pingora-proxy, which keeps those types for every request.
    fn edits_messages(&self) -> bool {
        false
    }

    /// Before routing; may answer the request itself.
    async fn request(
        &self,
        _req: &mut RequestHeader,
        _conn: &Connection,
        _state: &mut RequestState,
    ) -> Flow {
        Flow::Continue
    }

    /// Chooses the cluster (and optionally the server) for the request.
    async fn route(
        &self,
        _req: &RequestHeader,
        _conn: &Connection,
        _state: &mut RequestState,
    ) -> Route {
        Route::Continue
    }

    /// Adjusts the request sent to the server (each attempt).
    async fn upstream_request(&self, _req: &mut RequestHeader, _state: &mut RequestState) {}

    /// Adjusts the server's response header before anything else looks at it.
    async fn upstream_response(&self, _resp: &mut ResponseHeader, _state: &mut RequestState) {}

    /// Adjusts the response header sent to the client.
    async fn response(&self, _resp: &mut ResponseHeader, _state: &mut RequestState) {}

    /// After the request; must not block.
    fn logging(&self, _summary: &LogSummary, _state: &mut RequestState) {}
}
