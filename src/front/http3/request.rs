//! An HTTP/3 request's fields as the request's steps read them (`http::request::Parts`, as
//! the `h2` crate gives an HTTP/2 stream's), and an answer's head as HTTP/3 fields.

use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use quiche::h3::{Header, NameValue};

/// Why a request's fields are refused (the stream is reset with H3_MESSAGE_ERROR).
pub const MESSAGE_ERROR: u64 = 0x010e;

/// The request of `list` (RFC 9114 §4.3.1): `:method`, `:scheme`, `:authority` or `Host`,
/// `:path`, then fields; `None` when it is malformed (a pseudo-field after a field, one
/// twice or unknown, a field name with capitals, a connection-specific field).
pub fn parts(list: &[Header]) -> Option<Parts> {
    let (mut method, mut scheme, mut authority, mut path) = (None, None, None, None);
    let mut headers = http::HeaderMap::with_capacity(list.len());
    for h in list {
        let (name, value) = (h.name(), h.value());
        if let Some(pseudo) = name.strip_prefix(b":") {
            if !headers.is_empty() {
                return None;
            }
            let slot = match pseudo {
                b"method" => &mut method,
                b"scheme" => &mut scheme,
                b"authority" => &mut authority,
                b"path" => &mut path,
                _ => return None,
            };
            if slot.replace(value).is_some() {
                return None;
            }
            continue;
        }
        if name.iter().any(u8::is_ascii_uppercase) {
            return None;
        }
        let name = HeaderName::from_bytes(name).ok()?;
        if connection_specific(&name, value) {
            return None;
        }
        headers.append(name, HeaderValue::from_bytes(value).ok()?);
    }
    let method = http::Method::from_bytes(method?).ok()?;
    let mut uri = http::Uri::builder().scheme(scheme?);
    if let Some(authority) = authority {
        uri = uri.authority(authority);
    }
    let uri = uri.path_and_query(path?).build().ok()?;
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = http::Version::HTTP_3;
    parts.headers = headers;
    Some(parts)
}

/// Fields HTTP/3 forbids (RFC 9114 §4.2): those of a connection, and `TE` but `trailers`.
fn connection_specific(name: &HeaderName, value: &[u8]) -> bool {
    use http::header::{CONNECTION, TE, TRANSFER_ENCODING, UPGRADE};
    name == CONNECTION
        || name == TRANSFER_ENCODING
        || name == UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
        || (name == TE && value != b"trailers")
}

/// The answer's head as HTTP/3 fields: `:status`, then its fields (names are lower case
/// in `http`), less those of a connection.
pub fn fields(head: &http::Response<()>) -> Vec<Header> {
    let mut out = Vec::with_capacity(head.headers().len() + 1);
    out.push(Header::new(b":status", head.status().as_str().as_bytes()));
    for (name, value) in head.headers() {
        if connection_specific(name, value.as_bytes()) {
            continue;
        }
        out.push(Header::new(name.as_str().as_bytes(), value.as_bytes()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: &str, v: &str) -> Header {
        Header::new(n.as_bytes(), v.as_bytes())
    }

    #[test]
    fn a_request_and_what_is_refused() {
        let ok = [
            h(":method", "GET"),
            h(":scheme", "https"),
            h(":authority", "a.test"),
            h(":path", "/x?y=1"),
            h("cookie", "a=1"),
        ];
        let p = parts(&ok).unwrap();
        assert_eq!(p.method, http::Method::GET);
        assert_eq!(p.uri.to_string(), "https://a.test/x?y=1");
        assert_eq!(p.headers["cookie"], "a=1");
        let late = [h(":method", "GET"), h("a", "1"), h(":path", "/")];
        assert!(parts(&late).is_none());
        let twice = [h(":method", "GET"), h(":method", "GET")];
        assert!(parts(&twice).is_none());
        let upper = [
            h(":method", "GET"),
            h(":scheme", "https"),
            h(":path", "/"),
            h("A", "1"),
        ];
        assert!(parts(&upper).is_none());
        let conn = [
            h(":method", "GET"),
            h(":scheme", "https"),
            h(":path", "/"),
            h("connection", "x"),
        ];
        assert!(parts(&conn).is_none());
        let no_path = [h(":method", "GET"), h(":scheme", "https")];
        assert!(parts(&no_path).is_none());
    }
}
