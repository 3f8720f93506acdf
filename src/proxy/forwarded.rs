//! `X-Forwarded-For`, `-Proto` and `-Host` for the upstream request.

use super::upstream_fields::UpstreamFields;
use std::io::Write;
use std::net::IpAddr;

// Names as `&'static str`: Pingora keeps their case without copying them (a `HeaderName`
// would be title-cased into a fresh buffer on every insert).
const XFF: &str = "X-Forwarded-For";
const XFP: &str = "X-Forwarded-Proto";
const XFH: &str = "X-Forwarded-Host";

/// Formats `value` (an address or a number) into `buf` without touching the heap.
/// An IPv6 address is at most 45 bytes.
pub fn write_on_stack(buf: &mut [u8; 48], value: impl std::fmt::Display) -> &[u8] {
    let mut cursor = &mut buf[..];
    let _ = write!(cursor, "{value}");
    let written = 48 - cursor.len();
    &buf[..written]
}

/// Adds the client to `X-Forwarded-For` (appending to what the client sent, like nginx's
/// `$proxy_add_x_forwarded_for`) and sets `X-Forwarded-Proto` and `-Host` from this hop.
pub fn set_forwarded(req: &mut impl UpstreamFields, client: Option<IpAddr>, tls: bool) {
    if let Some(ip) = client {
        let mut buf = [0u8; 48];
        req.append_list(XFF, write_on_stack(&mut buf, ip));
    }
    req.set_static(XFP, if tls { "https" } else { "http" });
    // Set from this hop's `Host`, or removed: never the client's own (an HTTP/1.0 request
    // may come without `Host`, and the application would believe what it claims).
    if !req.copy_field("host", XFH) {
        req.remove(XFH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pingora_http::RequestHeader;

    fn header(req: &RequestHeader, name: &str) -> Option<String> {
        req.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    }

    #[test]
    fn sets_and_appends() {
        let mut req = RequestHeader::build("GET", b"/", None).unwrap();
        req.insert_header("Host", "shop.example").unwrap();
        set_forwarded(&mut req, Some("10.1.2.3".parse().unwrap()), false);
        assert_eq!(header(&req, "x-forwarded-for").as_deref(), Some("10.1.2.3"));
        assert_eq!(header(&req, "x-forwarded-proto").as_deref(), Some("http"));
        assert_eq!(
            header(&req, "x-forwarded-host").as_deref(),
            Some("shop.example")
        );

        let mut req = RequestHeader::build("GET", b"/", None).unwrap();
        req.insert_header("X-Forwarded-For", "192.0.2.1").unwrap();
        req.insert_header("X-Forwarded-Proto", "https").unwrap();
        set_forwarded(&mut req, Some("2001:db8::1".parse().unwrap()), false);
        assert_eq!(
            header(&req, "x-forwarded-for").as_deref(),
            Some("192.0.2.1, 2001:db8::1")
        );
        assert_eq!(
            header(&req, "x-forwarded-proto").as_deref(),
            Some("http"),
            "a client cannot claim https"
        );
        assert_eq!(header(&req, "x-forwarded-host"), None);
    }

    #[test]
    fn a_client_x_forwarded_host_never_passes() {
        // HTTP/1.0 without Host: the client's own X-Forwarded-Host must go.
        let mut req = RequestHeader::build("GET", b"/", None).unwrap();
        req.set_version(http::Version::HTTP_10);
        req.insert_header("X-Forwarded-Host", "evil.example")
            .unwrap();
        set_forwarded(&mut req, Some("10.1.2.3".parse().unwrap()), false);
        assert_eq!(header(&req, "x-forwarded-host"), None);
        // With Host: replaced by it.
        req.insert_header("X-Forwarded-Host", "evil.example")
            .unwrap();
        req.insert_header("Host", "shop.example").unwrap();
        set_forwarded(&mut req, None, false);
        assert_eq!(
            header(&req, "x-forwarded-host").as_deref(),
            Some("shop.example")
        );
    }
}
