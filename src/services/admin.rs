//! The admin API (DESIGN section 6), on its own listener: status, drain/stop/activate,
//! weight, reload. Like mod_jk's status worker or HAProxy's runtime API, but JSON; and the
//! operator console (`/ui`, [`console`]), a page that reads and calls this API.
//!
//! Every call needs `Authorization: Bearer <token>` when a token is configured. Errors are
//! JSON `{"error": "..."}` with 400 (bad value), 401, 404 (unknown path, cluster or server)
//! or 405. Every change is logged with the caller's address.

mod auth;
mod console;
mod drain;

use crate::config::{Role, ServerState};
use crate::services::control::{Control, ControlError};
use async_trait::async_trait;
use http::{Method, Response, StatusCode};
use log::{info, warn};
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;
use std::sync::Arc;

/// Largest request body read (a weight is a few bytes; a request to explain, its fields).
const MAX_BODY: usize = 1024;
const MAX_EXPLAIN_BODY: usize = 64 * 1024;

pub struct AdminApp {
    control: Arc<Control>,
    /// The token of the config the process started with. The admin listener is fixed
    /// until a binary upgrade, and so is its authentication: a reload that removes the
    /// `admin:` section or its token must not leave an open, unauthenticated API behind.
    token: Option<String>,
    role_tokens: Vec<(String, Role)>,
}

impl AdminApp {
    /// The admin API with the authentication of `admin` (the config at start).
    pub fn new(control: Arc<Control>, admin: &crate::config::Admin) -> Self {
        AdminApp {
            control,
            token: admin.token.clone(),
            role_tokens: admin.role_tokens.clone(),
        }
    }
}

/// Logs a refused call, at most once a second with the number refused since (a client
/// guessing tokens must not flood the log).
fn refused(peer: &str) {
    static EVERY: crate::base::every::Every = crate::base::every::Every::new(1000);
    if let Some(n) = EVERY.due(crate::routing::now_ms()) {
        warn!("admin: refused a call from {peer}: missing or wrong token ({n} refused since the last such line)");
    }
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(&body).unwrap_or_default();
    bytes.push(b'\n');
    Response::builder()
        .status(status)
        .header("Content-Type", "application/json")
        .header("Content-Length", bytes.len())
        .header("Cache-Control", "no-store")
        .body(bytes)
        .unwrap_or_default()
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response<Vec<u8>> {
    json(status, serde_json::json!({ "error": message.to_string() }))
}

fn control_error(e: ControlError) -> Response<Vec<u8>> {
    match e {
        ControlError::UnknownCluster(_) | ControlError::UnknownServer(..) => {
            error(StatusCode::NOT_FOUND, e)
        }
        ControlError::BadConfig(errors) => {
            let list: Vec<String> = errors
                .errors
                .iter()
                .map(|e| match e.position {
                    Some((l, c)) => format!("{}:{l}:{c}: {}: {}", errors.file, e.path, e.message),
                    None => format!("{}: {}: {}", errors.file, e.path, e.message),
                })
                .collect();
            json(
                StatusCode::BAD_REQUEST,
                serde_json::json!({ "error": "the new config is invalid; the running config stays", "errors": list }),
            )
        }
        ControlError::BadWeight | ControlError::NoConfigFile | ControlError::Tls(_) => {
            error(StatusCode::BAD_REQUEST, e)
        }
    }
}

/// Reads the request body, refusing more than `MAX_BODY` bytes.
async fn body(session: &mut ServerSession) -> Result<Vec<u8>, Response<Vec<u8>>> {
    body_up_to(session, MAX_BODY).await
}

/// Reads the request body, refusing more than `max` bytes.
async fn body_up_to(session: &mut ServerSession, max: usize) -> Result<Vec<u8>, Response<Vec<u8>>> {
    let mut out = Vec::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                out.extend_from_slice(&chunk);
                if out.len() > max {
                    return Err(error(StatusCode::PAYLOAD_TOO_LARGE, "body too large"));
                }
            }
            Ok(None) => return Ok(out),
            Err(e) => {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read body: {e}"),
                ))
            }
        }
    }
}

