//! Adding routes to a listener as tether will read them: no route that can never win, no
//! exclusion that excludes nothing, each left-out rule said in a comment.

use super::doc::{Listener, Route};
use super::docroot::{self, DocumentRoot, WebServer};

fn active(r: &Route) -> bool {
    !r.disabled
}

fn same(a: &Route, b: &Route) -> bool {
    a.host == b.host && a.path == b.path && a.exclude == b.exclude
}

/// A host tether's routes take: a name, `*.domain` or `*`, with an optional `:port`.
fn valid_host(host: &str) -> bool {
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) if !n.contains(':') || n.ends_with(']') => (n, Some(p)),
        _ => (host, None),
    };
    let bare = name.strip_prefix("*.").unwrap_or(name);
    port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
        && (name == "*"
            || (!bare.is_empty()
                && bare
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b))))
}

/// A path tether's routes take: it starts with `/` or `*`. A request path starts with
/// `/`, so mod_jk's leading `?` (any one character) can only have matched that.
fn path(r: &mut Route) {
    if let Some(rest) = r.path.strip_prefix('?') {
        r.path = format!("/{rest}");
    }
}

/// False (and said) when `r`'s host is not one tether routes by.
fn host_ok(l: &mut Listener, r: &Route) -> bool {
    match r.host.as_deref().filter(|h| !valid_host(h)) {
        Some(h) => {
            l.route_notes.push(format!(
                "{}: `{h}` is not a host name tether routes by: left out",
                r.note.as_deref().unwrap_or("")
            ));
            false
        }
        None => true,
    }
}

/// Adds `r` unless an enabled route with the same host and path (and kind) is there: the
/// first one wins (callers add routes in their source's order of precedence).
pub fn add(l: &mut Listener, mut r: Route) {
    path(&mut r);
    if !host_ok(l, &r) {
        return;
    }
    if active(&r) {
        if let Some(first) = l.routes.iter().find(|o| active(o) && same(o, &r)) {
            if first.cluster != r.cluster || first.exclude {
                let by = first.note.clone().unwrap_or_default();
                l.route_notes.push(format!(
                    "{}: `{}`{} → {} is the pattern of the route to {} ({by}), which wins: left out",
                    r.note.as_deref().unwrap_or(""),
                    r.path,
                    r.host.as_ref().map(|h| format!(" on {h}")).unwrap_or_default(),
                    r.cluster,
                    first.cluster
                ));
            }
            return;
        }
    }
    l.routes.push(r);
}

/// Adds an exclusion when a route of the listener sends to its cluster.
pub fn add_exclusion(l: &mut Listener, mut r: Route, said: &str) {
    path(&mut r);
    if !host_ok(l, &r) {
        return;
    }
    if !mounted(l).contains(&r.cluster) {
        l.route_notes.push(format!(
            "{said}: no route of this listener sends to {}: the exclusion excludes nothing, left out",
            r.cluster
        ));
        return;
    }
    if let Some(first) = l
        .routes
        .iter()
        .find(|o| active(o) && same(o, &r) && o.cluster == r.cluster)
    {
        if active(&r) && first.cluster == r.cluster {
            return;
        }
    }
    l.routes.push(r);
}

/// The clusters enabled routes of `l` send to, in order.
pub fn mounted(l: &Listener) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in l.routes.iter().filter(|r| active(r) && !r.exclude) {
        if !out.contains(&r.cluster) {
            out.push(r.cluster.clone());
        }
    }
    out
}

/// A listener without enabled routes gets `default` as its cluster; with routes, the
/// requests they decline are answered from `root` as `server` answered them, or get 404
/// (said).
pub fn finish(l: &mut Listener, default: &str, root: Option<&DocumentRoot>, server: &WebServer) {
    if mounted(l).is_empty() {
        l.cluster = Some(default.to_string());
        l.notes.push(format!(
            "REVIEW: no route sends anything to a cluster here: every request goes to `{default}`"
        ));
        docroot::unused(l, root);
    } else {
        docroot::serve(l, root, server);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(host: Option<&str>, path: &str, cluster: &str) -> Route {
        Route {
            host: host.map(str::to_string),
            path: path.into(),
            cluster: cluster.into(),
            exclude: false,
            disabled: false,
            note: Some("src:1".into()),
            max_request_body: None,
        }
    }

    #[test]
    fn routes_tether_would_warn_about_or_refuse_are_comments() {
        let mut l = Listener::default();
        add(&mut l, r(None, "?x/*", "a"));
        add(&mut l, r(None, "/x/*", "b"));
        add(&mut l, r(Some("bad host"), "/y", "a"));
        add(&mut l, r(None, "/x/*", "a"));
        assert_eq!(l.routes.len(), 1);
        assert_eq!(l.routes[0].path, "/x/*");
        assert_eq!(l.route_notes.len(), 2, "{:?}", l.route_notes);
        assert!(l.route_notes[0].contains("which wins"));
        assert!(l.route_notes[1].contains("not a host name"));
        let mut ex = r(None, "/x/*.gif", "b");
        ex.exclude = true;
        add_exclusion(&mut l, ex.clone(), "src:2");
        assert!(l.route_notes[2].contains("excludes nothing"));
        ex.cluster = "a".into();
        add_exclusion(&mut l, ex, "src:2");
        assert_eq!(l.routes.len(), 2);
        assert_eq!(mounted(&l), ["a"]);
        for h in [
            "www.example.com",
            "*.example.com",
            "*",
            "*:443",
            "[::1]:80",
            "x:80",
        ] {
            assert!(valid_host(h), "{h}");
        }
        for h in ["a b", "x:0", "x:port", "w*w.example.com", ""] {
            assert!(!valid_host(h), "{h}");
        }
    }
}
