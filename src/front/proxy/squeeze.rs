//! Compression (`compress:`) on Pingora's proxy: the answer's head edited in the response
//! filter, its body compressed in the body filter, as the pipeline's [`crate::pipeline::compress`]
//! decides; Pingora frames what comes out for the client.

use crate::pipeline::compress::{self, Encoder, Head};
use crate::pipeline::RequestCtx;
use bytes::Bytes;
use pingora_http::ResponseHeader;

impl Head for ResponseHeader {
    fn field(&self, name: &http::HeaderName) -> Option<&[u8]> {
        self.headers.get(name).map(http::HeaderValue::as_bytes)
    }

    fn remove(&mut self, name: &http::HeaderName) {
        self.remove_header(name);
    }

    fn set(&mut self, name: http::HeaderName, value: &[u8]) {
        if let Ok(value) = http::HeaderValue::from_bytes(value) {
            let _ = self.insert_header(name, value);
        }
    }

    fn append(&mut self, name: &'static str, value: &'static [u8]) {
        let _ = self.append_header(name, value);
    }
}

/// Decides the answer's compression and edits its head; `head`: a `HEAD` request;
/// `http10`: an HTTP/1.0 client's, whose compressed answer ends with its connection.
pub fn head(answer: &mut ResponseHeader, (head, http10): (bool, bool), ctx: &mut RequestCtx) {
    let Some(asked) = &ctx.compress else {
        return;
    };
    let status = answer.status.as_u16();
    let Some(plan) = compress::plan(asked, head, status, &answer.headers) else {
        return;
    };
    compress::edit(answer, plan);
    ctx.squeezing = Encoder::of(plan);
    if ctx.squeezing.is_some() && !http10 {
        // HTTP/1: the compressed length is not known ahead (Pingora leaves this out on
        // HTTP/2).
        answer.set(http::header::TRANSFER_ENCODING, b"chunked");
    }
}

/// Compresses the body's next part in place (`end`: its last).
pub fn body(body: &mut Option<Bytes>, end: bool, ctx: &mut RequestCtx) -> std::io::Result<()> {
    let Some(encoder) = &mut ctx.squeezing else {
        return Ok(());
    };
    let data = body.as_deref().unwrap_or_default();
    *body = Some(encoder.push(data, end)?);
    if end {
        ctx.squeezing = None;
    }
    Ok(())
}
