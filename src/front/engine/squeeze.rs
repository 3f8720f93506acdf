//! A compressed answer's body on the engine's wire: the server's body read as data (by its
//! length, de-chunked, or until the server closes), compressed, and framed for the client
//! (chunked; an HTTP/1.0 client's ends with the connection); the head goes out with the
//! first compressed bytes.

use super::conn::{to_client, Conn};
use super::relay::RelayError;
use crate::config::ListenerLimits;
use crate::pipeline::compress::Encoder;
use crate::pipeline::upstream::BodyReader;
use crate::routing::Timeouts;
use crate::wire::http1::chunked;
use crate::wire::http1::response::Framing;
use pingora_core::protocols::Stream;

/// Relays the body after the head (`up_buf[start..filled]` is read already), compressed by
/// `encoder`. `Ok(true)` when the server's connection ended cleanly at the body's end.
pub(super) async fn relay(
    up: &mut Stream,
    c: &mut Conn,
    framing: Framing,
    mut encoder: Encoder,
    read: (usize, usize),
    timeouts: Timeouts,
    (limits, listener): (&ListenerLimits, &str),
) -> Result<bool, RelayError> {
    let chunked = c.head.minor > 0;
    let Conn {
        stream,
        out,
        up_buf,
        ..
    } = c;
    let mut reader = BodyReader::new(framing, read);
    loop {
        let data = match reader.next(up, up_buf, timeouts.read).await {
            Ok(Some(range)) => range,
            Ok(None) => 0..0,
            Err(why) => return Err(RelayError::Server(why)),
        };
        let end = reader.is_done();
        let squeezed = encoder
            .push(&up_buf[data], end)
            .map_err(|_| RelayError::Server("compressing the answer failed"))?;
        if chunked {
            chunked::chunk(out, &squeezed);
            if end {
                out.extend_from_slice(chunked::LAST_CHUNK);
            }
        } else {
            out.extend_from_slice(&squeezed);
        }
        if !out.is_empty() {
            to_client(stream, out, limits, listener)
                .await
                .map_err(|_| RelayError::Client)?;
            out.clear();
        }
        if end {
            return Ok(reader.clean());
        }
    }
}
