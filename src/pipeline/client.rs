//! Who the client is: the connection's peer, or, when the peer is a proxy the listener
//! trusts (`trusted_proxies`), the right-most `X-Forwarded-For` address that is not one
//! (nginx `set_real_ip_from` + `real_ip_recursive on`). Everything that names the client
//! (`$WSRA`/`$WSRH`, the access log) uses it; `X-Forwarded-For` itself is passed on as it
//! came, with the peer appended.

use crate::routing::Fields;
use ipnet::IpNet;
use std::net::IpAddr;

const XFF: http::HeaderName = http::HeaderName::from_static("x-forwarded-for");

fn trusted(ip: IpAddr, proxies: &[IpNet]) -> bool {
    crate::config::in_cidrs(ip, proxies)
}

/// The client of a request that came from `peer`. Walks `X-Forwarded-For` (all its fields,
/// in order) from the right while the addresses are trusted proxies; the first one that is
/// not is the client. When every address is a trusted proxy, the left-most one is; an entry
/// that is not an address ends the walk at the trusted address to its right. No allocation.
pub fn client_of(peer: Option<IpAddr>, fields: &impl Fields, proxies: &[IpNet]) -> Option<IpAddr> {
    let peer = peer?;
    if proxies.is_empty() || !trusted(peer, proxies) {
        return Some(peer);
    }
    let mut client = peer;
    for field in fields.values(&XFF).rev() {
        for entry in field.rsplit(|&b| b == b',') {
            let Some(ip) = parse(entry) else {
                return Some(client);
            };
            client = ip;
            if !trusted(ip, proxies) {
                return Some(ip);
            }
        }
    }
    Some(client)
}

/// One `X-Forwarded-For` entry: an address, with or without a port (`1.2.3.4:5`,
/// `[2001:db8::1]:5`).
fn parse(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(entry.trim_ascii()).ok()?;
    if let Ok(ip) = text.parse() {
        return Some(ip);
    }
    if let Some(rest) = text.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    let (host, port) = text.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pingora_http::RequestHeader;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    fn req(xff: &[&str]) -> RequestHeader {
        let mut r = RequestHeader::build("GET", b"/", None).unwrap();
        for v in xff {
            r.append_header("X-Forwarded-For", *v).unwrap();
        }
        r
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn the_right_most_untrusted_address_is_the_client() {
        let cdn = nets(&["10.0.0.0/8", "192.0.2.1/32", "2001:db8::/32"]);
        let cases: &[(&str, &[&str], &str)] = &[
            // (peer, X-Forwarded-For fields, client)
            ("192.0.2.1", &["203.0.113.7"], "203.0.113.7"),
            ("192.0.2.1", &["198.51.100.1, 10.1.1.1"], "198.51.100.1"),
            (
                "192.0.2.1",
                &["1.1.1.1, 198.51.100.1, 10.1.1.1"],
                "198.51.100.1",
            ),
            (
                "192.0.2.1",
                &["1.1.1.1", "198.51.100.1", "10.1.1.1"],
                "198.51.100.1",
            ),
            // Every address a proxy: the left-most.
            ("192.0.2.1", &["10.2.2.2, 10.1.1.1"], "10.2.2.2"),
            // No header: the peer.
            ("192.0.2.1", &[], "192.0.2.1"),
            // Garbage ends the walk at the trusted address to its right.
            ("192.0.2.1", &["evil, 10.1.1.1"], "10.1.1.1"),
            ("192.0.2.1", &["203.0.113.7, "], "192.0.2.1"),
            // Ports and brackets.
            ("192.0.2.1", &["203.0.113.7:4711"], "203.0.113.7"),
            ("192.0.2.1", &["[2001:db9::1]:4711"], "2001:db9::1"),
            ("2001:db8::5", &["2001:db9::1"], "2001:db9::1"),
            // An untrusted peer's header is not believed.
            ("198.51.100.9", &["203.0.113.7"], "198.51.100.9"),
            // An IPv4 peer seen on an IPv6 socket.
            ("::ffff:192.0.2.1", &["203.0.113.7"], "203.0.113.7"),
        ];
        for (peer, xff, want) in cases {
            assert_eq!(
                client_of(ip(peer), &req(xff).headers, &cdn),
                ip(want),
                "{peer} {xff:?}"
            );
        }
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client() {
        assert_eq!(
            client_of(ip("192.0.2.1"), &req(&["203.0.113.7"]).headers, &[]),
            ip("192.0.2.1")
        );
        assert_eq!(
            client_of(None, &req(&["203.0.113.7"]).headers, &nets(&["0.0.0.0/0"])),
            None
        );
    }
}
