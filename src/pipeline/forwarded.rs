//! `X-Forwarded-For`, `-Proto` and `-Host` for the upstream request.

use super::upstream_fields::UpstreamFields;
use std::io::Write;
use std::net::IpAddr;

// Names as `&'static str`: Pingora keeps their case without copying them (a `HeaderName`
// would be title-cased into a fresh buffer on every insert).
const XFF: &str = "X-Forwarded-For";
const XFP: &str = "X-Forwarded-Proto";
const XFH: &str = "X-Forwarded-Host";

/// Formats `value` (an address, a number, or `format_args!`) into `buf` without touching
/// the heap. An IPv6 address is at most 45 bytes.
pub fn write_on_stack(buf: &mut [u8; 48], value: impl OnStack) -> &[u8] {
    let written = value.write(buf);
    &buf[..written]
}

/// A value written as text on the request path. Addresses and numbers skip `fmt`'s
/// machinery (padding, a `dyn Write`), which costs more than the rest of a field's edit.
pub trait OnStack {
    /// Writes the text at the start of `buf`; its length.
    fn write(self, buf: &mut [u8; 48]) -> usize;
}

impl OnStack for IpAddr {
    fn write(self, buf: &mut [u8; 48]) -> usize {
        match self {
            IpAddr::V4(v4) => {
                let mut at = 0;
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        buf[at] = b'.';
                        at += 1;
                    }
                    let mut digits = itoa::Buffer::new();
                    let digits = digits.format(octet).as_bytes();
                    buf[at..at + digits.len()].copy_from_slice(digits);
                    at += digits.len();
                }
                at
            }
            IpAddr::V6(_) => format_args!("{self}").write(buf),
        }
    }
}

impl OnStack for std::fmt::Arguments<'_> {
    fn write(self, buf: &mut [u8; 48]) -> usize {
        let mut cursor = &mut buf[..];
        let _ = cursor.write_fmt(self);
        48 - cursor.len()
    }
}

macro_rules! integers_on_stack {
    ($($t:ty),*) => {$(
        impl OnStack for $t {
            fn write(self, buf: &mut [u8; 48]) -> usize {
                let mut text = itoa::Buffer::new();
                let text = text.format(self).as_bytes();
                buf[..text.len()].copy_from_slice(text);
                text.len()
            }
        }
    )*};
}
integers_on_stack!(u8, u16, u32, u64, usize, i32, i64);

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
    fn text_on_stack() {
        let mut buf = [0u8; 48];
        for ip in [
            "0.0.0.0",
            "10.1.20.255",
            "127.0.0.1",
            "2001:db8::1",
            "::ffff:1.2.3.4",
        ] {
            let addr: IpAddr = ip.parse().unwrap();
            assert_eq!(write_on_stack(&mut buf, addr), ip.as_bytes());
        }
        let longest: IpAddr = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"
            .parse()
            .unwrap();
        assert_eq!(
            write_on_stack(&mut buf, longest),
            longest.to_string().as_bytes()
        );
        assert_eq!(write_on_stack(&mut buf, 0u64), b"0");
        assert_eq!(write_on_stack(&mut buf, u64::MAX), b"18446744073709551615");
        assert_eq!(write_on_stack(&mut buf, 443u16), b"443");
        assert_eq!(write_on_stack(&mut buf, -1i32), b"-1");
        assert_eq!(
            write_on_stack(&mut buf, format_args!("{:x}", 4096)),
            b"1000"
        );
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
