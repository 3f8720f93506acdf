//! Which HTTP/1 requests the lean path takes, and the head it sends upstream.

use http::header::{
    CONNECTION, CONTENT_LENGTH, EXPECT, HOST, PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, TE, TRAILER,
    TRANSFER_ENCODING, UPGRADE,
};
use http::{HeaderName, Method, Version};
use pingora_http::RequestHeader;

const HTTP2_SETTINGS: HeaderName = HeaderName::from_static("http2-settings");
const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

/// Fields that concern only the client's hop (RFC 9110 section 7.6.1; the ones pingora-proxy
/// strips too). `Connection` itself is one.
fn hop_field(name: &HeaderName) -> bool {
    *name == CONNECTION
        || *name == KEEP_ALIVE
        || *name == PROXY_CONNECTION
        || *name == PROXY_AUTHENTICATE
        || *name == PROXY_AUTHORIZATION
        || *name == TE
        || *name == TRAILER
}

/// A request the lean path takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// It carries hop fields to remove before it goes upstream.
    pub hop_fields: bool,
}

/// Does the lean path take this request? Only what it relays exactly as pingora-proxy
/// would: an origin-form HTTP/1.x request with one `Host`, no upgrade, no `Expect`, no
/// `Connection` options but `keep-alive`/`close`, and a body that is empty or small enough
/// for the listener's `request_buffer` (read whole before a server is chosen). One pass
/// over the fields.
pub fn takes(req: &RequestHeader, request_buffer: usize) -> Option<Take> {
    if req.method == Method::CONNECT
        || !matches!(req.version, Version::HTTP_11 | Version::HTTP_10)
        || !req.raw_path().starts_with(b"/")
    {
        return None;
    }
    let (mut hosts, mut lengths, mut hop_fields) = (0, 0, false);
    for (name, value) in req.headers.iter() {
        if *name == HOST {
            hosts += 1;
        } else if *name == CONTENT_LENGTH {
            lengths += 1;
            let small = std::str::from_utf8(value.as_bytes())
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .is_some_and(|n| n == 0 || n <= request_buffer);
            if !small {
                return None;
            }
        } else if *name == UPGRADE
            || *name == EXPECT
            || *name == TRANSFER_ENCODING
            || *name == HTTP2_SETTINGS
        {
            return None;
        } else if hop_field(name) {
            hop_fields = true;
            if *name == CONNECTION && !only_keep_alive_or_close(value.as_bytes()) {
                return None;
            }
        }
    }
    (hosts == 1 && lengths <= 1).then_some(Take { hop_fields })
}

/// `Connection` options other than these name fields to remove: pingora-proxy's rules.
fn only_keep_alive_or_close(value: &[u8]) -> bool {
    value.split(|&b| b == b',').all(|token| {
        let token = token.trim_ascii();
        token.is_empty()
            || token.eq_ignore_ascii_case(b"keep-alive")
            || token.eq_ignore_ascii_case(b"close")
    })
}

/// The request head for the server: HTTP/1.1, the client's fields in their order and case
/// without its hop fields, with room for what tether adds (`proxy::headroom`).
pub fn upstream_head(req: &RequestHeader, take: Take) -> pingora_core::Result<RequestHeader> {
    let mut up =
        crate::proxy::headroom::rebuilt(req, |name| take.hop_fields && is_hop_field_name(name))?;
    up.set_version(Version::HTTP_11);
    Ok(up)
}

/// [`hop_field`] on a name as the client wrote it.
fn is_hop_field_name(name: &[u8]) -> bool {
    [
        CONNECTION,
        KEEP_ALIVE,
        PROXY_CONNECTION,
        PROXY_AUTHENTICATE,
        PROXY_AUTHORIZATION,
        TE,
        TRAILER,
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h.as_str().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, path: &str, headers: &[(&str, &str)]) -> RequestHeader {
        let mut r = RequestHeader::build(method, path.as_bytes(), None).unwrap();
        for (k, v) in headers {
            r.append_header(k.to_string(), *v).unwrap();
        }
        r
    }

    #[test]
    fn plain_requests_and_buffered_bodies_go_lean() {
        let plain = Some(Take { hop_fields: false });
        let hop = Some(Take { hop_fields: true });
        assert_eq!(takes(&req("GET", "/a", &[("Host", "x")]), 65536), plain);
        let keep = [("Host", "x"), ("Connection", "Keep-Alive")];
        assert_eq!(takes(&req("GET", "/a", &keep), 65536), hop);
        let post = [("Host", "x"), ("Content-Length", "100")];
        assert_eq!(takes(&req("POST", "/a", &post), 65536), plain);
        assert_eq!(
            takes(&req("POST", "/a", &post), 99),
            None,
            "larger than the buffer"
        );
        assert_eq!(takes(&req("POST", "/a", &post), 0), None, "no buffering");
        let two = [
            ("Host", "x"),
            ("Content-Length", "1"),
            ("Content-Length", "1"),
        ];
        assert_eq!(takes(&req("POST", "/a", &two), 65536), None);
    }

    #[test]
    fn everything_unusual_goes_to_pingora_proxy() {
        let h = |extra: (&'static str, &'static str)| [("Host", "x"), extra];
        for r in [
            req("GET", "/", &h(("Upgrade", "websocket"))),
            req("POST", "/", &h(("Expect", "100-continue"))),
            req("POST", "/", &h(("Transfer-Encoding", "chunked"))),
            req("GET", "/", &h(("Connection", "close, X-Secret"))),
            req("GET", "/", &h(("Host", "y"))),
            req("GET", "/", &[]),
            req("GET", "http://x/", &[("Host", "x")]),
            req("CONNECT", "/", &[("Host", "x")]),
            req("POST", "/", &h(("Content-Length", "12x"))),
        ] {
            assert_eq!(takes(&r, 65536), None, "{r:?}");
        }
    }

    #[test]
    fn the_upstream_head_loses_the_clients_hop_fields() {
        let mut r = req(
            "GET",
            "/",
            &[
                ("Host", "x"),
                ("Connection", "keep-alive"),
                ("Keep-Alive", "timeout=5"),
                ("Proxy-Authorization", "Basic eA=="),
                ("TE", "trailers"),
                ("Cookie", "a=b"),
            ],
        );
        r.set_version(Version::HTTP_10);
        let take = takes(&r, 0).expect("a plain GET");
        let up = upstream_head(&r, take).unwrap();
        assert_eq!(up.version, Version::HTTP_11);
        assert_eq!((up.method.as_str(), up.raw_path()), ("GET", &b"/"[..]));
        let names: Vec<_> = up.headers.keys().map(|k| k.as_str().to_string()).collect();
        assert_eq!(names, ["host", "cookie"]);
    }
}
