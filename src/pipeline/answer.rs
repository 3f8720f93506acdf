//! The answers tether writes itself, as one type: what each says (status, fields, body)
//! is decided here once; each front end only puts an [`Answer`] on its wire
//! (`front/engine/answer.rs` for tether's HTTP/1 engine, `front/proxy/respond.rs` for Pingora's proxy).

use crate::config::{ErrorPages, Page, Redirect};
use crate::routing::Reject;

/// An answer of tether's own.
#[derive(Debug, Clone, Copy)]
pub enum Answer<'a> {
    /// 429 with `Retry-After`: the client is over its request rate.
    TooMany { retry_after_secs: u64 },
    /// `redirect_https`: to `https://host[:port]origin`.
    ToHttps {
        redirect: Redirect,
        host: &'a [u8],
        origin: &'a [u8],
    },
    /// 400: `redirect_https` without a usable `Host`.
    NoHost,
    /// 404: no route, or a route's exclusion.
    NotFound,
    /// 404: no file of a `serve:` directory has the path.
    NoFile,
    /// 405 with `Allow: GET, HEAD`: a `serve:` directory takes no other method.
    NotAllowed,
    /// A route's own answer (`respond:`).
    Route { status: u16, body: &'a str },
    /// A route's redirect (`redirect:`).
    Redirect { status: u16, to: &'a str },
    /// A plugin's answer: its status, its fields (they replace tether's of the same name)
    /// and a plain-text body.
    Plugin {
        status: u16,
        fields: &'a [(String, String)],
        body: &'a str,
    },
    /// 503: refused by tether (no server can take it, `sticky_force`).
    Refused(Reject),
    /// The server failed before an answer: 502 or 504.
    ServerFailed(u16),
    /// 408: the request body did not come at the listener's rate.
    TooSlow,
    /// A request tether refuses (400, 413, 431, ...), with its reason.
    Refusal { status: u16, why: &'a str },
    /// One of the above with an operator's page for its status (`error_pages`).
    Page {
        status: u16,
        page: &'a Page,
        retry_after: Option<u64>,
    },
}

impl<'a> Answer<'a> {
    /// The answer with the first page `pages` (most specific first) has for its status,
    /// when it is one of tether's error answers and an operator gave one.
    pub fn paged(self, pages: [Option<&'a ErrorPages>; 3]) -> Answer<'a> {
        let own = matches!(
            self,
            Answer::TooMany { .. }
                | Answer::NoHost
                | Answer::NotFound
                | Answer::NoFile
                | Answer::NotAllowed
                | Answer::Refused(_)
                | Answer::ServerFailed(_)
                | Answer::TooSlow
                | Answer::Refusal { .. }
        );
        let status = self.status();
        match pages.into_iter().flatten().find_map(|p| p.page(status)) {
            Some(page) if own => Answer::Page {
                status,
                page,
                retry_after: self.retry_after(),
            },
            _ => self,
        }
    }
}

impl Answer<'_> {
    pub fn status(&self) -> u16 {
        match *self {
            Answer::TooMany { .. } => 429,
            Answer::ToHttps { redirect, .. } => redirect.status,
            Answer::NoHost => 400,
            Answer::NotFound | Answer::NoFile => 404,
            Answer::NotAllowed => 405,
            Answer::Route { status, .. }
            | Answer::Redirect { status, .. }
            | Answer::Plugin { status, .. }
            | Answer::Refusal { status, .. } => status,
            Answer::Refused(_) => 503,
            Answer::ServerFailed(status) => status,
            Answer::TooSlow => 408,
            Answer::Page { status, .. } => status,
        }
    }

    /// The body's media type.
    pub fn content_type(&self) -> &'static str {
        match *self {
            Answer::Page { page, .. } => page.content_type,
            _ => "text/plain; charset=utf-8",
        }
    }

    /// The plain-text body (empty for a redirect).
    pub fn body(&self) -> &[u8] {
        match *self {
            Answer::ToHttps { .. } | Answer::Redirect { .. } => b"",
            Answer::NoHost => NO_HOST.as_bytes(),
            Answer::Route { body, .. } | Answer::Plugin { body, .. } => body.as_bytes(),
            Answer::Refused(reason) => reason.body().as_bytes(),
            Answer::Refusal { why, .. } => why.as_bytes(),
            Answer::Page { page, .. } => &page.body,
            Answer::NoFile => b"404 Not Found\n",
            Answer::NotAllowed => b"405 Method Not Allowed: only GET and HEAD\n",
            other => error_body(other.status()).as_bytes(),
        }
    }

    /// The seconds of its `Retry-After`, when it has one: a client over its rate, and a
    /// request refused for want of a slot on its busy server (worth trying again soon).
    pub fn retry_after(&self) -> Option<u64> {
        match *self {
            Answer::TooMany { retry_after_secs } => Some(retry_after_secs),
            Answer::Refused(Reject::Busy) => Some(1),
            Answer::Page { retry_after, .. } => retry_after,
            _ => None,
        }
    }

    /// Does tether close the client's connection after it, whatever the client asked?
    /// After a server's failure, a body that stopped coming, a refused request (what
    /// follows it on the connection cannot be trusted) and a redirect without a host.
    pub fn closes(&self) -> bool {
        matches!(
            self,
            Answer::NoHost | Answer::ServerFailed(_) | Answer::TooSlow | Answer::Refusal { .. }
        )
    }
}

/// `Allow` of a [`Answer::NotAllowed`].
pub const ALLOWED: &str = "GET, HEAD";

/// The answer to a `redirect_https` request without a host to redirect to.
pub const NO_HOST: &str = "400 Bad Request: no usable Host\n";

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
        500..=599 => "the application server failed to serve this request\n",
        _ => "error\n",
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_says_its_status_body_and_whether_it_closes() {
        let refused = Answer::Refused(Reject::NoServer);
        assert_eq!(refused.status(), 503);
        assert_eq!(refused.body(), Reject::NoServer.body().as_bytes());
        assert!(!refused.closes());
        let failed = Answer::ServerFailed(504);
        assert_eq!(failed.body(), error_body(504).as_bytes());
        assert!(failed.closes());
        let redirect = Answer::ToHttps {
            redirect: Redirect {
                status: 308,
                port: 443,
            },
            host: b"shop",
            origin: b"/",
        };
        assert_eq!((redirect.status(), redirect.body()), (308, &b""[..]));
        assert_eq!(
            Answer::TooMany {
                retry_after_secs: 1
            }
            .status(),
            429
        );
        assert!(Answer::NoHost.closes() && Answer::TooSlow.closes());
    }

    #[test]
    fn https_hosts() {
        assert_eq!(https_host(b"shop.example:8080"), Some(&b"shop.example"[..]));
        assert_eq!(https_host(b"[::1]:80"), Some(&b"[::1]"[..]));
        assert_eq!(https_host(b"[::1]"), Some(&b"[::1]"[..]));
        assert_eq!(https_host(b""), None);
        assert_eq!(https_host(b"a b"), None);
        assert_eq!(https_host(b"evil/x"), None);
    }
}
