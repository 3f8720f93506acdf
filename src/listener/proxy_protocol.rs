//! The PROXY protocol (HAProxy's, v1 text and v2 binary) on a listener behind an L4
//! balancer: the balancer says who the client is before the first byte of TLS or HTTP.
//! Only peers in `proxy_protocol.from` may send it, and on such a listener they must; a
//! missing, malformed or late header closes the connection (counted). The address it
//! carries becomes the connection's peer address, so everything that names the client
//! (`X-Forwarded-For`, `$WSRA`/`$WSRH`, the access log, `trusted_proxies`) uses it. The
//! format is the `ppp` crate's.

use ipnet::IpNet;
use pingora_core::protocols::l4::socket::SocketAddr;
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::{GetSocketDigest, SocketDigest};
use ppp::{v1, v2, HeaderResult, PartialResult};
use std::os::fd::AsRawFd;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// A v1 header is at most 107 bytes; a v2 header with TLVs can be longer, but what a
/// balancer sends fits this (HAProxy's own limit for what it accepts is similar).
const MOST: usize = 4096;

/// Why a connection was refused (the reason in `tether_client_closed_total`'s log line).
pub type Refused = &'static str;

fn allowed(peer: std::net::IpAddr, from: &[IpNet]) -> bool {
    crate::config::in_cidrs(peer, from)
}

/// The client a parsed header names; `None` for a `LOCAL` (v2) or `UNKNOWN` (v1) header,
/// the balancer's own connection (a health check): then the peer is the client.
fn source(header: &HeaderResult<'_>) -> Option<std::net::SocketAddr> {
    match header {
        HeaderResult::V1(Ok(h)) => match h.addresses {
            v1::Addresses::Tcp4(a) => Some((a.source_address, a.source_port).into()),
            v1::Addresses::Tcp6(a) => Some((a.source_address, a.source_port).into()),
            v1::Addresses::Unknown => None,
        },
        HeaderResult::V2(Ok(h)) if h.command == v2::Command::Proxy => match h.addresses {
            v2::Addresses::IPv4(a) => Some((a.source_address, a.source_port).into()),
            v2::Addresses::IPv6(a) => Some((a.source_address, a.source_port).into()),
            _ => None,
        },
        _ => None,
    }
}

fn length(header: &HeaderResult<'_>) -> usize {
    match header {
        HeaderResult::V1(Ok(h)) => h.header.len(),
        HeaderResult::V2(Ok(h)) => h.len(),
        _ => 0,
    }
}

/// Reads the header from a new connection within `deadline`: the stream, with the bytes
/// read past the header put back, and its peer address set to the client's.
pub async fn read(
    mut stream: L4Stream,
    from: &[IpNet],
    deadline: Duration,
) -> Result<L4Stream, Refused> {
    let peer = stream
        .get_socket_digest()
        .and_then(|d| d.peer_addr().and_then(|a| a.as_inet()).map(|a| a.ip()));
    if !peer.is_some_and(|p| allowed(p, from)) {
        return Err("proxy_protocol_from");
    }
    let mut buf = Vec::with_capacity(256);
    let read_header = async {
        let mut chunk = [0u8; 512];
        loop {
            let n = stream
                .read(&mut chunk)
                .await
                .map_err(|_| "proxy_protocol_missing")?;
            if n == 0 {
                return Err("proxy_protocol_missing");
            }
            buf.extend_from_slice(&chunk[..n]);
            let header = HeaderResult::parse(&buf);
            if header.is_incomplete() {
                if buf.len() >= MOST {
                    return Err("proxy_protocol_malformed");
                }
                continue;
            }
            let ok = matches!(&header, HeaderResult::V1(Ok(_)) | HeaderResult::V2(Ok(_)));
            if !ok {
                return Err("proxy_protocol_malformed");
            }
            return Ok((length(&header), source(&header)));
        }
    };
    let (len, client) = match tokio::time::timeout(deadline, read_header).await {
        Ok(r) => r?,
        Err(_) => return Err("proxy_protocol_missing"),
    };
    if len < buf.len() {
        stream.rewind(&buf[len..]);
    }
    if let Some(client) = client {
        let digest = SocketDigest::from_raw_fd(stream.as_raw_fd());
        let _ = digest.peer_addr.set(Some(SocketAddr::Inet(client)));
        stream.set_socket_digest(digest);
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_name_the_client_or_nobody() {
        let v1 = b"PROXY TCP4 203.0.113.7 192.0.2.1 4711 443\r\nGET / HTTP/1.1\r\n";
        let h = HeaderResult::parse(v1);
        assert_eq!(source(&h), Some("203.0.113.7:4711".parse().unwrap()));
        assert_eq!(length(&h), 43);
        let unknown = HeaderResult::parse(b"PROXY UNKNOWN\r\n");
        assert_eq!(source(&unknown), None);
        let v2 = v2::Builder::with_addresses(
            v2::Version::Two | v2::Command::Proxy,
            v2::Protocol::Stream,
            (
                "[2001:db8::7]:4711"
                    .parse::<std::net::SocketAddr>()
                    .unwrap(),
                "[2001:db8::1]:443".parse::<std::net::SocketAddr>().unwrap(),
            ),
        )
        .build()
        .unwrap();
        let h = HeaderResult::parse(&v2);
        assert_eq!(source(&h), Some("[2001:db8::7]:4711".parse().unwrap()));
        assert_eq!(length(&h), v2.len());
        assert!(HeaderResult::parse(b"PROXY TCP4 1.2.3").is_incomplete());
        assert!(!matches!(
            HeaderResult::parse(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
            HeaderResult::V1(Ok(_)) | HeaderResult::V2(Ok(_))
        ));
    }

    #[test]
    fn only_listed_peers_may_send_it() {
        let from: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        assert!(allowed("10.1.2.3".parse().unwrap(), &from));
        assert!(allowed("::ffff:10.1.2.3".parse().unwrap(), &from));
        assert!(!allowed("192.0.2.1".parse().unwrap(), &from));
    }
}
