//! Holding a streaming request to the listener's minimum rates (`min_rate.rs`): the
//! checks `TetherProxy` makes for each body chunk it reads and each response chunk it
//! writes, on both HTTP/1 paths.

use super::{min_rate, RequestCtx, TetherProxy};
use pingora_core::Result;
use pingora_error::{Error, ErrorType};
use pingora_proxy::Session;

impl TetherProxy {
    /// A part of the body was read while it streams to the server: it must keep to the
    /// listener's minimum rate. The next read may wait until the body would fall behind
    /// (each at most `request_body_timeout`); a body already behind is answered 408 and the
    /// server's request abandoned.
    pub fn body_arrived(
        &self,
        session: &mut Session,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        // An upgraded connection's bytes (WebSocket) are no body: they may rest for the
        // listener's tunnel idle time.
        if session.was_upgraded() {
            session.set_read_timeout(Some(ctx.limits.tunnel_idle_timeout));
            return Ok(());
        }
        let read = session.as_downstream().body_bytes_read() as u64;
        if ctx.body_limit > 0 && read > ctx.body_limit {
            return Err(Error::explain(
                ErrorType::HTTPStatus(413),
                "the request body is larger than max_request_body",
            ));
        }
        if end_of_stream {
            session.set_read_timeout(Some(ctx.limits.request_body_timeout));
            return Ok(());
        }
        let waited = crate::front::head_limit::client_wait().unwrap_or_else(|| ctx.start.elapsed());
        match min_rate::body_time_left(&ctx.limits, waited, read) {
            Some(wait) => {
                session.set_read_timeout(Some(wait));
                Ok(())
            }
            None => {
                crate::metrics::client_closed(&self.name, "request_body_timeout");
                Err(Error::explain(
                    ErrorType::HTTPStatus(408),
                    "request body slower than request_body_min_rate",
                ))
            }
        }
    }

    /// A response body chunk of `len` bytes is about to be written to the client: the
    /// write gets what the listener's minimum rate allows for its size.
    pub fn sending(&self, session: &mut Session, len: usize, ctx: &RequestCtx) {
        let timeout = if session.was_upgraded() {
            ctx.limits.send_timeout
        } else {
            min_rate::write_timeout(&ctx.limits, len)
        };
        session.set_write_timeout(Some(timeout));
    }
}
