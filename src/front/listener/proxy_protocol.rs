//! The PROXY protocol (HAProxy's, v1 text and v2 binary) on a listener behind an L4
//! balancer: the balancer says who the client is before the first byte of TLS or HTTP.
//! Only peers in `proxy_protocol.from` may send it, and on such a listener they must; a
//! missing, malformed or late header closes the connection (counted). The address it
//! carries becomes the connection's peer address, so everything that names the client
//! (`X-Forwarded-For`, `$WSRA`/`$WSRH`, the access log, `trusted_proxies`, per-client
//! limits) uses it. A v2 header's TLVs that say something of the client's request (the
//! authority, ALPN, unique id, TLS version and client certificate name, AWS's VPC endpoint)
//! are kept in the connection's proxy digest for the plugins. The format is the `ppp`
//! crate's.

use ipnet::IpNet;
use pingora_core::protocols::l4::socket::SocketAddr;
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::{GetProxyDigest, GetSocketDigest, SocketDigest};
use ppp::{v1, v2, HeaderResult, PartialResult};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;
use tether_plugins::{printable, ProxyFacts};
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

const PP2_TYPE_ALPN: u8 = 0x01;
const PP2_TYPE_AUTHORITY: u8 = 0x02;
const PP2_TYPE_UNIQUE_ID: u8 = 0x05;
const PP2_TYPE_SSL: u8 = 0x20;
const PP2_SUBTYPE_SSL_VERSION: u8 = 0x21;
const PP2_SUBTYPE_SSL_CN: u8 = 0x22;
const PP2_TYPE_AWS: u8 = 0xEA;
const PP2_SUBTYPE_AWS_VPCE_ID: u8 = 0x01;

/// The facts a v2 header's TLVs carry; `Err` when its TLVs do not parse (a malformed
/// header). Unknown types are skipped, as the specification says.
fn facts(header: &HeaderResult<'_>) -> Result<ProxyFacts, Refused> {
    let mut facts = ProxyFacts::default();
    let HeaderResult::V2(Ok(h)) = header else {
        return Ok(facts);
    };
    for tlv in h.tlvs() {
        let tlv = tlv.map_err(|_| "proxy_protocol_malformed")?;
        let value = &tlv.value[..];
        match tlv.kind {
            PP2_TYPE_ALPN => facts.alpn = printable(value),
            PP2_TYPE_AUTHORITY => facts.authority = printable(value),
            PP2_TYPE_UNIQUE_ID => facts.unique_id = printable(value),
            // One byte of client flags and four of verify result, then sub-TLVs.
            PP2_TYPE_SSL if value.len() >= 5 => {
                for sub in v2::TypeLengthValues::from(&value[5..]) {
                    let sub = sub.map_err(|_| "proxy_protocol_malformed")?;
                    match sub.kind {
                        PP2_SUBTYPE_SSL_VERSION => facts.tls_version = printable(&sub.value),
                        PP2_SUBTYPE_SSL_CN => facts.tls_client_cn = printable(&sub.value),
                        _ => {}
                    }
                }
            }
            PP2_TYPE_SSL => return Err("proxy_protocol_malformed"),
            PP2_TYPE_AWS if value.first() == Some(&PP2_SUBTYPE_AWS_VPCE_ID) => {
                facts.aws_vpce_id = printable(&value[1..])
            }
            _ => {}
        }
    }
    Ok(facts)
}

/// What the bytes read so far make of a header.
#[derive(Debug)]
pub enum Parsed {
    /// Not a whole header yet: read more.
    Incomplete,
    /// Not a header tether takes.
    Refused(Refused),
    /// A header of `len` bytes, naming `client` (`None`: the balancer's own connection)
    /// and carrying `facts`.
    Header {
        len: usize,
        client: Option<std::net::SocketAddr>,
        facts: ProxyFacts,
    },
}

/// Reads a header from the start of `buf` (bounded: past [`MOST`] bytes without a whole
/// header it is refused).
pub fn parse_header(buf: &[u8]) -> Parsed {
    let header = HeaderResult::parse(buf);
    if header.is_incomplete() {
        return match buf.len() >= MOST {
            true => Parsed::Refused("proxy_protocol_malformed"),
            false => Parsed::Incomplete,
        };
    }
    if !matches!(&header, HeaderResult::V1(Ok(_)) | HeaderResult::V2(Ok(_))) {
        return Parsed::Refused("proxy_protocol_malformed");
    }
    match facts(&header) {
        Ok(facts) => Parsed::Header {
            len: length(&header),
            client: source(&header),
            facts,
        },
        Err(why) => Parsed::Refused(why),
    }
}

fn length(header: &HeaderResult<'_>) -> usize {
    match header {
        HeaderResult::V1(Ok(h)) => h.header.len(),
        HeaderResult::V2(Ok(h)) => h.len(),
        _ => 0,
    }
}

