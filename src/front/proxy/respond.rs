//! tether's own answers ([`Answer`]) on Pingora's proxy: the head and body each answer
//! says, built, then sent.

use crate::pipeline::Answer;
use bytes::Bytes;
use pingora_core::Result;
use pingora_http::ResponseHeader;
use pingora_proxy::Session;

/// An answer ready to send: built from an [`Answer`] while the request is still borrowed
/// (a redirect's `Location` is made of its host and target), sent once it is not.
pub struct Reply {
    head: Box<ResponseHeader>,
    body: Bytes,
    close: bool,
}

/// The reply `answer` makes; `close`: the connection closes after it (as it does after
/// every answer that [`Answer::closes`]), and the head says so.
pub fn reply(answer: &Answer<'_>, close: bool) -> Result<Reply> {
    let close = close || answer.closes();
    let body = Bytes::copy_from_slice(answer.body());
    let mut head = ResponseHeader::build(answer.status(), Some(6))?;
    let location = match *answer {
        Answer::ToHttps {
            redirect,
            host,
            origin,
        } => {
            let mut location = String::with_capacity(host.len() + origin.len() + 16);
            location.push_str("https://");
            location.push_str(std::str::from_utf8(host).unwrap_or_default());
            if redirect.port != 443 {
                location.push(':');
                location.push_str(&redirect.port.to_string());
            }
            location.push_str(std::str::from_utf8(origin).unwrap_or("/"));
            Some(location)
        }
        Answer::Redirect { to, .. } => Some(to.to_string()),
        _ => None,
    };
    let fields: &[(String, String)] = match answer {
        Answer::Plugin { fields, .. } => fields,
        _ => &[],
    };
    let set = |name: &str| fields.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if location.is_none() && !set("content-type") {
        head.insert_header(http::header::CONTENT_TYPE, answer.content_type())?;
    }
    head.insert_header(http::header::CONTENT_LENGTH, body.len())?;
    if !set("cache-control") {
        head.insert_header(http::header::CACHE_CONTROL, "no-store")?;
    }
    if let Some(secs) = answer.retry_after() {
        head.insert_header(http::header::RETRY_AFTER, secs)?;
    }
    if let Answer::NotAllowed = answer {
        head.insert_header(http::header::ALLOW, crate::pipeline::ALLOWED)?;
    }
    if let Some(location) = location {
        head.insert_header(http::header::LOCATION, location)?;
    }
    for (name, value) in fields {
        head.insert_header(name.clone(), value.as_str())?;
    }
    if close {
        head.insert_header(http::header::CONNECTION, "close")?;
    }
    Ok(Reply {
        head: Box::new(head),
        body,
        close,
    })
}

impl Reply {
    /// The head and the body (for a front end that sends them itself).
    pub fn into_parts(self) -> (Box<ResponseHeader>, Bytes) {
        (self.head, self.body)
    }
}

/// Sends `reply` and ends the response.
pub async fn send(session: &mut Session, reply: Reply) -> Result<()> {
    if reply.close {
        session.set_keepalive(None);
    }
    let empty = reply.body.is_empty();
    session.write_response_header(reply.head, empty).await?;
    if !empty {
        session.write_response_body(Some(reply.body), true).await?;
    }
    Ok(())
}

/// Builds and sends `answer` (for an answer that borrows nothing of the request).
pub async fn answer(session: &mut Session, answer: &Answer<'_>, close: bool) -> Result<()> {
    send(session, reply(answer, close)?).await
}

/// The status tether answers a failed request with (0: none, the client is gone).
pub(super) fn error_status(e: &pingora_error::Error) -> u16 {
    use pingora_error::ErrorType;
    match e.etype() {
        ErrorType::HTTPStatus(code) => *code,
        // A server that did not answer in time: 504, as nginx and HAProxy say.
        ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout
            if e.esource() == &pingora_error::ErrorSource::Upstream =>
        {
            504
        }
        _ => match e.esource() {
            pingora_error::ErrorSource::Upstream => 502,
            pingora_error::ErrorSource::Downstream => match e.etype() {
                // A streamed body's read passed `request_body_timeout`.
                ErrorType::ReadTimedout => 408,
                ErrorType::WriteError | ErrorType::ReadError | ErrorType::ConnectionClosed => 0,
                _ => 400,
            },
            _ => 500,
        },
    }
}
