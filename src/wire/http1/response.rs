//! A server's response head as tether's engine reads it: indexed in the read buffer like a
//! request's (`head.rs`), and how its body is framed (RFC 9112 §6.3).

use super::head::{Field, Span, MAX_FIELDS};
use std::mem::MaybeUninit;

/// How a response's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body: an answer to `HEAD`, 1xx, 204, 304 (§6.3 rules 1 and 2).
    None,
    Length(u64),
    Chunked,
    /// Read until the server closes (§6.3 rules 4 and 8).
    Close,
}

/// Is `status` a final answer? Every 1xx is interim (more answers follow) but `101`, after
/// which the connection speaks another protocol (RFC 9110 §15.2).
pub fn is_final(status: u16) -> bool {
    !(100..200).contains(&status) || status == 101
}

#[derive(Debug, Default)]
pub struct ResponseHead {
    pub status: u16,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    pub reason: Span,
    pub len: usize,
    pub fields: Vec<Field>,
}

/// Why a server's head was not usable (the request fails with 502).
pub type Broken = &'static str;

impl ResponseHead {
    pub fn new() -> Self {
        ResponseHead {
            fields: Vec::with_capacity(MAX_FIELDS),
            ..ResponseHead::default()
        }
    }

    /// Reads a head from the start of `buf`: `Ok(true)` when it is whole.
    pub fn parse(&mut self, buf: &[u8]) -> Result<bool, Broken> {
        let mut slots = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_FIELDS];
        let mut resp = httparse::Response::new(&mut []);
        let len = match httparse::ParserConfig::default()
            .parse_response_with_uninit_headers(&mut resp, buf, &mut slots)
        {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(false),
            Err(_) => return Err("a malformed response head"),
        };
        let (Some(status), Some(minor)) = (resp.code, resp.version) else {
            return Err("a malformed response head");
        };
        self.status = status;
        self.minor = minor;
        self.reason = resp
            .reason
            .map_or(Span::default(), |r| Span::within(buf, r.as_bytes()));
        self.len = len;
        self.fields.clear();
        for h in resp.headers.iter() {
            self.fields.push(Field {
                name: Span::within(buf, h.name.as_bytes()),
                value: Span::within(buf, h.value),
            });
        }
        Ok(true)
    }

    pub fn fields<'b>(
        &'b self,
        buf: &'b [u8],
    ) -> impl DoubleEndedIterator<Item = (&'b [u8], &'b [u8])> {
        super::head::fields_in(&self.fields, buf)
    }

    /// The values of the fields called `name` (in any case), in order.
    pub fn values<'b, 'n>(
        &'b self,
        buf: &'b [u8],
        name: &'n str,
    ) -> impl DoubleEndedIterator<Item = &'b [u8]> + use<'b, 'n> {
        super::head::values_in(&self.fields, buf, name)
    }

    /// How the body is framed (the request was `HEAD` when `head_request`), and whether
    /// the server keeps the connection open after it.
    pub fn framing(&self, buf: &[u8], head_request: bool) -> Result<(Framing, bool), Broken> {
        let (mut length, mut te, mut close, mut keep_alive) = (None, None, false, false);
        for (name, value) in self.fields(buf) {
            if name.eq_ignore_ascii_case(b"content-length") {
                for part in value.split(|&b| b == b',') {
                    let n = std::str::from_utf8(part.trim_ascii())
                        .ok()
                        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(|t| t.parse::<u64>().ok())
                        .ok_or("an invalid Content-Length")?;
                    if length.is_some_and(|l| l != n) {
                        return Err("conflicting Content-Length values");
                    }
                    length = Some(n);
                }
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                te = Some(value);
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                    close |= token.eq_ignore_ascii_case(b"close");
                    keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            }
        }
        let persistent = !close && (self.minor >= 1 || keep_alive);
        if head_request || self.status < 200 || self.status == 204 || self.status == 304 {
            return Ok((Framing::None, persistent));
        }
        if let Some(te) = te {
            // §6.3 rule 4: chunked last frames it; any other coding ends with the close.
            let last = te.rsplit(|&b| b == b',').next().map(<[u8]>::trim_ascii);
            return Ok(match last {
                Some(c) if c.eq_ignore_ascii_case(b"chunked") => (Framing::Chunked, persistent),
                _ => (Framing::Close, false),
            });
        }
        Ok(match length {
            Some(n) => (Framing::Length(n), persistent),
            None => (Framing::Close, false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framing(head: &[u8], head_request: bool) -> Result<(Framing, bool), Broken> {
        let mut r = ResponseHead::new();
        assert_eq!(r.parse(head), Ok(true));
        r.framing(head, head_request)
    }

    #[test]
    fn a_switch_of_protocols_is_final_other_1xx_are_not() {
        assert!(is_final(101));
        for interim in [100, 102, 103, 199] {
            assert!(!is_final(interim), "{interim}");
        }
        for done in [200, 204, 304, 502] {
            assert!(is_final(done), "{done}");
        }
    }

    #[test]
    fn response_framing_table() {
        for (head, head_request, expected) in [
            (
                &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"[..],
                false,
                Ok((Framing::Length(5), true)),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                true,
                Ok((Framing::None, true)),
            ),
            (
                b"HTTP/1.1 204 No Content\r\n\r\n",
                false,
                Ok((Framing::None, true)),
            ),
            (
                b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
                false,
                Ok((Framing::None, true)),
            ),
            (
                b"HTTP/1.1 100 Continue\r\n\r\n",
                false,
                Ok((Framing::None, true)),
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                false,
                Ok((Framing::Chunked, true)),
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                false,
                Ok((Framing::Close, false)),
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                false,
                Ok((Framing::Chunked, true)),
            ),
            (
                b"HTTP/1.1 200 OK\r\n\r\n",
                false,
                Ok((Framing::Close, false)),
            ),
            (
                b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
                false,
                Ok((Framing::Length(1), false)),
            ),
            (
                b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n",
                false,
                Ok((Framing::Length(1), false)),
            ),
            (
                b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
                false,
                Ok((Framing::Length(1), true)),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\n",
                false,
                Ok((Framing::Length(1), true)),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
                false,
                Err("conflicting Content-Length values"),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                false,
                Err("an invalid Content-Length"),
            ),
        ] {
            assert_eq!(
                framing(head, head_request),
                expected,
                "{}",
                String::from_utf8_lossy(head)
            );
        }
    }

    #[test]
    fn a_head_is_read_whole_or_asks_for_more() {
        let whole =
            b"HTTP/1.1 200 OK\r\nSet-Cookie: JSESSIONID=a.tc1\r\nContent-Length: 2\r\n\r\nhi";
        let mut r = ResponseHead::new();
        for cut in 0..whole.len() - 2 {
            assert_eq!(r.parse(&whole[..cut]), Ok(false), "cut at {cut}");
        }
        assert_eq!(r.parse(whole), Ok(true));
        assert_eq!(
            (r.status, r.minor, r.reason.of(whole)),
            (200, 1, &b"OK"[..])
        );
        assert_eq!(&whole[r.len..], b"hi");
        assert_eq!(r.fields(whole).count(), 2);
        assert!(ResponseHead::new()
            .parse(b"HTTP/1.1 2000 OK\r\n\r\n")
            .is_err());
    }
}
