//! Host and path routes of a listener as a pure matcher: built once from the config
//! (at load and on reload), read per request without allocating or locking.
//!
//! Which route wins, among the enabled routes whose host and path match: by the listener's
//! `route_order`, `specific` (an exact path beats a wildcard one; among wildcard paths, more
//! literal characters beat fewer) or `mod_jk` (mod_jk's `uri_worker_map` order: more `/` in
//! the pattern, then the longer pattern, exact or wildcard alike); then a more specific
//! host (exact, then `*.domain` by length, then any host); then the file's order.
//! Exclusions come last, as in mod_jk: when the winner sends to a cluster and an exclusion
//! for that cluster matches, the request is excluded (404), with no fall-back to the next
//! route. The path matched is the request's as mod_jk matched it ([`path`]: decoded,
//! without `;parameters`, `//` merged, `.` and `..` resolved).

pub mod glob;
mod path;

use crate::config::{Route, RouteAction, RouteOrder};
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
    /// The path's rank by the table's order; higher wins.
    rank: (usize, usize),
}

impl Entry {
    fn new(index: usize, r: &Route, order: RouteOrder) -> Entry {
        let path = r.path.as_bytes();
        let rank = match order {
            RouteOrder::Specific => (
                usize::from(!glob::has_wildcards(path)),
                glob::literal_len(path),
            ),
            RouteOrder::ModJk => (path.iter().filter(|&&b| b == b'/').count(), path.len()),
        };
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
            path: path.into(),
            rank,
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
    /// Wildcard entries whose pattern starts with a whole literal segment (`/shop/...`),
    /// by that segment, each list in precedence order: a request only looks at the list of
    /// its own first segment...
    wild_by_segment: HashMap<Box<[u8]>, Vec<usize>>,
    /// ...and at these (`/*.css`, `/shop*`), in precedence order.
    wild: Vec<usize>,
    /// Exclusion entries.
    exclusions: Vec<usize>,
    order: RouteOrder,
}

impl RouteTable {
    /// Builds the table of a listener's routes (disabled ones are left out).
    pub fn new(routes: &[Route], order: RouteOrder) -> RouteTable {
        let mut t = RouteTable {
            order,
            ..RouteTable::default()
        };
        for (i, r) in routes.iter().enumerate().filter(|(_, r)| !r.disabled) {
            let e = t.entries.len();
            t.entries.push(Entry::new(i, r, order));
            if r.exclude {
                t.exclusions.push(e);
            } else if glob::has_wildcards(r.path.as_bytes()) {
                match literal_first_segment(r.path.as_bytes()) {
                    Some(seg) => t.wild_by_segment.entry(seg.into()).or_default().push(e),
                    None => t.wild.push(e),
                }
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
        let wild_key = |&e: &usize| precedence(&entries[e]);
        t.wild.sort_by_key(wild_key);
        for list in t.wild_by_segment.values_mut() {
            list.sort_by_key(wild_key);
        }
        t
    }

    /// The first entry of `list` (in precedence order) that takes the request.
    fn first_wild(&self, list: &[usize], host: &[u8], port: u16, path: &[u8]) -> Option<usize> {
        list.iter().copied().find(|&e| {
            let en = &self.entries[e];
            en.host_matches(host, port) && glob::matches(&en.path, path)
        })
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
        let path = match path::matched(path) {
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
        let wild = || {
            let by_segment = request_first_segment(path)
                .and_then(|seg| self.wild_by_segment.get(seg))
                .and_then(|list| self.first_wild(list, host, port, path));
            let generic = self.first_wild(&self.wild, host, port, path);
            better(
                by_segment.map(|e| &self.entries[e]),
                generic.map(|e| &self.entries[e]),
            )
        };
        let winner = match self.order {
            // An exact path always wins: no wildcard is looked at.
            RouteOrder::Specific => exact.or_else(wild),
            RouteOrder::ModJk => better(exact, wild()),
        };
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

/// A route's place: smaller sorts first.
type Precedence = (
    std::cmp::Reverse<(usize, usize)>,
    std::cmp::Reverse<(u8, usize, bool)>,
    usize,
);

/// Precedence: the path's rank, then the more specific host, then the file's order.
fn precedence(e: &Entry) -> Precedence {
    (
        std::cmp::Reverse(e.rank),
        std::cmp::Reverse(e.host_rank()),
        e.index,
    )
}

/// The better of two candidates by [`precedence`].
fn better<'a>(a: Option<&'a Entry>, b: Option<&'a Entry>) -> Option<&'a Entry> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if precedence(a) <= precedence(b) { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// `shop` of a pattern `/shop/...` whose first segment is literal and complete.
fn literal_first_segment(pattern: &[u8]) -> Option<&[u8]> {
    let rest = pattern.strip_prefix(b"/")?;
    let end = rest.iter().position(|&b| b == b'/')?;
    let seg = &rest[..end];
    (!seg.is_empty() && !glob::has_wildcards(seg)).then_some(seg)
}

/// `shop` of a request path `/shop/...` (only a segment followed by `/` can match a
/// pattern indexed by its segment).
fn request_first_segment(path: &[u8]) -> Option<&[u8]> {
    let rest = path.strip_prefix(b"/")?;
    let end = rest.iter().position(|&b| b == b'/')?;
    Some(&rest[..end])
}

#[cfg(test)]
mod tests;
