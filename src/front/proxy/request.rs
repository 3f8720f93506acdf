//! A request on Pingora's proxy as the pipeline reads it ([`Req`]), and facts of its head
//! as it arrived (its size, its raw bytes).

use crate::pipeline::Front;
use crate::routing::Fields;
use http::HeaderName;
use pingora_http::RequestHeader;
use pingora_proxy::Session;
use std::net::IpAddr;

/// A request's parsed head and connection, for the pipeline's steps.
pub struct Req<'a> {
    head: &'a RequestHeader,
    peer: Option<IpAddr>,
    port: u16,
}

impl<'a> Req<'a> {
    pub fn of(session: &'a Session) -> Self {
        Req {
            head: session.req_header(),
            peer: session
                .client_addr()
                .and_then(|a| a.as_inet())
                .map(|a| a.ip()),
            port: session
                .server_addr()
                .and_then(|a| a.as_inet())
                .map_or(0, |a| a.port()),
        }
    }
}

impl Fields for Req<'_> {
    fn values<'b>(
        &'b self,
        name: &'b HeaderName,
    ) -> impl DoubleEndedIterator<Item = &'b [u8]> + 'b {
        Fields::values(&self.head.headers, name)
    }
}

impl Front for Req<'_> {
    fn peer(&self) -> Option<IpAddr> {
        self.peer
    }

    fn local_port(&self) -> u16 {
        self.port
    }

    /// `Host`, or the URI's authority (as HTTP/2 sends it).
    fn host(&self) -> Option<&[u8]> {
        self.head
            .headers
            .get(http::header::HOST)
            .map(|h| h.as_bytes())
            .or_else(|| self.head.uri.authority().map(|a| a.as_str().as_bytes()))
    }

    fn target(&self) -> &[u8] {
        self.head.raw_path()
    }

    fn origin(&self) -> &[u8] {
        self.head
            .uri
            .path_and_query()
            .map_or(b"/", |p| p.as_str().as_bytes())
    }
}

/// Bytes of the request head as it arrived (0 when Pingora does not keep them).
pub fn head_size(session: &Session) -> usize {
    raw_head(session).map_or(0, |h| h.len())
}

/// The request head as it arrived, on HTTP/1 (a slice of the read buffer, not a copy).
pub fn raw_head(session: &Session) -> Option<bytes::Bytes> {
    session
        .as_downstream()
        .as_http1()
        .map(|h| h.get_headers_raw_bytes())
}
