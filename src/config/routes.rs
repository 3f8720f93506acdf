//! Validation of listeners' host/path routes (`listeners[].routes`), and the warnings
//! `tether -t` gives for routes that can never win or exclusions that exclude nothing.

use super::check::Check;
use super::error::ConfigError;
use super::model::{Cluster, Route, RouteAction, RouteOrder, MAX_REQUEST_BODY};
use super::raw::RawRoute;
use std::collections::HashMap;

fn valid_host(host: &str) -> bool {
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) if !n.ends_with(']') || host.starts_with('[') => (n, Some(p)),
        _ => (host, None),
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    let bare = name.strip_prefix("*.").unwrap_or(name);
    let name_ok = name == "*"
        || (!bare.is_empty()
            && !bare.contains('*')
            && bare
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b)));
    port_ok && name_ok
}

/// `route_order: specific | mod_jk` (default `specific`).
pub(super) fn order(raw: Option<&str>, path: &str, check: &mut Check) -> RouteOrder {
    match raw {
        None | Some("specific") => RouteOrder::Specific,
        Some("mod_jk") => RouteOrder::ModJk,
        Some(other) => {
            check.err(
                format!("{path}.route_order"),
                format!("`{other}`: expected `specific` or `mod_jk`"),
            );
            RouteOrder::Specific
        }
    }
}

/// Validates one listener's routes (their plugins are checked later, with the others).
pub(super) fn routes(
    raw: &[RawRoute],
    listener: &str,
    path: &str,
    clusters: &[Cluster],
    clusters_complete: bool,
    check: &mut Check,
) -> Vec<Route> {
    let mut out = Vec::new();
    let mut names = HashMap::new();
    for (i, r) in raw.iter().enumerate() {
        let p = format!("{path}.routes[{i}]");
        let name = r.name.clone().unwrap_or_else(|| format!("{listener}#{i}"));
        if let Some(first) = names.insert(name.clone(), p.clone()) {
            check.err(
                format!("{p}.name"),
                format!("duplicate route name `{name}` (first at {first})"),
            );
        }
        let host = r.host.as_ref().map(|h| h.to_ascii_lowercase());
        if let Some(h) = &host {
            if !valid_host(h) {
                check.err(
                    format!("{p}.host"),
                    format!("`{h}` is not a host (`www.example.com`, `*.example.com`, `*`, with an optional `:port`)"),
                );
            }
        }
        if !r.path.starts_with('/') && !r.path.starts_with('*') {
            check.err(
                format!("{p}.path"),
                format!("`{}` must start with `/` (or `*`)", r.path),
            );
        }
        let actions = [
            r.cluster.is_some(),
            r.respond.is_some(),
            r.redirect.is_some(),
            r.serve.is_some(),
        ];
        let action = match (&r.cluster, &r.respond, &r.redirect) {
            _ if actions.iter().filter(|a| **a).count() != 1 => {
                check.err(
                    p.clone(),
                    "give exactly one of cluster, respond, redirect, serve",
                );
                RouteAction::Respond {
                    status: 404,
                    body: String::new(),
                }
            }
            (Some(c), _, _) => match clusters.iter().position(|k| &k.name == c) {
                Some(i) => RouteAction::Cluster(i),
                None => {
                    if clusters_complete {
                        check.err(format!("{p}.cluster"), format!("unknown cluster `{c}`"));
                    }
                    RouteAction::Cluster(0)
                }
            },
            (_, Some(resp), _) => {
                if !(200..=599).contains(&resp.status) {
                    check.err(format!("{p}.respond.status"), "must be 200-599");
                }
                RouteAction::Respond {
                    status: resp.status,
                    body: resp.body.clone().unwrap_or_default(),
                }
            }
            (_, _, Some(red)) => {
                let status = red.status.unwrap_or(302);
                if ![301, 302, 303, 307, 308].contains(&status) {
                    check.err(
                        format!("{p}.redirect.status"),
                        "must be 301, 302, 303, 307 or 308",
                    );
                }
                if http::HeaderValue::from_str(&red.to).is_err() || red.to.is_empty() {
                    check.err(
                        format!("{p}.redirect.to"),
                        format!("`{}` is not a usable URL", red.to),
                    );
                }
                RouteAction::Redirect {
                    to: red.to.clone(),
                    status,
                }
            }
            _ => match &r.serve {
                Some(serve) => {
                    RouteAction::Serve(super::serve::files(serve, &format!("{p}.serve"), check))
                }
                None => unreachable!("exactly one action"),
            },
        };
        let exclude = r.exclude.unwrap_or(false);
        if exclude && !matches!(action, RouteAction::Cluster(_)) {
            check.err(
                format!("{p}.exclude"),
                "an exclusion names the cluster it excludes from",
            );
        }
        out.push(Route {
            name,
            host,
            path: r.path.clone(),
            action,
            exclude,
            disabled: r.disabled.unwrap_or(false),
            plugins: Vec::new(),
            max_request_body: r
                .max_request_body
                .map(|n| check.count(format!("{p}.max_request_body"), n, 0..=MAX_REQUEST_BODY)),
            error_pages: super::error_pages::error_pages(r.error_pages.as_ref(), &p, check),
            compress: r
                .compress
                .as_ref()
                .map(|c| super::compress::compress(c, &format!("{p}.compress"), check)),
        });
    }
    out
}

/// Routes that can never win (the same host and path as an earlier route), and
/// exclusions for a cluster no route of the listener sends to.
pub(super) fn warnings(routes: &[Route], path: &str) -> Vec<ConfigError> {
    let mut out = Vec::new();
    // An exclusion applies to its own cluster only: two for different clusters differ.
    let mut seen: HashMap<(Option<&str>, &str, Option<usize>), usize> = HashMap::new();
    for (i, r) in routes.iter().enumerate().filter(|(_, r)| !r.disabled) {
        let excluded = match (r.exclude, &r.action) {
            (true, RouteAction::Cluster(c)) => Some(*c),
            _ => None,
        };
        let key = (r.host.as_deref(), r.path.as_str(), excluded);
        if let Some(first) = seen.insert(key, i) {
            out.push(ConfigError::new(
                format!("{path}.routes[{i}]"),
                format!("unreachable: routes[{first}] has the same host and path and comes first"),
            ));
        }
        if let (true, RouteAction::Cluster(c)) = (r.exclude, &r.action) {
            let mounted = routes
                .iter()
                .any(|o| !o.exclude && !o.disabled && o.action == RouteAction::Cluster(*c));
            if !mounted {
                out.push(ConfigError::new(
                    format!("{path}.routes[{i}]"),
                    "this exclusion excludes nothing: no route of the listener sends to its cluster",
                ));
            }
        }
    }
    out
}
