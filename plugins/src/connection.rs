//! What tether knows of a request beyond its head, for the plugins: the client it names
//! (the PROXY protocol's address, or the right-most untrusted `X-Forwarded-For` one), what
//! a balancer in front said in its PROXY protocol v2 header, the connection's TLS, the
//! listener and route it came through, and tether's routing view of its session.

use crate::lens::SessionLens;
use std::net::IpAddr;
use std::sync::Arc;

/// The request's connection and where it came in, as tether sees it.
#[derive(Clone, Default)]
pub struct Connection {
    /// The client (`None` on a Unix socket).
    pub client: Option<IpAddr>,
    /// The PROXY protocol v2 facts of the connection, when its balancer sent any.
    pub proxy: Option<Arc<ProxyFacts>>,
    /// What the TLS handshake established, when the connection is TLS.
    pub tls: Option<Arc<TlsFacts>>,
    /// The listener's name.
    pub listener: Option<Arc<str>>,
    /// The host/path route the request matched, by name.
    pub route: Option<Arc<str>>,
    /// The cluster the request is headed for before the plugins choose (an index, as in
    /// [`crate::Target`]).
    pub cluster: Option<usize>,
    /// tether's routing, for a plugin that asks where the request's session would go.
    pub sessions: Option<Arc<dyn SessionLens>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("client", &self.client)
            .field("proxy", &self.proxy)
            .field("tls", &self.tls)
            .field("listener", &self.listener)
            .field("route", &self.route)
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

/// What a client's TLS handshake with tether established, recorded once per connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFacts {
    /// The server name the client asked for (SNI).
    pub sni: Option<Box<str>>,
    /// The protocol version (`TLSv1.3`, ...).
    pub version: Box<str>,
    /// The subject of the client's certificate, when it presented one (RFC 4514 order:
    /// `CN=alice,O=Example,C=SE`).
    pub client_subject: Option<Box<str>>,
}

/// The TLVs of a PROXY protocol v2 header that say something about the client's request
/// (HAProxy's `proxy-v2-options`, AWS's VPC endpoint id). Text fields are kept only when
/// they are short printable ASCII (a balancer's header is not trusted to be well-formed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyFacts {
    /// `PP2_TYPE_AUTHORITY`: the host name the client asked for (its TLS SNI, when the
    /// balancer terminated TLS).
    pub authority: Option<Box<str>>,
    /// `PP2_TYPE_ALPN`: the protocol the client chose with the balancer (`h2`, ...).
    pub alpn: Option<Box<str>>,
    /// `PP2_TYPE_UNIQUE_ID`: the balancer's id of the connection or request.
    pub unique_id: Option<Box<str>>,
    /// `PP2_SUBTYPE_SSL_VERSION`: the client's TLS version with the balancer.
    pub tls_version: Option<Box<str>>,
    /// `PP2_SUBTYPE_SSL_CN`: the common name of the client's certificate.
    pub tls_client_cn: Option<Box<str>>,
    /// AWS `PP2_TYPE_AWS` (0xEA) `PP2_SUBTYPE_AWS_VPCE_ID`: the VPC endpoint it came through.
    pub aws_vpce_id: Option<Box<str>>,
}

impl ProxyFacts {
    /// Does it hold anything?
    pub fn is_empty(&self) -> bool {
        *self == ProxyFacts::default()
    }
}

/// `bytes` as text when they are 1 to 255 bytes of printable ASCII (spaces too); `None`
/// otherwise.
pub fn printable(bytes: &[u8]) -> Option<Box<str>> {
    let ok = (1..=255).contains(&bytes.len()) && bytes.iter().all(|b| (0x20..0x7f).contains(b));
    ok.then(|| String::from_utf8_lossy(bytes).into())
}
