//! tether's own answers ([`Answer`]) on the engine's wire: written into the connection's
//! write buffer, the heads and bodies pingora-proxy's path sends for them too
//! (`proxy/respond.rs`).

use crate::pipeline::compress::{self, Kept, Plan};
use crate::pipeline::write_on_stack;
use crate::pipeline::Answer;

/// Writes `answer` into `out`; `close`: the connection closes after it (as it does after
/// every answer that [`Answer::closes`]), and the head says so. Whether it closes.
pub fn write(out: &mut Vec<u8>, answer: &Answer<'_>, close: bool) -> bool {
    let close = close || answer.closes();
    match *answer {
        Answer::ToHttps {
            redirect,
            host,
            origin,
        } => to_https(out, redirect, host, origin, close),
        Answer::Redirect { status, to } => {
            let kind = answer.content_type();
            plain(
                out,
                (status, kind),
                b"",
                close,
                Some(("Location", to.as_bytes())),
            );
        }
        Answer::Plugin {
            status,
            fields,
            body,
        } => with_fields(out, status, fields, body.as_bytes(), close),
        Answer::NotAllowed => {
            let (status, body, kind) = (answer.status(), answer.body(), answer.content_type());
            let allow = Some(("Allow", crate::pipeline::ALLOWED.as_bytes()));
            plain(out, (status, kind), body, close, allow);
        }
        _ => {
            let mut digits = [0u8; 48];
            let secs = answer.retry_after().map(|s| write_on_stack(&mut digits, s));
            let extra = secs.map(|secs| ("Retry-After", secs));
            let (status, body, kind) = (answer.status(), answer.body(), answer.content_type());
            plain(out, (status, kind), body, close, extra);
        }
    }
    close
}

/// Writes an answer: `status` and the body's media type, `body`, and whether the
/// connection closes after it (then it says so). `extra` is one more field
/// (`Retry-After`, `Location`).
fn plain(
    out: &mut Vec<u8>,
    (status, kind): (u16, &str),
    body: &[u8],
    close: bool,
    extra: Option<(&str, &[u8])>,
) {
    status_line(out, status);
    if !body.is_empty() || extra.is_none() {
        field(out, b"Content-Type", kind.as_bytes());
    }
    let mut digits = [0u8; 48];
    field(
        out,
        b"Content-Length",
        write_on_stack(&mut digits, body.len()),
    );
    field(out, b"Cache-Control", b"no-store");
    if let Some((name, value)) = extra {
        field(out, name.as_bytes(), value);
    }
    if close {
        field(out, b"Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

/// Writes a plugin's answer: [`plain`]'s head, where the plugin's `fields` replace
/// tether's of the same name (as pingora-proxy's path does), and its body.
fn with_fields(
    out: &mut Vec<u8>,
    status: u16,
    fields: &[(String, String)],
    body: &[u8],
    close: bool,
) {
    let set = |name: &str| fields.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    status_line(out, status);
    if !set("content-type") {
        out.extend_from_slice(b"Content-Type: text/plain; charset=utf-8\r\n");
    }
    let mut digits = [0u8; 48];
    let length = write_on_stack(&mut digits, body.len());
    field(out, b"Content-Length", length);
    if !set("cache-control") {
        field(out, b"Cache-Control", b"no-store");
    }
    for (name, value) in fields {
        field(out, name.as_bytes(), value.as_bytes());
    }
    if close {
        field(out, b"Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

/// Writes a redirect to `https://<host>[:<port>]<target>` (`redirect_https`; `host`
/// checked by `pipeline::https_host`), the `Location` written in place.
fn to_https(
    out: &mut Vec<u8>,
    redirect: crate::config::Redirect,
    host: &[u8],
    target: &[u8],
    close: bool,
) {
    status_line(out, redirect.status);
    out.extend_from_slice(b"Location: https://");
    out.extend_from_slice(host);
    let mut digits = [0u8; 48];
    if redirect.port != 443 {
        out.push(b':');
        out.extend_from_slice(write_on_stack(&mut digits, redirect.port));
    }
    out.extend_from_slice(target);
    out.extend_from_slice(b"\r\n");
    field(out, b"Content-Length", b"0");
    field(out, b"Cache-Control", b"no-store");
    if close {
        field(out, b"Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
}

/// `HTTP/1.1 <status> <reason>` and its line end, into an emptied `out`.
/// Writes a server's field as `plan` (compression) keeps it.
pub fn server_field(out: &mut Vec<u8>, name: &[u8], value: &[u8], plan: Option<Plan>) {
    match plan.map_or(Kept::As, |p| compress::kept(p, name, value)) {
        Kept::As => field(out, name, value),
        Kept::Dropped => {}
        Kept::Weak => {
            out.extend_from_slice(name);
            out.extend_from_slice(b": W/");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Writes the fields `plan` adds.
pub fn plan_fields(out: &mut Vec<u8>, plan: Option<Plan>) {
    for (name, value) in plan.into_iter().flat_map(compress::added) {
        field(out, name.as_bytes(), value);
    }
}

pub fn status_line(out: &mut Vec<u8>, status: u16) {
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    match http::StatusCode::from_u16(status) {
        Ok(code) => {
            out.extend_from_slice(code.as_str().as_bytes());
            out.push(b' ');
            let reason = code.canonical_reason().unwrap_or("");
            out.extend_from_slice(reason.as_bytes());
        }
        Err(_) => {
            let mut digits = [0u8; 48];
            out.extend_from_slice(write_on_stack(&mut digits, status));
            out.push(b' ');
        }
    }
    out.extend_from_slice(b"\r\n");
}

pub fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_as_http() {
        let mut out = Vec::new();
        plain(
            &mut out,
            (503, "text/plain; charset=utf-8"),
            b"no\n",
            false,
            None,
        );
        assert_eq!(
            out,
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\nCache-Control: no-store\r\n\r\nno\n"
        );
        let redirect = crate::config::Redirect {
            status: 308,
            port: 8443,
        };
        to_https(&mut out, redirect, b"shop.example", b"/a?b=1", false);
        assert_eq!(
            out,
            b"HTTP/1.1 308 Permanent Redirect\r\nLocation: https://shop.example:8443/a?b=1\r\nContent-Length: 0\r\nCache-Control: no-store\r\n\r\n"
        );
        plain(
            &mut out,
            (302, "text/plain; charset=utf-8"),
            b"",
            true,
            Some(("Location", b"/x")),
        );
        assert_eq!(
            out,
            b"HTTP/1.1 302 Found\r\nContent-Length: 0\r\nCache-Control: no-store\r\nLocation: /x\r\nConnection: close\r\n\r\n"
        );
    }
}
