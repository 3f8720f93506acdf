//! Where a plugin finds the key it routes on: a header, a cookie, a query parameter, a
//! path segment, or a fact of the connection (the client's address, the authority a
//! balancer's PROXY protocol header names).

use crate::Connection;
use pingora_http::RequestHeader;
use serde::Deserialize;
use std::borrow::Cow;

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
    connection: Option<String>,
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
        if let Some(c) = r.connection {
            found.push(KeySource::Connection(match c.as_str() {
                "client_address" => ConnectionKey::ClientAddress,
                "authority" => ConnectionKey::Authority,
                other => {
                    return Err(format!(
                        "connection: `{other}` is not a connection key (client_address, authority)"
                    ))
                }
            }));
        }
        match (found.pop(), found.is_empty()) {
            (Some(k), true) => Ok(k),
            _ => Err("give exactly one of header, cookie, query, path_segment, connection".into()),
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
    /// A fact of the connection (`{ connection: client_address }`).
    Connection(ConnectionKey),
}

/// The connection facts a key can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionKey {
    /// The client's address as tether names it (`192.0.2.7`, `2001:db8::7`).
    ClientAddress,
    /// The PROXY protocol v2 header's authority (the host name the client asked its
    /// balancer for).
    Authority,
}

impl KeySource {
    /// The key of `req` on `conn`, if present, non-empty, UTF-8 and at most 256 bytes.
    pub fn extract<'a>(
        &self,
        req: &'a RequestHeader,
        conn: &'a Connection,
    ) -> Option<Cow<'a, str>> {
        let key = match self {
            KeySource::Connection(ConnectionKey::ClientAddress) => {
                return conn.client.map(|ip| Cow::Owned(ip.to_string()));
            }
            KeySource::Connection(ConnectionKey::Authority) => {
                conn.proxy.as_ref()?.authority.as_deref()?
            }
            KeySource::Header(name) => req.headers.get(name.as_str())?.to_str().ok()?,
            KeySource::Cookie(name) => cookie(req, name)?,
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
        (!key.is_empty() && key.len() <= MAX_KEY).then_some(Cow::Borrowed(key))
    }
}

/// The value of cookie `name` in the request's `Cookie` fields (quotes taken off).
pub(crate) fn cookie<'a>(req: &'a RequestHeader, name: &str) -> Option<&'a str> {
    req.headers
        .get_all(http::header::COOKIE)
        .iter()
        .find_map(|v| {
            let v = v.to_str().ok()?;
            v.split(';').find_map(|pair| {
                let (k, val) = pair.trim().split_once('=')?;
                (k.trim() == name).then(|| val.trim().trim_matches('"'))
            })
        })
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

    fn key(source: KeySource, r: &RequestHeader, conn: &Connection) -> Option<String> {
        source.extract(r, conn).map(Cow::into_owned)
    }

    #[test]
    fn every_source() {
        let r = req(
            "/users/001/cart?user=002&x=1",
            &[("X-User", "003"), ("Cookie", "a=1; user=\"004\"")],
        );
        let none = Connection::default();
        let k = |source| key(source, &r, &none);
        assert_eq!(
            k(KeySource::Header("x-user".into())).as_deref(),
            Some("003")
        );
        assert_eq!(k(KeySource::Cookie("user".into())).as_deref(), Some("004"));
        assert_eq!(k(KeySource::Query("user".into())).as_deref(), Some("002"));
        assert_eq!(k(KeySource::PathSegment(1)).as_deref(), Some("001"));
        assert_eq!(k(KeySource::PathSegment(9)), None);
        assert_eq!(k(KeySource::Cookie("nope".into())), None);
        let long = "k".repeat(300);
        let long_req = req("/", &[("X-Long", &long)]);
        assert_eq!(
            key(KeySource::Header("x-long".into()), &long_req, &none),
            None
        );
        let empty = req("/?user=", &[]);
        assert_eq!(key(KeySource::Query("user".into()), &empty, &none), None);
    }

    #[test]
    fn connection_facts() {
        let r = req("/", &[]);
        let addr = KeySource::Connection(ConnectionKey::ClientAddress);
        let authority = KeySource::Connection(ConnectionKey::Authority);
        assert_eq!(key(addr.clone(), &r, &Connection::default()), None);
        assert_eq!(key(authority.clone(), &r, &Connection::default()), None);
        let conn = Connection {
            client: Some("2001:db8::7".parse().unwrap()),
            proxy: Some(std::sync::Arc::new(crate::ProxyFacts {
                authority: Some("shop.example".into()),
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(key(addr, &r, &conn).as_deref(), Some("2001:db8::7"));
        assert_eq!(key(authority, &r, &conn).as_deref(), Some("shop.example"));
        let parsed: KeySource = serde_yaml::from_str("{ connection: client_address }").unwrap();
        assert_eq!(parsed, KeySource::Connection(ConnectionKey::ClientAddress));
        let bad = serde_yaml::from_str::<KeySource>("{ connection: nonsense }").unwrap_err();
        assert!(
            bad.to_string().contains("client_address, authority"),
            "{bad}"
        );
    }
}
