//! Host and path routes of a listener as a pure matcher: built once from the config
//! (at load and on reload), read per request without allocating or locking.
//!
//! Which route wins (mod_jk's rule, with hosts added): among the enabled routes whose host
//! and path match, an exact path beats a wildcard one; among wildcard paths, more literal
//! characters beat fewer; then a more specific host (exact, then `*.domain` by length,
//! then any host); then the file's order. Exclusions come last: when the winner sends to a
//! cluster and an exclusion for that cluster matches, the request is excluded (404).
//! Path parameters (`;jsessionid=...`) are not part of the path that is matched.

mod glob;

use crate::config::{Route, RouteAction};
use std::collections::HashMap;

/// What the table says of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// This route (index in the listener's routes) takes it.
    Route(usize),
    /// The winning route's cluster excludes it (uriworkermap `!`): 404.
    Excluded(usize),
    /// No route: the listener's default cluster, or 404.
    None,
}

#[derive(Debug)]
enum HostMatch {
    Any,
    Exact(Box<[u8]>),
    /// `*.example.com`, stored as `.example.com`.
    Suffix(Box<[u8]>),
}

#[derive(Debug)]
struct Entry {
    index: usize,
    host: HostMatch,
    port: Option<u16>,
    path: Box<[u8]>,
    cluster: Option<usize>,
}

impl Entry {
    fn new(index: usize, r: &Route) -> Entry {
        let (host, port) = match r.host.as_deref() {
            None => (HostMatch::Any, None),
            Some(h) => {
                let (name, port) = match h.rsplit_once(':') {
                    Some((n, p)) if !n.is_empty() && p.parse::<u16>().is_ok() => {
                        (n, p.parse().ok())
                    }
                    _ => (h, None),
                };
                let m = match name.strip_prefix('*') {
                    Some("") => HostMatch::Any,
                    Some(suffix) => HostMatch::Suffix(suffix.as_bytes().into()),
                    None => HostMatch::Exact(name.as_bytes().into()),
                };
                (m, port)
            }
        };
        Entry {
            index,
            host,
            port,
            path: r.path.as_bytes().into(),
            cluster: match r.action {
                RouteAction::Cluster(c) => Some(c),
                _ => None,
            },
        }
    }

    /// Higher is more specific.
    fn host_rank(&self) -> (u8, usize, bool) {
        let (kind, len) = match &self.host {
            HostMatch::Exact(h) => (3, h.len()),
            HostMatch::Suffix(s) => (2, s.len()),
            HostMatch::Any => (1, 0),
        };
        (kind, len, self.port.is_some())
    }

    fn host_matches(&self, host: &[u8], port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match &self.host {
            HostMatch::Any => true,
            HostMatch::Exact(h) => host.eq_ignore_ascii_case(h),
            HostMatch::Suffix(s) => {
                host.len() > s.len() && host[host.len() - s.len()..].eq_ignore_ascii_case(s)
            }
        }
    }
}

#[derive(Debug, Default)]
pub struct RouteTable {
    entries: Vec<Entry>,
    /// Exact paths → entries, most specific host first.
    exact: HashMap<Box<[u8]>, Vec<usize>>,
    /// Wildcard entries in precedence order.
    wild: Vec<usize>,
    /// Exclusion entries.
    exclusions: Vec<usize>,
}

impl RouteTable {
    /// Builds the table of a listener's routes (disabled ones are left out).
    pub fn new(routes: &[Route]) -> RouteTable {
        let mut t = RouteTable::default();
        for (i, r) in routes.iter().enumerate().filter(|(_, r)| !r.disabled) {
            let e = t.entries.len();
            t.entries.push(Entry::new(i, r));
            if r.exclude {
                t.exclusions.push(e);
            } else if glob::has_wildcards(r.path.as_bytes()) {
                t.wild.push(e);
            } else {
                t.exact.entry(r.path.as_bytes().into()).or_default().push(e);
            }
        }
        let entries = &t.entries;
        let key = |&e: &usize| {
            let en = &entries[e];
            (std::cmp::Reverse(en.host_rank()), en.index)
        };
        for list in t.exact.values_mut() {
            list.sort_by_key(key);
        }
        t.wild.sort_by_key(|&e| {
            let en = &entries[e];
            (
                std::cmp::Reverse(glob::literal_len(&en.path)),
                std::cmp::Reverse(en.host_rank()),
                en.index,
            )
        });
        t
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The route for a request to `host` (without port), `port`, `path` (no query).
    pub fn find(&self, host: &[u8], port: u16, path: &[u8]) -> Found {
        if self.entries.is_empty() {
            return Found::None;
        }
        let stripped;
        let path = match without_parameters(path) {
            Ok(p) => p,
            Err(owned) => {
                stripped = owned;
                &stripped[..]
            }
        };
        let exact = self.exact.get(path).and_then(|list| {
            list.iter()
                .map(|&e| &self.entries[e])
                .find(|e| e.host_matches(host, port))
        });
        let winner = exact.or_else(|| {
            self.wild
                .iter()
                .map(|&e| &self.entries[e])
                .find(|e| e.host_matches(host, port) && glob::matches(&e.path, path))
        });
        let Some(w) = winner else {
            return Found::None;
        };
        if let Some(cluster) = w.cluster {
            let excluded = self.exclusions.iter().map(|&e| &self.entries[e]).any(|e| {
                e.cluster == Some(cluster)
                    && e.host_matches(host, port)
                    && glob::matches(&e.path, path)
            });
            if excluded {
                return Found::Excluded(w.index);
            }
        }
        Found::Route(w.index)
    }
}

/// The path without `;parameters` (mod_jk matches without them). Borrowed when there is
/// none or only one at the end (the common `;jsessionid=` case); a copy otherwise.
fn without_parameters(path: &[u8]) -> Result<&[u8], Vec<u8>> {
    let Some(semi) = path.iter().position(|&b| b == b';') else {
        return Ok(path);
    };
    if !path[semi..].contains(&b'/') {
        return Ok(&path[..semi]);
    }
    let mut out = Vec::with_capacity(path.len());
    let mut in_param = false;
    for &b in path {
        match b {
            b';' => in_param = true,
            b'/' => {
                in_param = false;
                out.push(b);
            }
            _ if !in_param => out.push(b),
            _ => {}
        }
    }
    Err(out)
}

#[cfg(test)]
mod tests;