/// Reads the header from a new connection within `deadline`; the stream is left with the
/// bytes read past the header put back and its peer address set to the client's. On a
/// refusal the caller still holds the stream, so that it counts the refusal before the
/// close can be seen.
pub async fn read(
    stream: &mut L4Stream,
    from: &[IpNet],
    deadline: Duration,
) -> Result<(), Refused> {
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
            match parse_header(&buf) {
                Parsed::Incomplete => continue,
                Parsed::Refused(why) => return Err(why),
                Parsed::Header { len, client, facts } => return Ok((len, client, facts)),
            }
        }
    };
    let (len, client, facts) = match tokio::time::timeout(deadline, read_header).await {
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
    if !facts.is_empty() {
        // The proxy digest is Pingora's place for what a proxy in front said; its own
        // response head is unused on a downstream connection.
        let head = pingora_http::ResponseHeader::build(200, Some(0)).ok();
        if let Some(head) = head {
            let facts: Box<dyn std::any::Any + Send + Sync> = Box::new(Arc::new(facts));
            stream.set_proxy_digest(pingora_core::protocols::raw_connect::ProxyDigest::new(
                Box::new(head),
                Some(facts),
            ));
        }
    }
    Ok(())
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

    fn v2_with(tlvs: &[(u8, &[u8])]) -> Vec<u8> {
        let mut b = v2::Builder::with_addresses(
            v2::Version::Two | v2::Command::Proxy,
            v2::Protocol::Stream,
            (
                "203.0.113.7:4711".parse::<std::net::SocketAddr>().unwrap(),
                "192.0.2.1:443".parse::<std::net::SocketAddr>().unwrap(),
            ),
        );
        for (kind, value) in tlvs {
            b = b.write_tlv(*kind, value).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn v2_tlvs_that_matter_are_kept() {
        // PP2_TYPE_SSL: client flags (1 byte), verify (4 bytes), then sub-TLVs.
        let mut ssl = vec![0x07, 0, 0, 0, 0];
        ssl.extend_from_slice(&[PP2_SUBTYPE_SSL_VERSION, 0, 7]);
        ssl.extend_from_slice(b"TLSv1.3");
        ssl.extend_from_slice(&[PP2_SUBTYPE_SSL_CN, 0, 10]);
        ssl.extend_from_slice(b"client one");
        let header = v2_with(&[
            (PP2_TYPE_ALPN, b"h2"),
            (PP2_TYPE_AUTHORITY, b"shop.example"),
            (PP2_TYPE_UNIQUE_ID, b"req-42"),
            (PP2_TYPE_SSL, &ssl),
            (PP2_TYPE_AWS, b"\x01vpce-0123"),
            (0xE0, b"ignored"),
            (PP2_TYPE_ALPN + 0x10, b"\x00\x01"),
        ]);
        let f = facts(&HeaderResult::parse(&header)).unwrap();
        assert_eq!(f.alpn.as_deref(), Some("h2"));
        assert_eq!(f.authority.as_deref(), Some("shop.example"));
        assert_eq!(f.unique_id.as_deref(), Some("req-42"));
        assert_eq!(f.tls_version.as_deref(), Some("TLSv1.3"));
        assert_eq!(f.tls_client_cn.as_deref(), Some("client one"));
        assert_eq!(f.aws_vpce_id.as_deref(), Some("vpce-0123"));
        // No TLVs: nothing; v1: nothing; binary junk in a text field: left out.
        assert!(facts(&HeaderResult::parse(&v2_with(&[])))
            .unwrap()
            .is_empty());
        let v1 = HeaderResult::parse(b"PROXY TCP4 203.0.113.7 192.0.2.1 4711 443\r\n");
        assert!(facts(&v1).unwrap().is_empty());
        let junk = v2_with(&[(PP2_TYPE_AUTHORITY, b"a\r\nX-Admin: 1")]);
        assert_eq!(facts(&HeaderResult::parse(&junk)).unwrap().authority, None);
    }

    #[test]
    fn tlvs_that_do_not_parse_are_malformed() {
        // A TLV claiming more bytes than the header holds.
        let mut header = v2_with(&[(PP2_TYPE_AUTHORITY, b"shop.example")]);
        let at = header.len() - 12 - 2;
        header[at] = 0x00;
        header[at + 1] = 0x40;
        assert_eq!(
            facts(&HeaderResult::parse(&header)),
            Err("proxy_protocol_malformed")
        );
        // An SSL TLV too short for its own fields.
        let short = v2_with(&[(PP2_TYPE_SSL, b"\x01\x00")]);
        assert_eq!(
            facts(&HeaderResult::parse(&short)),
            Err("proxy_protocol_malformed")
        );
    }

    #[test]
    fn only_listed_peers_may_send_it() {
        let from: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        assert!(allowed("10.1.2.3".parse().unwrap(), &from));
        assert!(allowed("::ffff:10.1.2.3".parse().unwrap(), &from));
        assert!(!allowed("192.0.2.1".parse().unwrap(), &from));
    }
}
