//! Asking the look-up service: one GET on a pooled keep-alive connection, the answer read
//! from a header or a small JSON body, checked against the configured targets.

use super::settings::{AnswerSource, Settings};
use crate::percent_encode;
use crate::target::{KnownTargets, Target};
use pingora_core::connectors::http::Connector;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_http::RequestHeader;
use std::sync::Arc;
use std::time::Duration;

/// Largest answer body read.
const MAX_BODY: usize = 64 * 1024;
/// Idle look-up connections are kept this long for reuse.
const IDLE: Duration = Duration::from_secs(60);

/// A usable answer of the service (cached).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Route(Target),
    /// The service knows no route for the key (404, or no target in the answer).
    NoRoute,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum LookupError {
    #[error("the look-up service did not answer in time")]
    Timeout,
    /// Connecting or talking to the service failed.
    #[error("look-up failed: {0}")]
    Io(String),
    /// The service answered with an unexpected status.
    #[error("the look-up service answered {0}")]
    Status(u16),
    /// The answer named something the config does not have.
    #[error("the look-up service named `{0}`, which is not a configured cluster or server")]
    Rejected(String),
    /// The circuit breaker is open: the service was not asked.
    #[error("the look-up service failed repeatedly and is not asked for a while")]
    CircuitOpen,
}

/// The request path for `key`: `template` with `{key}` replaced by the percent-encoded key.
/// A key of `.` or `..` has its dots encoded as well: as a path segment it would be a dot
/// segment, which clients, proxies and servers resolve (`/route/..` is `/`), so the service
/// would be asked about another path.
pub fn request_path(template: &str, key: &str) -> String {
    let encoded = match key {
        "." => "%2E".to_string(),
        ".." => "%2E%2E".to_string(),
        _ => percent_encode(key),
    };
    template.replace("{key}", &encoded)
}

pub struct Client {
    connector: Connector,
    peer: HttpPeer,
    settings: Settings,
    targets: Arc<KnownTargets>,
}

impl Client {
    pub fn new(settings: &Settings, targets: Arc<KnownTargets>) -> Self {
        let mut peer = HttpPeer::new(settings.addr, false, String::new());
        peer.options.connection_timeout = Some(settings.timeout);
        peer.options.read_timeout = Some(settings.timeout);
        peer.options.idle_timeout = Some(IDLE);
        Client {
            connector: Connector::new(None),
            peer,
            settings: settings.clone(),
            targets,
        }
    }

    /// One look-up (the caller bounds it with the timeout).
    pub async fn ask(&self, key: &str) -> Result<Answer, LookupError> {
        let io = |e: Box<pingora_error::Error>| LookupError::Io(e.to_string());
        let path = request_path(&self.settings.path, key);
        let mut req = RequestHeader::build("GET", path.as_bytes(), None).map_err(io)?;
        req.insert_header("Host", &self.settings.host).map_err(io)?;
        req.insert_header("Accept", "application/json")
            .map_err(io)?;
        for (name, value) in &self.settings.headers {
            req.insert_header(name.clone(), value).map_err(io)?;
        }
        let (mut session, _reused) = self
            .connector
            .get_http_session(&self.peer)
            .await
            .map_err(io)?;
        session
            .write_request_header(Box::new(req))
            .await
            .map_err(io)?;
        session.finish_request_body().await.map_err(io)?;
        session.read_response_header().await.map_err(io)?;
        let resp = session.response_header().expect("just read").clone();
        let mut body = Vec::new();
        while let Some(chunk) = session.read_response_body().await.map_err(io)? {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(LookupError::Io("answer body too large".into()));
            }
            body.extend_from_slice(&chunk);
        }
        self.connector
            .release_http_session(session, &self.peer, Some(IDLE))
            .await;
        match resp.status.as_u16() {
            200 => {}
            404 | 204 => return Ok(Answer::NoRoute),
            s => return Err(LookupError::Status(s)),
        }
        let name = match &self.settings.answer {
            AnswerSource::Header(h) => resp
                .headers
                .get(h.as_str())
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            AnswerSource::Json(field) => serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get(field).and_then(|t| t.as_str()).map(str::to_string)),
        };
        match name.as_deref().map(str::trim) {
            None | Some("") => Ok(Answer::NoRoute),
            Some(n) => self
                .targets
                .resolve(n)
                .map(Answer::Route)
                .ok_or_else(|| LookupError::Rejected(n.chars().take(100).collect())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_keys_do_not_become_dot_segments() {
        for (key, path) in [
            (".", "/route/%2E"),
            ("..", "/route/%2E%2E"),
            // Not dot segments: left as they are (`.` is unreserved).
            ("...", "/route/..."),
            ("a.b", "/route/a.b"),
            ("../x", "/route/..%2Fx"),
            ("001", "/route/001"),
        ] {
            assert_eq!(request_path("/route/{key}", key), path, "{key}");
        }
        assert_eq!(request_path("/r?user={key}", ".."), "/r?user=%2E%2E");
    }
}
