//! What a reload says it could not apply: settings Pingora fixes at start, and run-time
//! changes (drain, weight) that win over the file's values.

use crate::config::Config;
use crate::state::snapshot::Snapshot;

/// Each server of `new` whose run-time change (still in `current`) hides a different
/// state or weight in the file, said in a line for the log and the reload's answer.
pub(super) fn shadowed(current: &Snapshot, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for c in &new.clusters {
        let Some(router) = current.clusters.iter().find(|r| r.name == c.name) else {
            continue;
        };
        for s in &c.servers {
            let Some(slot) = router.servers().iter().find(|o| o.config.name == s.name) else {
                continue;
            };
            if !slot.live.is_overridden() {
                continue;
            }
            let (state, weight) = (slot.live.state(), slot.live.weight());
            let mut fields = Vec::new();
            if state != s.state {
                fields.push(format!("state {} (file: {})", state.name(), s.state.name()));
            }
            if weight != s.weight {
                fields.push(format!("weight {weight} (file: {})", s.weight));
            }
            if !fields.is_empty() {
                out.push(format!(
                    "{}/{}: the run-time {} wins over the file; DELETE /clusters/{}/servers/{}/overrides or POST /reload?drop_overrides=true to take the file's",
                    c.name,
                    s.name,
                    fields.join(" and "),
                    c.name,
                    s.name
                ));
            }
        }
    }
    out
}

/// Settings Pingora fixes at start that differ between `old` and `new`.
pub(super) fn fixed_at_start(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if old.server != new.server {
        out.push("server (Pingora settings)".to_string());
    }
    let addrs = |c: &Config| {
        c.listeners
            .iter()
            .map(|l| (l.name.clone(), l.address))
            .collect::<Vec<_>>()
    };
    if addrs(old) != addrs(new) {
        out.push("listeners (names or addresses)".to_string());
    }
    let tls_kind = |c: &Config| {
        c.listeners
            .iter()
            .map(|l| (l.name.clone(), l.tls.is_some(), l.h2c))
            .collect::<Vec<_>>()
    };
    if tls_kind(old) != tls_kind(new) {
        out.push("listeners[].tls or h2c added or removed (certificates do reload)".to_string());
    }
    if old.admin.as_ref().map(|a| a.address) != new.admin.as_ref().map(|a| a.address) {
        out.push("admin.address".to_string());
    }
    // The admin listener is not rebuilt by a reload: it keeps its TLS, or its lack of it.
    if old.admin.as_ref().map(|a| &a.tls) != new.admin.as_ref().map(|a| &a.tls) {
        out.push("admin.tls (the admin API keeps the TLS it started with)".to_string());
    }
    let auth = |c: &Config| {
        c.admin
            .as_ref()
            .map(|a| (a.token.clone(), a.role_tokens.clone()))
    };
    if auth(old) != auth(new) {
        // The admin listener cannot be closed or opened without an upgrade; its token is
        // kept with it, so that removing it from the file never opens the API.
        out.push(
            "admin (section or token_file: the admin API keeps the token it started with)"
                .to_string(),
        );
    }
    if old.state_dir != new.state_dir {
        out.push("state_dir".to_string());
    }
    if old.metrics != new.metrics {
        out.push("metrics (address or tls)".to_string());
    }
    if old.access_log != new.access_log {
        out.push("access_log".to_string());
    }
    if old.shared_state != new.shared_state {
        out.push("shared_state".to_string());
    }
    out
}
