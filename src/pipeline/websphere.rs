//! WebSphere private headers: client `$WS*` headers removed, `$WSFO` on failover, the
//! plug-in's `$WSRA`… headers when configured, `$WSPT` hidden (learned by the pipeline,
//! `pipeline/heard.rs`; DESIGN section 3).

use super::forwarded::write_on_stack;
use super::upstream_fields::UpstreamFields;
use crate::routing::{ClusterRouter, Outcome};
use http::header::HeaderName;
use pingora_http::{RequestHeader, ResponseHeader};
use std::net::SocketAddr;

// Names as `&'static str`, in the plug-in's own case: Pingora keeps it without copying.
const WSFO: &str = "$WSFO";
const WSRA: &str = "$WSRA";
const WSRH: &str = "$WSRH";
const WSSC: &str = "$WSSC";
const WSSN: &str = "$WSSN";
const WSSP: &str = "$WSSP";
const WSIS: &str = "$WSIS";
const WSPR: &str = "$WSPR";
const WSCS: &str = "$WSCS";
const WSCC: &str = "$WSCC";

/// Header names are stored lower-case, so one prefix test covers `$WSFO`, `$wsfo`, ...
fn is_private(name: &HeaderName) -> bool {
    name.as_str().starts_with("$ws")
}

/// Removes every `$WS*` header a client sent, before anything looks at the request.
pub fn strip_request(req: &mut RequestHeader) {
    // Clients almost never send one: the common case is a single scan and no allocation.
    while let Some(name) = req.headers.keys().find(|k| is_private(k)).cloned() {
        req.remove_header(&name);
    }
}

/// Removes every `$WS*` header from a response before it goes to the client.
pub fn strip_response(resp: &mut ResponseHeader) {
    while let Some(name) = resp.headers.keys().find(|k| is_private(k)).cloned() {
        resp.remove_header(&name);
    }
}

/// Does a request with this outcome go to a server other than its session's?
pub fn needs_failover_tag(outcome: Option<Outcome>) -> bool {
    outcome.is_some_and(Outcome::away)
}

/// Sets the WebSphere headers of one upstream attempt; true when it carries `$WSFO`.
pub fn tag_request(
    router: &ClusterRouter,
    req: &mut impl UpstreamFields,
    outcome: Option<Outcome>,
    client: Option<std::net::IpAddr>,
    local: Option<SocketAddr>,
    tls: Option<&super::secure::Secure>,
    http2: bool,
) -> bool {
    let tagged = needs_failover_tag(outcome);
    if tagged {
        req.set_static(WSFO, "true");
    } else {
        req.remove(WSFO);
    }
    if !router.private_headers() {
        return tagged;
    }
    let mut buf = [0u8; 48];
    if let Some(client) = client {
        let ip = write_on_stack(&mut buf, client);
        req.set(WSRA, ip);
        req.set(WSRH, ip);
    }
    let (scheme, secure) = if tls.is_some() {
        ("https", "true")
    } else {
        ("http", "false")
    };
    req.set_static(WSSC, scheme);
    req.set_static(WSIS, secure);
    req.set_static(WSPR, if http2 { "HTTP/2.0" } else { "HTTP/1.1" });
    if let Some(tls) = tls {
        req.set(WSCS, tls.cipher().as_bytes());
        if let Some(cert) = tls.client_cert_base64() {
            req.set(WSCC, cert.as_bytes());
        }
    }
    // The host is copied out of the head before the head is written to: to the stack, as
    // a host name is at most 255 bytes (RFC 1035); a longer one is rare enough to allocate.
    let mut name = [0u8; 256];
    match req.get("host").map(host_without_port) {
        Some(h) if h.len() <= name.len() => {
            let len = h.len();
            name[..len].copy_from_slice(h);
            req.set(WSSN, &name[..len]);
        }
        Some(h) => {
            let h = h.to_vec();
            req.set(WSSN, &h);
        }
        None => {}
    }
    if let Some(local) = local {
        req.set(WSSP, write_on_stack(&mut buf, local.port()));
    }
    tagged
}

fn host_without_port(host: &[u8]) -> &[u8] {
    if host.starts_with(b"[") {
        // [v6]:port
        return match host.iter().position(|&b| b == b']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.iter().rposition(|&b| b == b':') {
        Some(colon) => &host[..colon],
        None => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_every_private_header_whatever_its_case() {
        let mut req = RequestHeader::build("GET", b"/", None).unwrap();
        for (n, v) in [
            ("$WSFO", "true"),
            ("$wspt", "1=a"),
            ("$WsRa", "1.2.3.4"),
            ("X-Keep", "1"),
        ] {
            req.append_header(n, v).unwrap();
        }
        strip_request(&mut req);
        let names: Vec<&str> = req.headers.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["x-keep"]);
    }

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_without_port(b"shop.example:8080"), b"shop.example");
        assert_eq!(host_without_port(b"shop.example"), b"shop.example");
        assert_eq!(host_without_port(b"[2001:db8::1]:443"), b"[2001:db8::1]");
    }
}