/// The role a call needs; `None` for a call that is no endpoint (answered 404 or 405).
fn needed(method: &Method, parts: &[&str]) -> Option<Role> {
    match (method, parts) {
        (&Method::GET, ["status"] | ["whoami"] | ["clusters", _, "servers", _, "sessions"]) => {
            Some(Role::Read)
        }
        (&Method::POST, ["explain"]) => Some(Role::Read),
        (&Method::POST, ["clusters", _, "servers", _, _]) => Some(Role::Operate),
        (&Method::PUT, ["clusters", _, "servers", _, "weight"]) => Some(Role::Operate),
        (&Method::POST, ["reload"]) => Some(Role::Admin),
        (&Method::DELETE, ["overrides"] | ["clusters", _, "servers", _, "overrides"]) => {
            Some(Role::Admin)
        }
        _ => None,
    }
}

/// `POST /reload?drop_overrides=true`.
fn drop_overrides(session: &ServerSession) -> bool {
    session.req_header().uri.query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "drop_overrides=true" || p == "drop_overrides=1")
    })
}

impl AdminApp {
    /// `DELETE .../overrides`: the server (or every server) takes the file's values again.
    fn drop(&self, peer: &str, target: Option<(&str, &str)>) -> Response<Vec<u8>> {
        match self.control.drop_overrides(target) {
            Ok(n) => {
                let what = target.map_or("every server".to_string(), |(c, s)| format!("{c}/{s}"));
                info!("admin: {peer} dropped the run-time changes of {what} ({n} had one)");
                json(StatusCode::OK, serde_json::json!({ "dropped": n }))
            }
            Err(e) => control_error(e),
        }
    }
}

