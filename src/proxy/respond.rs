//! Short plain-text responses tether writes itself (503 on refusal, 502/504 on upstream
//! errors, 400 on a bad request head).

use bytes::Bytes;
use pingora_core::Result;
use pingora_http::ResponseHeader;
use pingora_proxy::Session;

/// Does the client connection stay open after tether's own answer?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conn {
    KeepAlive,
    /// tether closes the connection after the answer, and says so (`Connection: close`),
    /// so a client does not send the next request into a closing socket.
    Close,
}

/// Writes `status` with a `text/plain` body and ends the response.
pub async fn plain(
    session: &mut Session,
    status: u16,
    body: impl Into<Bytes>,
    conn: Conn,
) -> Result<()> {
    let body: Bytes = body.into();
    let resp = plain_head(session, status, body.len(), conn)?;
    session.write_response_header(resp, false).await?;
    session.write_response_body(Some(body), true).await
}

/// Writes a plugin's answer: `status`, its own `headers` (a script's `Location`, ...;
/// they replace tether's of the same name) and a `text/plain` body.
pub async fn plain_with(
    session: &mut Session,
    status: u16,
    headers: &[(String, String)],
    body: impl Into<Bytes>,
    conn: Conn,
) -> Result<()> {
    let body: Bytes = body.into();
    let mut resp = plain_head(session, status, body.len(), conn)?;
    for (name, value) in headers {
        resp.insert_header(name.clone(), value.as_str())?;
    }
    session.write_response_header(resp, false).await?;
    session.write_response_body(Some(body), true).await
}

/// Answers `429 Too Many Requests` with `Retry-After` (a client over its request rate).
pub async fn too_many(session: &mut Session, retry_after: std::time::Duration) -> Result<()> {
    let body = error_body(429);
    let mut resp = plain_head(session, 429, body.len(), Conn::KeepAlive)?;
    resp.insert_header(http::header::RETRY_AFTER, retry_after.as_secs().max(1))?;
    session.write_response_header(resp, false).await?;
    session
        .write_response_body(Some(Bytes::from_static(body.as_bytes())), true)
        .await
}

/// The head of a short text answer tether writes itself.
fn plain_head(
    session: &mut Session,
    status: u16,
    len: usize,
    conn: Conn,
) -> Result<Box<ResponseHeader>> {
    let mut resp = ResponseHeader::build(status, Some(5))?;
    resp.insert_header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")?;
    resp.insert_header(http::header::CONTENT_LENGTH, len)?;
    resp.insert_header(http::header::CACHE_CONTROL, "no-store")?;
    if conn == Conn::Close {
        session.set_keepalive(None);
        resp.insert_header(http::header::CONNECTION, "close")?;
    }
    Ok(Box::new(resp))
}

/// Answers with a redirect to the same host and path over https (`redirect_https`).
pub async fn to_https(session: &mut Session, redirect: crate::config::Redirect) -> Result<()> {
    let req = session.req_header();
    let host = req
        .headers
        .get(http::header::HOST)
        .map(|h| h.as_bytes())
        .unwrap_or_default();
    let Some(host) = https_host(host) else {
        return plain(session, 400, NO_HOST, Conn::Close).await;
    };
    let mut location = String::with_capacity(host.len() + 64);
    location.push_str("https://");
    location.push_str(std::str::from_utf8(host).unwrap_or_default());
    if redirect.port != 443 {
        location.push(':');
        location.push_str(&redirect.port.to_string());
    }
    location.push_str(req.uri.path_and_query().map_or("/", |p| p.as_str()));
    let mut resp = ResponseHeader::build(redirect.status, Some(3))?;
    resp.insert_header(http::header::LOCATION, location)?;
    resp.insert_header(http::header::CONTENT_LENGTH, 0)?;
    resp.insert_header(http::header::CACHE_CONTROL, "no-store")?;
    session.write_response_header(Box::new(resp), true).await
}

/// The answer to a `redirect_https` request without a host to redirect to.
pub const NO_HOST: &str = "400 Bad Request: no usable Host\n";

/// The host of a `Host` value for an https `Location`, its port left out; `None` unless
/// it is a plain host name or address (nothing else goes into the `Location`).
pub fn https_host(host: &[u8]) -> Option<&[u8]> {
    let host = match host.iter().rposition(|&b| b == b':') {
        Some(colon) if !host.ends_with(b"]") => &host[..colon],
        _ => host,
    };
    let valid = !host.is_empty()
        && host
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(b));
    valid.then_some(host)
}

/// Answers with a redirect to `to` (a route's `redirect:`).
pub async fn redirect(session: &mut Session, status: u16, to: &str) -> Result<()> {
    let mut resp = ResponseHeader::build(status, Some(3))?;
    resp.insert_header(http::header::LOCATION, to)?;
    resp.insert_header(http::header::CONTENT_LENGTH, 0)?;
    resp.insert_header(http::header::CACHE_CONTROL, "no-store")?;
    session.write_response_header(Box::new(resp), true).await
}

/// The body tether sends with an error status it generates.
pub fn error_body(status: u16) -> &'static str {
    match status {
        400 => "400 Bad Request\n",
        404 => "404 Not Found: no route for this request\n",
        408 => "408 Request Timeout: the request body did not arrive in time\n",
        413 => "413 Request Entity Too Large\n",
        429 => "429 Too Many Requests: this client is over its request rate\n",
        431 => "431 Request Header Fields Too Large\n",
        502 => "502 Bad Gateway: the application server did not answer\n",
        503 => "503 Service Unavailable: no server is available\n",
        504 => "504 Gateway Timeout: the application server did not answer in time\n",
        _ => "error\n",
    }
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
