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

/// Does the lean path take this request? Only what it relays exactly as pingora-proxy
/// would: an origin-form HTTP/1.x request with one `Host`, no upgrade, no `Expect`, no
/// `Connection` options but `keep-alive`/`close`, and a body that is empty or small enough
/// for the listener's `request_buffer` (read whole before a server is chosen).
pub fn takes(req: &RequestHeader, request_buffer: usize) -> bool {
    if req.method == Method::CONNECT
        || !matches!(req.version, Version::HTTP_11 | Version::HTTP_10)
        || !req.raw_path().starts_with(b"/")
    {
        return false;
    }
    let h = &req.headers;
    if h.contains_key(UPGRADE)
        || h.contains_key(EXPECT)
        || h.contains_key(TRANSFER_ENCODING)
        || h.contains_key(HTTP2_SETTINGS)
    {
        return false;
    }
    let mut hosts = h.get_all(HOST).iter();
    if hosts.next().is_none() || hosts.next().is_some() {
        return false;
    }
    let plain_connection = h.get_all(CONNECTION).iter().all(|v| {
        v.as_bytes().split(|&b| b == b',').all(|token| {
            let token = token.trim_ascii();
            token.is_empty()
                || token.eq_ignore_ascii_case(b"keep-alive")
                || token.eq_ignore_ascii_case(b"close")
        })
    });
    if !plain_connection {
        return false;
    }
    let mut lengths = h.get_all(CONTENT_LENGTH).iter();
    match (lengths.next(), lengths.next()) {
        (None, _) => true,
        (Some(v), None) => std::str::from_utf8(v.as_bytes())
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .is_some_and(|n| n == 0 || n <= request_buffer),
        _ => false,
    }
}

/// The request head for the server: HTTP/1.1, without the fields that concern only the
/// client's hop (RFC 9110 section 7.6.1; the ones pingora-proxy strips too).
pub fn upstream_head(req: &mut RequestHeader) {
    req.set_version(Version::HTTP_11);
    for name in [
        CONNECTION,
        KEEP_ALIVE,
        PROXY_CONNECTION,
        PROXY_AUTHENTICATE,
        PROXY_AUTHORIZATION,
        TE,
        TRAILER,
    ] {
        if req.headers.contains_key(&name) {
            req.remove_header(&name);
        }
    }
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
        assert!(takes(&req("GET", "/a", &[("Host", "x")]), 65536));
        let keep = [("Host", "x"), ("Connection", "Keep-Alive")];
        assert!(takes(&req("GET", "/a", &keep), 65536));
        let post = [("Host", "x"), ("Content-Length", "100")];
        assert!(takes(&req("POST", "/a", &post), 65536));
        assert!(
            !takes(&req("POST", "/a", &post), 99),
            "larger than the buffer"
        );
        assert!(!takes(&req("POST", "/a", &post), 0), "no buffering");
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
            assert!(!takes(&r, 65536), "{r:?}");
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
        upstream_head(&mut r);
        assert_eq!(r.version, Version::HTTP_11);
        let names: Vec<_> = r.headers.keys().map(|k| k.as_str().to_string()).collect();
        assert_eq!(names, ["host", "cookie"]);
    }
}