#[async_trait]
impl ServeHttp for AdminApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let peer = session
            .client_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|| "unknown".into());
        // The console's page, script and style hold no data: served to anyone, so that the
        // operator can type a token into them.
        if session.req_header().method == Method::GET {
            if let Some(resp) = console::serve(session.req_header().uri.path()) {
                return resp;
            }
        }
        let token = self.token.as_deref();
        let authorization = session
            .req_header()
            .headers
            .get(http::header::AUTHORIZATION);
        let role = auth::role(
            token,
            &self.role_tokens,
            authorization.map(|v| v.as_bytes()),
        );
        let Some(role) = role else {
            refused(&peer);
            let mut resp = error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
            resp.headers_mut()
                .insert("WWW-Authenticate", http::HeaderValue::from_static("Bearer"));
            return resp;
        };
        let method = session.req_header().method.clone();
        let path = session.req_header().uri.path().to_string();
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        if let Some(needed) = needed(&method, &parts).filter(|&n| role < n) {
            return error(
                StatusCode::FORBIDDEN,
                format!(
                    "the `{}` role may not {method} {path} (it needs `{}`)",
                    role.name(),
                    needed.name()
                ),
            );
        }
        match (&method, parts.as_slice()) {
            (&Method::GET, ["status"]) => json(StatusCode::OK, self.control.status()),
            (&Method::GET, ["whoami"]) => {
                // `open`: no token is configured; whoever reaches the address is admin.
                let open = self.token.is_none() && self.role_tokens.is_empty();
                json(
                    StatusCode::OK,
                    serde_json::json!({ "role": role.name(), "open": open }),
                )
            }
            (&Method::POST, ["explain"]) => {
                let body = match body_up_to(session, MAX_EXPLAIN_BODY).await {
                    Ok(b) => b,
                    Err(resp) => return resp,
                };
                let ask: crate::services::explain::Ask = match serde_json::from_slice(&body) {
                    Ok(a) => a,
                    Err(e) => {
                        return error(
                            StatusCode::BAD_REQUEST,
                            format!("the request to explain: {e}"),
                        )
                    }
                };
                let snapshot = self.control.snapshot().load();
                match crate::services::explain::explain(&self.control.config(), &snapshot, &ask) {
                    Ok(answer) => json(StatusCode::OK, answer),
                    Err(e) => error(StatusCode::BAD_REQUEST, e),
                }
            }
            (&Method::POST, ["reload"]) => {
                match self.control.reload_with(drop_overrides(session)) {
                    Ok(report) => {
                        info!(
                            "admin: {peer} reloaded the config; needs upgrade: {:?}",
                            report.needs_upgrade
                        );
                        json(
                            StatusCode::OK,
                            serde_json::json!({
                                "reloaded": true,
                                "needs_upgrade": report.needs_upgrade,
                                "overridden": report.overridden,
                            }),
                        )
                    }
                    Err(e) => {
                        warn!("admin: {peer} asked for a reload that failed: {e}");
                        control_error(e)
                    }
                }
            }
            (&Method::GET, ["clusters", cluster, "servers", server, "sessions"]) => {
                drain::sessions(&self.control, cluster, server)
            }
            (&Method::POST, ["clusters", cluster, "servers", server, "recover"]) => {
                match self.control.recover(cluster, server) {
                    Ok(was_down) => {
                        info!("admin: {peer} recovered {cluster}/{server} (was down: {was_down})");
                        json(
                            StatusCode::OK,
                            serde_json::json!({ "cluster": cluster, "server": server, "recovered": was_down }),
                        )
                    }
                    Err(e) => control_error(e),
                }
            }
            (&Method::POST, ["clusters", cluster, "servers", server, "reset"]) => {
                match self.control.reset_counters(cluster, server) {
                    Ok(()) => {
                        info!("admin: {peer} reset the counters of {cluster}/{server}");
                        json(
                            StatusCode::OK,
                            serde_json::json!({ "cluster": cluster, "server": server, "reset": true }),
                        )
                    }
                    Err(e) => control_error(e),
                }
            }
            (&Method::POST, ["clusters", cluster, "servers", server, action]) => {
                let query = session.req_header().uri.query().map(str::to_string);
                let wait = match (*action, drain::parse_query(query.as_deref())) {
                    ("drain", Ok(w)) => w,
                    ("drain", Err(e)) => return error(StatusCode::BAD_REQUEST, e),
                    _ => None,
                };
                let state = match *action {
                    "drain" => ServerState::Draining,
                    "stop" => ServerState::Stopped,
                    "activate" => ServerState::Active,
                    _ => {
                        return error(
                            StatusCode::NOT_FOUND,
                            format!(
                                "unknown action `{action}` (drain, stop, activate, recover, reset)"
                            ),
                        )
                    }
                };
                match self.control.set_state(cluster, server, state) {
                    Ok(before) => {
                        info!(
                            "admin: {peer} set {cluster}/{server} to {} (was {})",
                            state.name(),
                            before.name()
                        );
                        if let Some(wait) = wait {
                            return drain::wait(&self.control, &peer, cluster, server, wait).await;
                        }
                        json(
                            StatusCode::OK,
                            serde_json::json!({ "cluster": cluster, "server": server, "state": state.name(), "previous": before.name() }),
                        )
                    }
                    Err(e) => control_error(e),
                }
            }
            (&Method::DELETE, ["overrides"]) => self.drop(&peer, None),
            (&Method::DELETE, ["clusters", cluster, "servers", server, "overrides"]) => {
                self.drop(&peer, Some((cluster, server)))
            }
            (&Method::PUT, ["clusters", cluster, "servers", server, "weight"]) => {
                let body = match body(session).await {
                    Ok(b) => b,
                    Err(resp) => return resp,
                };
                let weight = std::str::from_utf8(&body)
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok());
                let Some(weight) = weight else {
                    return control_error(ControlError::BadWeight);
                };
                match self.control.set_weight(cluster, server, weight) {
                    Ok(before) => {
                        info!("admin: {peer} set the weight of {cluster}/{server} to {weight} (was {before})");
                        json(
                            StatusCode::OK,
                            serde_json::json!({ "cluster": cluster, "server": server, "weight": weight, "previous": before }),
                        )
                    }
                    Err(e) => control_error(e),
                }
            }
            (
                _,
                ["status"]
                | ["reload"]
                | ["explain"]
                | ["overrides"]
                | ["clusters", _, "servers", _, _],
            ) => error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{method} is not allowed on {path}"),
            ),
            _ => error(
                StatusCode::NOT_FOUND,
                format!("no such endpoint: {method} {path}"),
            ),
        }
    }
}
