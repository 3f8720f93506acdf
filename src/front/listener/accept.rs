//! The first bytes of a client connection: the TLS handshake (bounded by the listener's
//! head deadline, counted by result) and which HTTP the connection speaks (ALPN `h2`, the
//! h2c preface on a plain listener that allows it, or HTTP/1.x).

use crate::metrics;
use crate::state::tls::{conn::Record, record_reads::RecordReads, Acceptor};
use log::debug;
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::tls::server::handshake_with_callback;
use pingora_core::protocols::{Stream, ALPN};
use std::time::Duration;

/// What the client sends first on an HTTP/2 connection without TLS (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub enum Speaks {
    Http1(Stream),
    Http2(Stream),
}

/// A bounded set of reasons a handshake failed, from the TLS library's error text
/// (BoringSSL writes reasons as `HTTP_REQUEST`, OpenSSL as `http request`).
fn failure(e: &str) -> &'static str {
    let e = e.to_ascii_lowercase().replace('_', " ");
    if e.contains("http request") {
        "plain_http"
    } else if e.contains("version") || e.contains("protocol") {
        "version"
    } else if e.contains("cipher") {
        "cipher"
    } else if e.contains("certificate") {
        "client_certificate"
    } else if e.contains("eof") || e.contains("reset") || e.contains("broken pipe") {
        "eof"
    } else {
        "other"
    }
}

/// Handshakes (when `tls`) and tells HTTP/2 from HTTP/1; `None` closes the connection.
pub async fn accept(
    stream: Stream,
    tls: Option<&Acceptor>,
    h2c: bool,
    deadline: Duration,
    listener: &str,
) -> Option<Speaks> {
    let Some(tls) = tls else {
        if !h2c {
            return Some(Speaks::Http1(stream));
        }
        return h2c_or_http1(stream, deadline, listener).await;
    };
    // The listener hands tether the plain TCP stream; the handshake is tether's.
    let l4 = match stream.into_any().downcast::<L4Stream>() {
        Ok(l4) => l4,
        Err(_) => {
            debug!("listener {listener}: not a TCP stream, closing");
            return None;
        }
    };
    match tokio::time::timeout(
        deadline,
        handshake_with_callback(&tls.acceptor, RecordReads::new(*l4), &Record),
    )
    .await
    {
        Err(_) => {
            metrics::tls_handshake(listener, "timeout");
            None
        }
        Ok(Err(e)) => {
            let e = e.to_string();
            metrics::tls_handshake(listener, failure(&e));
            debug!("listener {listener}: TLS handshake failed: {e}");
            None
        }
        Ok(Ok(tls_stream)) => {
            metrics::tls_handshake(listener, "ok");
            let h2 = matches!(
                pingora_core::protocols::Ssl::selected_alpn_proto(&tls_stream),
                Some(ALPN::H2)
            );
            let stream: Stream = Box::new(tls_stream);
            Some(if h2 {
                Speaks::Http2(stream)
            } else {
                Speaks::Http1(stream)
            })
        }
    }
}

/// On a plain listener with `h2c: true`: HTTP/2 when the connection starts with the
/// preface. Waiting for 24 bytes is bounded by the head deadline (a shorter HTTP/1 request
/// that waits for its answer is closed when it passes).
async fn h2c_or_http1(mut stream: Stream, deadline: Duration, listener: &str) -> Option<Speaks> {
    let mut first = [0u8; 24];
    match tokio::time::timeout(deadline, stream.try_peek(&mut first)).await {
        Ok(Ok(true)) if &first == PREFACE => Some(Speaks::Http2(stream)),
        Ok(Ok(_)) => Some(Speaks::Http1(stream)),
        Ok(Err(_)) => None,
        Err(_) => {
            metrics::client_closed(listener, "request_head_timeout");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_failures_have_few_names() {
        for (text, want) in [
            (
                "TLS accept() failed: error:0A00009C:SSL routines::http request",
                "plain_http",
            ),
            (
                "error:0A000102:SSL routines::unsupported protocol",
                "version",
            ),
            ("error:0A0000C1:SSL routines::no shared cipher", "cipher"),
            (
                "error:0A0000C7:SSL routines::peer did not return a certificate",
                "client_certificate",
            ),
            (
                "TLS accept() failed: error:1000009c:SSL routines:OPENSSL_internal:HTTP_REQUEST",
                "plain_http",
            ),
            (
                "error:100000f0:SSL routines:OPENSSL_internal:UNSUPPORTED_PROTOCOL",
                "version",
            ),
            (
                "error:100000b8:SSL routines:OPENSSL_internal:NO_SHARED_CIPHER",
                "cipher",
            ),
            (
                "error:100000c7:SSL routines:OPENSSL_internal:PEER_DID_NOT_RETURN_A_CERTIFICATE",
                "client_certificate",
            ),
            ("unexpected EOF", "eof"),
            ("something new", "other"),
        ] {
            assert_eq!(failure(text), want, "{text}");
        }
    }
}
