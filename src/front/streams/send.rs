//! Data sent on a stream within the client's flow-control window: each wait for
//! window is bounded as an HTTP/1 write of the same bytes is (the listener's
//! `send_min_rate`, `send_timeout`), so a client that opens no window (a zero-window
//! stall) has its stream reset instead of holding the answer and its server.

use super::io::{Reset, SendBody};
use crate::config::ListenerLimits;
use bytes::Bytes;

/// Why data could not be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stopped {
    /// The client reset the stream, or its connection ended.
    Gone,
    /// The client opened no window in time: the stream was reset.
    TooSlow,
}

/// Sends `data` (then ends the stream when `end`).
pub(super) async fn data(
    send: &mut impl SendBody,
    mut data: Bytes,
    end: bool,
    limits: &ListenerLimits,
    listener: &str,
) -> Result<(), Stopped> {
    if data.is_empty() {
        return match end {
            true => send.send_data(data, true).map_err(|_| Stopped::Gone),
            false => Ok(()),
        };
    }
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let wait = crate::front::proxy::write_timeout(limits, data.len());
        let window = std::future::poll_fn(|cx| send.poll_capacity(cx));
        let got = match crate::base::poll_time::timeout(wait, window).await {
            Ok(Some(Ok(n))) => n,
            Ok(_) => return Err(Stopped::Gone),
            Err(_) => {
                crate::metrics::client_closed(listener, "send_timeout");
                send.reset(Reset::Cancel);
                return Err(Stopped::TooSlow);
            }
        };
        if got == 0 {
            continue;
        }
        let chunk = data.split_to(got.min(data.len()));
        let last = end && data.is_empty();
        send.send_data(chunk, last).map_err(|_| Stopped::Gone)?;
    }
    Ok(())
}
