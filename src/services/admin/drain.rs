//! A drain that finishes: `POST /clusters/C/servers/S/drain?wait=45m&then=stop`
//! drains the server, then holds the answer until its last live session has expired (or
//! the wait is over), and stops it when asked; `GET .../sessions` shows where it stands.
//! `tether drain` is the same from the command line.

use super::{control_error, error, json};
use crate::config::ServerState;
use crate::services::control::{Control, SessionsNow};
use http::{Response, StatusCode};
use log::info;
use std::time::Duration;

/// The longest a drain may be waited for in one call.
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// What the query asks: how long to wait, and whether to stop the server once empty.
pub struct Wait {
    pub limit: Duration,
    pub then_stop: bool,
}

/// `wait=DURATION` and `then=stop` from a query; an error for anything else.
pub fn parse_query(query: Option<&str>) -> Result<Option<Wait>, String> {
    let mut limit = None;
    let mut then_stop = false;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("wait", v)) => {
                let d = tether_plugins::parse_duration(v)?;
                if d.is_zero() || d > MAX_WAIT {
                    return Err(format!("wait `{v}` must be between 1ms and 24h"));
                }
                limit = Some(d);
            }
            Some(("then", "stop")) => then_stop = true,
            Some(("then", v)) => return Err(format!("then `{v}`: only `stop` is known")),
            _ => return Err(format!("unknown parameter `{pair}` (wait, then)")),
        }
    }
    match (limit, then_stop) {
        (None, true) => Err("then=stop needs wait=DURATION".into()),
        (None, false) => Ok(None),
        (Some(limit), then_stop) => Ok(Some(Wait { limit, then_stop })),
    }
}

/// A server's sessions as JSON.
pub fn sessions_json(cluster: &str, server: &str, s: &SessionsNow) -> serde_json::Value {
    serde_json::json!({
        "cluster": cluster,
        "server": server,
        "state": s.state.name(),
        "live_sessions": s.live,
        "empty_in_seconds": s.empty_in_s,
        "empty_by": (s.live > 0).then(|| crate::services::control::empty_by(s.empty_in_s)),
        "knows_all": s.knows_all,
    })
}

/// `GET /clusters/C/servers/S/sessions`.
pub fn sessions(control: &Control, cluster: &str, server: &str) -> Response<Vec<u8>> {
    match control.sessions_now(cluster, server) {
        Ok(Some(s)) => json(StatusCode::OK, sessions_json(cluster, server, &s)),
        Ok(None) => not_counted(cluster),
        Err(e) => control_error(e),
    }
}

fn not_counted(cluster: &str) -> Response<Vec<u8>> {
    error(
        StatusCode::CONFLICT,
        format!("cluster `{cluster}` does not count live sessions (not sticky, or session_table_max: 0)"),
    )
}

/// The wait of a drain already set: 200 once empty (stopped if asked), 504 when the wait
/// ran out (the server stays draining).
pub async fn wait(
    control: &Control,
    peer: &str,
    cluster: &str,
    server: &str,
    wait: Wait,
) -> Response<Vec<u8>> {
    let every = Duration::from_secs(1).min(wait.limit);
    let (last, empty) = match control.wait_empty(cluster, server, wait.limit, every).await {
        Ok(r) => r,
        Err(e) => return control_error(e),
    };
    let Some(mut last) = last else {
        return not_counted(cluster);
    };
    if !empty {
        let mut body = sessions_json(cluster, server, &last);
        body["empty"] = false.into();
        return json(StatusCode::GATEWAY_TIMEOUT, body);
    }
    if wait.then_stop {
        match control.set_state(cluster, server, ServerState::Stopped) {
            Ok(_) => {
                info!("admin: {peer}'s drain of {cluster}/{server} finished: stopped");
                last.state = ServerState::Stopped;
            }
            Err(e) => return control_error(e),
        }
    } else {
        info!("admin: {peer}'s drain of {cluster}/{server} finished: no live session left");
    }
    let mut body = sessions_json(cluster, server, &last);
    body["empty"] = true.into();
    json(StatusCode::OK, body)
}

#[cfg(test)]
mod tests {
    use super::parse_query;

    #[test]
    fn a_drains_query() {
        assert!(parse_query(None).unwrap().is_none());
        let w = parse_query(Some("wait=45m&then=stop")).unwrap().unwrap();
        assert_eq!((w.limit.as_secs(), w.then_stop), (2700, true));
        assert!(parse_query(Some("then=stop")).is_err());
        assert!(parse_query(Some("wait=soon")).is_err());
        assert!(parse_query(Some("wait=25h")).is_err());
        assert!(parse_query(Some("wait=1m&then=delete")).is_err());
        assert!(parse_query(Some("hurry=1")).is_err());
    }
}
