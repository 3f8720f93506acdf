//! Where a plugin finds the key it routes on: a header, a cookie, a query parameter or a
//! path segment.

use pingora_http::RequestHeader;
use serde::Deserialize;

/// The longest key used; longer ones are ignored (a key is a user id, not a payload).
const MAX_KEY: usize = 256;

/// `{ header: X-User }` and its siblings, as written in the config. (serde_yaml reads
/// externally tagged enums only from YAML tags, so the one-key map is checked by hand.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    header: Option<String>,
    cookie: Option<String>,
    query: Option<String>,
    path_segment: Option<usize>,
}

impl TryFrom<RawKey> for KeySource {
    type Error = String;

    fn try_from(r: RawKey) -> Result<Self, String> {
        let mut found = Vec::new();
        if let Some(h) = r.header {
            found.push(KeySource::Header(h));
        }
        if let Some(c) = r.cookie {
            found.push(KeySource::Cookie(c));
        }
        if let Some(q) = r.query {
            found.push(KeySource::Query(q));
        }
        if let Some(n) = r.path_segment {
            found.push(KeySource::PathSegment(n));
        }
        match (found.pop(), found.is_empty()) {
            (Some(k), true) => Ok(k),
            _ => Err("give exactly one of header, cookie, query, path_segment".into()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawKey")]
pub enum KeySource {
    /// A request header, e.g. `X-User`.
    Header(String),
    /// A cookie, e.g. `user`.
    Cookie(String),
    /// A query parameter, e.g. `user`.
    Query(String),
    /// The n-th path segment (0-based): `/users/001/cart` with 1 gives `001`.
    PathSegment(usize),
}

impl KeySource {
    /// The key of `req`, if present, non-empty, UTF-8 and at most 256 bytes.
    pub fn extract<'a>(&self, req: &'a RequestHeader) -> Option<&'a str> {
        let key = match self {
            KeySource::Header(name) => req.headers.get(name.as_str())?.to_str().ok()?,
            KeySource::Cookie(name) => {
                req.headers
                    .get_all(http::header::COOKIE)
                    .iter()
                    .find_map(|v| {
                        let v = v.to_str().ok()?;
                        v.split(';').find_map(|pair| {
                            let (k, val) = pair.trim().split_once('=')?;
                            (k.trim() == name).then(|| val.trim().trim_matches('"'))
                        })
                    })?
            }
            KeySource::Query(name) => req.uri.query()?.split('&').find_map(|pair| {
                let (k, v) = pair.split_once('=')?;
                (k == name).then_some(v)
            })?,
            KeySource::PathSegment(n) => req
                .uri
                .path()
                .split('/')
                .filter(|s| !s.is_empty())
                .nth(*n)?,
        };
        (!key.is_empty() && key.len() <= MAX_KEY).then_some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(path: &str, headers: &[(&str, &str)]) -> RequestHeader {
        let mut r = RequestHeader::build("GET", path.as_bytes(), None).unwrap();
        for (k, v) in headers {
            r.append_header(k.to_string(), *v).unwrap();
        }
        r
    }

    #[test]
    fn every_source() {
        let r = req(
            "/users/001/cart?user=002&x=1",
            &[("X-User", "003"), ("Cookie", "a=1; user=\"004\"")],
        );
        assert_eq!(KeySource::Header("x-user".into()).extract(&r), Some("003"));
        assert_eq!(KeySource::Cookie("user".into()).extract(&r), Some("004"));
        assert_eq!(KeySource::Query("user".into()).extract(&r), Some("002"));
        assert_eq!(KeySource::PathSegment(1).extract(&r), Some("001"));
        assert_eq!(KeySource::PathSegment(9).extract(&r), None);
        assert_eq!(KeySource::Cookie("nope".into()).extract(&r), None);
        let long = "k".repeat(300);
        assert_eq!(
            KeySource::Header("x-long".into()).extract(&req("/", &[("X-Long", &long)])),
            None
        );
        assert_eq!(
            KeySource::Query("user".into()).extract(&req("/?user=", &[])),
            None
        );
    }
}
