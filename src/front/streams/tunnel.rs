//! WebSockets over HTTP/2 (RFC 8441): a stream's extended `CONNECT` with `:protocol
//! websocket` becomes an HTTP/1.1 upgrade to the server, with a `Sec-WebSocket-Key`
//! tether makes and whose `Sec-WebSocket-Accept` it checks, as the server's client it is;
//! after the server's `101` the stream's DATA and the server's bytes are relayed both
//! ways until both have ended. Only `tunnel_idle_timeout` bounds it, as on HTTP/1.

use super::body::Upload;
use super::io::{RecvBody, Reset, SendBody};
use super::send;
use crate::config::ListenerLimits;
use crate::metrics::TunnelEnded;
use crate::pipeline::Answer;
use base64::Engine as _;
use bytes::Bytes;
use http::request::Parts;
use pingora_core::protocols::Stream;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes read from the server at once (a WebSocket frame of 16 KiB in one read).
const BUFFER: usize = 16 * 1024;

/// RFC 6455 §1.3: what the server appends to the key before hashing it.
const WEBSOCKET_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Is the stream's request a tunnel tether serves (an extended `CONNECT` for a WebSocket),
/// a request (`Ok(false)`), or a `CONNECT` it refuses (a plain one: tether is no forward
/// proxy; another protocol than `websocket`)?
pub(super) fn asked(parts: &Parts) -> Result<bool, Answer<'static>> {
    if parts.method != http::Method::CONNECT {
        return Ok(false);
    }
    match parts.extensions.get::<h2::ext::Protocol>() {
        Some(p) if p.as_str().eq_ignore_ascii_case("websocket") => Ok(true),
        Some(_) => Err(Answer::Refusal {
            status: 501,
            why: "only the websocket protocol is served over an extended CONNECT",
        }),
        None => Err(Answer::Refusal {
            status: 405,
            why: "CONNECT is not served: tether is no forward proxy",
        }),
    }
}

/// A fresh `Sec-WebSocket-Key`: 16 random bytes in base64.
pub(super) fn key() -> [u8; 24] {
    let mut nonce = [0u8; 16];
    boring::rand::rand_bytes(&mut nonce).expect("BoringSSL's random bytes");
    let mut key = [0u8; 24];
    let n = base64::engine::general_purpose::STANDARD
        .encode_slice(nonce, &mut key)
        .expect("16 bytes are 24 in base64");
    debug_assert_eq!(n, 24);
    key
}

/// Does `accept` answer `key` (RFC 6455 §4.2.2)?
pub(super) fn accepts(key: &[u8; 24], accept: Option<&[u8]>) -> bool {
    let mut hasher = boring::sha::Sha1::new();
    hasher.update(key);
    hasher.update(WEBSOCKET_GUID);
    let mut expected = [0u8; 28];
    let n = base64::engine::general_purpose::STANDARD
        .encode_slice(hasher.finish(), &mut expected)
        .expect("20 bytes are 28 in base64");
    accept.is_some_and(|a| a.trim_ascii() == &expected[..n])
}

/// Relays the tunnel until both sides have ended, each direction on its own so neither
/// waits for the other: `early` (what the server sent after its head) goes first. A side's
/// end (the client's `END_STREAM`, the server's FIN) is passed on as an end of the other's
/// write side, the other direction going on; a side that fails has the other closed (the
/// stream reset, or the server's connection shut).
pub(super) async fn relay(
    up: &mut Stream,
    early: &[u8],
    upload: &mut Upload<impl RecvBody>,
    send: &mut impl SendBody,
    (limits, listener): (&ListenerLimits, &str),
) -> TunnelEnded {
    let ended = {
        let (mut from_server, mut to_server) = tokio::io::split(&mut *up);
        // Bumped by each move either way; the idle watch reads it.
        let moves = AtomicU64::new(0);
        let upstream = async {
            while let Some(data) = upload.tunnel_data().await {
                let Ok(data) = data else {
                    return Err(TunnelEnded::ClientFailed);
                };
                moves.fetch_add(1, Ordering::Relaxed);
                if to_server.write_all(&data).await.is_err() {
                    return Err(TunnelEnded::ServerFailed);
                }
            }
            let _ = to_server.shutdown().await;
            Ok(())
        };
        let downstream = async {
            if !early.is_empty() {
                let early = Bytes::copy_from_slice(early);
                if send::data(send, early, false, limits, listener)
                    .await
                    .is_err()
                {
                    return Err(TunnelEnded::ClientFailed);
                }
            }
            let mut buf = vec![0u8; BUFFER];
            loop {
                match from_server.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => {
                        moves.fetch_add(1, Ordering::Relaxed);
                        let data = Bytes::copy_from_slice(&buf[..n]);
                        if send::data(send, data, false, limits, listener)
                            .await
                            .is_err()
                        {
                            return Err(TunnelEnded::ClientFailed);
                        }
                    }
                    Err(_) => return Err(TunnelEnded::ServerFailed),
                }
            }
            match send.send_data(Bytes::new(), true) {
                Ok(()) => Ok(()),
                Err(_) => Err(TunnelEnded::ClientFailed),
            }
        };
        let idle = async {
            let mut seen = u64::MAX;
            loop {
                let now = moves.load(Ordering::Relaxed);
                if now == seen {
                    return TunnelEnded::Idle;
                }
                seen = now;
                tokio::time::sleep(limits.tunnel_idle_timeout).await;
            }
        };
        tokio::pin!(upstream, downstream, idle);
        let (mut up_done, mut down_done) = (false, false);
        loop {
            let result = tokio::select! {
                r = &mut upstream, if !up_done => { up_done = true; r }
                r = &mut downstream, if !down_done => { down_done = true; r }
                ended = &mut idle => Err(ended),
            };
            if let Err(ended) = result {
                break ended;
            }
            if up_done && down_done {
                break TunnelEnded::Closed;
            }
        }
    };
    if matches!(ended, TunnelEnded::ServerFailed | TunnelEnded::Idle) {
        send.reset(Reset::Cancel);
    }
    if matches!(ended, TunnelEnded::ClientFailed | TunnelEnded::Idle) {
        let _ = up.shutdown().await;
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_of_rfc_6455s_example() {
        // RFC 6455 §1.3's key and the accept it gives.
        let key: [u8; 24] = *b"dGhlIHNhbXBsZSBub25jZQ==";
        assert!(accepts(&key, Some(b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")));
        assert!(accepts(&key, Some(b" s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")));
        assert!(!accepts(&key, Some(b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo")));
        assert!(!accepts(&key, None));
        assert_ne!(super::key(), super::key());
    }
}
