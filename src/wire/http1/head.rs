//! A request head as tether's HTTP/1 engine reads it: `httparse` over the connection's read
//! buffer, kept as offsets into that buffer (an index allocated once per connection), so a
//! request's head is neither copied nor allocated.

use std::mem::MaybeUninit;

/// Most fields one head may carry: Pingora's bound, so both engines refuse the same heads.
pub const MAX_FIELDS: usize = 256;

/// A range of the read buffer. `u32`: a head is bounded by `max_request_head` (at most
/// 1 MiB, `config::validate`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn of<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        &buf[self.start as usize..self.end as usize]
    }

    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// The range `part` takes in `buf` (`part` must be a subslice of `buf`).
    pub(crate) fn within(buf: &[u8], part: &[u8]) -> Span {
        let start = part.as_ptr().addr() - buf.as_ptr().addr();
        Span {
            start: start as u32,
            end: (start + part.len()) as u32,
        }
    }
}

/// One field line: its name as the client wrote it, and its value without surrounding
/// whitespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Field {
    pub name: Span,
    pub value: Span,
}

/// Why a head was refused: the status and the body of the answer. The connection closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub why: &'static str,
}

pub(crate) const fn bad(why: &'static str) -> Refusal {
    Refusal { status: 400, why }
}

/// The bytes an origin-form target (`/path?query`) may hold: the sets of pingora-core's URI
/// parser (the `http` crate's), so that both engines take the same targets. The path takes
/// RFC 3986's `pchar` and `/`, and `[`, `\\`, `]`, `^`, `|`, `"`, `{`, `}` that clients send
/// unencoded; the query takes `pchar`, `/`, `?` and every other visible byte but `"`, `#`,
/// `<`, `>`. Bytes over 0x7e must make UTF-8 ([`origin_form`] checks).
const PATH: [bool; 256] = byte_set(false);
const QUERY: [bool; 256] = byte_set(true);

const fn byte_set(query: bool) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = match query {
            false => {
                matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x40..=0x5F | 0x61..=0x7A | 0x7C | 0x7E | b'"' | b'{' | b'}' | 0x80..=0xFF)
            }
            true => matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x7E | 0x80..=0xFF),
        };
        i += 1;
    }
    t
}

/// An origin-form target's bytes (the other forms go to pingora-proxy and its parser). A
/// fragment is not part of a request target (RFC 9112 §3.2): Pingora's parser drops it, a
/// server may read it as part of the path; neither is what the client asked for.
fn origin_form(target: &[u8]) -> Result<(), Refusal> {
    if target.contains(&b'#') {
        return Err(bad(
            "400 Bad Request: a fragment (#) in the request target\n",
        ));
    }
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(q) => (&target[..q], &target[q + 1..]),
        None => (target, &b""[..]),
    };
    let ok = path.iter().all(|&b| PATH[usize::from(b)])
        && query.iter().all(|&b| QUERY[usize::from(b)])
        && (target.is_ascii() || std::str::from_utf8(target).is_ok());
    match ok {
        true => Ok(()),
        false => Err(bad(
            "400 Bad Request: a byte not allowed in a request target\n",
        )),
    }
}

/// The index of one request head in the read buffer.
#[derive(Debug, Default)]
pub struct RequestHead {
    pub method: Span,
    pub target: Span,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    /// Bytes of the head, from the buffer's start through its empty line.
    pub len: usize,
    /// The fields in their order; capacity [`MAX_FIELDS`], kept between requests.
    pub fields: Vec<Field>,
}

impl RequestHead {
    /// An index with room for [`MAX_FIELDS`] fields (4 KiB).
    pub fn new() -> Self {
        RequestHead {
            fields: Vec::with_capacity(MAX_FIELDS),
            ..RequestHead::default()
        }
    }

    /// Reads a head from the start of `buf`: `Ok(true)` when it is whole (indexed in
    /// `self`), `Ok(false)` when more bytes are needed. Refused: what `httparse` refuses
    /// (bare CR, whitespace before a field's colon, obs-fold, a control byte in a value,
    /// more than one space between the parts of the request line), an origin-form target
    /// with a fragment or a byte outside `PATH`/`QUERY`, more than [`MAX_FIELDS`]
    /// fields, and a line ended by LF alone (RFC 9112 §2.2 lets a server
    /// accept that; a front end that does not would frame the request differently).
    pub fn parse(&mut self, buf: &[u8]) -> Result<bool, Refusal> {
        let mut slots = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_FIELDS];
        let mut req = httparse::Request::new(&mut []);
        let len = match req.parse_with_uninit_headers(buf, &mut slots) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => {
                return match bare_lf(buf) {
                    true => Err(bad("400 Bad Request: a line ended by LF alone\n")),
                    false => Ok(false),
                }
            }
            Err(httparse::Error::TooManyHeaders) => {
                return Err(Refusal {
                    status: 431,
                    why: "431 Request Header Fields Too Large: too many fields\n",
                })
            }
            Err(httparse::Error::Version) => {
                return Err(bad("400 Bad Request: not HTTP/1.0 or HTTP/1.1\n"))
            }
            Err(_) => return Err(bad("400 Bad Request: a malformed request head\n")),
        };
        if bare_lf(&buf[..len]) {
            return Err(bad("400 Bad Request: a line ended by LF alone\n"));
        }
        let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
            return Err(bad("400 Bad Request: a malformed request head\n"));
        };
        if target.starts_with('/') {
            origin_form(target.as_bytes())?;
        }
        self.method = Span::within(buf, method.as_bytes());
        self.target = Span::within(buf, target.as_bytes());
        self.minor = minor;
        self.len = len;
        self.fields.clear();
        for h in req.headers.iter() {
            self.fields.push(Field {
                name: Span::within(buf, h.name.as_bytes()),
                value: Span::within(buf, h.value),
            });
        }
        Ok(true)
    }

    /// The fields as `(name, value)` byte slices of `buf`.
    pub fn fields<'b>(
        &'b self,
        buf: &'b [u8],
    ) -> impl DoubleEndedIterator<Item = (&'b [u8], &'b [u8])> {
        fields_in(&self.fields, buf)
    }

    /// The values of the fields called `name` (in any case), in order.
    pub fn values<'b, 'n>(
        &'b self,
        buf: &'b [u8],
        name: &'n str,
    ) -> impl DoubleEndedIterator<Item = &'b [u8]> + use<'b, 'n> {
        values_in(&self.fields, buf, name)
    }
}

/// An index of fields as `(name, value)` byte slices of `buf` (a request's head or a
/// response's: both are indexed alike).
pub fn fields_in<'b>(
    fields: &'b [Field],
    buf: &'b [u8],
) -> impl DoubleEndedIterator<Item = (&'b [u8], &'b [u8])> {
    fields.iter().map(|f| (f.name.of(buf), f.value.of(buf)))
}

/// The values of the fields called `name` (in any case) in an index of `buf`, in order.
pub fn values_in<'b, 'n>(
    fields: &'b [Field],
    buf: &'b [u8],
    name: &'n str,
) -> impl DoubleEndedIterator<Item = &'b [u8]> + use<'b, 'n> {
    fields_in(fields, buf)
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v)
}

/// Does `head` hold an LF not preceded by CR? (Leading empty lines, which RFC 9112 §2.2
/// says to ignore, are CRLF only, too.)
pub(crate) fn bare_lf(head: &[u8]) -> bool {
    head.iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || head[i - 1] != b'\r'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &[u8]) -> Result<bool, Refusal> {
        RequestHead::new().parse(text)
    }

    #[test]
    fn a_head_is_indexed_in_place() {
        let buf = b"GET /a;jsessionid=x?q=1 HTTP/1.1\r\nHost: shop\r\nCookie:  a=b \r\nX-Empty:\r\n\r\nbody";
        let mut head = RequestHead::new();
        assert_eq!(head.parse(buf), Ok(true));
        assert_eq!(head.method.of(buf), b"GET");
        assert_eq!(head.target.of(buf), b"/a;jsessionid=x?q=1");
        assert_eq!(head.minor, 1);
        assert_eq!(&buf[head.len..], b"body");
        let fields: Vec<_> = head.fields(buf).collect();
        assert_eq!(
            fields,
            [
                (&b"Host"[..], &b"shop"[..]),
                (b"Cookie", b"a=b"),
                (b"X-Empty", b"")
            ]
        );
        assert_eq!(head.values(buf, "cookie").collect::<Vec<_>>(), [b"a=b"]);
    }

    #[test]
    fn a_partial_head_asks_for_more() {
        let whole = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        for cut in 0..whole.len() {
            assert_eq!(parse(&whole[..cut]), Ok(false), "cut at {cut}");
        }
        assert_eq!(parse(whole), Ok(true));
    }

    #[test]
    fn leading_empty_lines_are_ignored() {
        let buf = b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut head = RequestHead::new();
        assert_eq!(head.parse(buf), Ok(true));
        assert_eq!(head.method.of(buf), b"GET");
    }

    /// RFC 9112 §2.2, §5.1, §5.2: what the engine refuses in a head.
    #[test]
    fn malformed_heads_are_refused() {
        for (case, buf) in [
            (
                "bare LF ending a field",
                &b"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n"[..],
            ),
            (
                "bare LF ending the head",
                b"GET / HTTP/1.1\r\nHost: a\r\n\n",
            ),
            (
                "bare LF ending the request line",
                b"GET / HTTP/1.1\nHost: a\r\n\r\n",
            ),
            ("bare LF, head incomplete", b"GET / HTTP/1.1\nHost: a"),
            (
                "bare CR in a value",
                b"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n",
            ),
            (
                "whitespace before the colon",
                b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            ),
            (
                "obs-fold",
                b"GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n z\r\n\r\n",
            ),
            ("NUL in a value", b"GET / HTTP/1.1\r\nHost: a\0\r\n\r\n"),
            ("no colon", b"GET / HTTP/1.1\r\nHost\r\n\r\n"),
            (
                "two spaces in the request line",
                b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
            ),
            (
                "HTTP/2 in an HTTP/1 head",
                b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
            ),
            ("space in a field name", b"GET / HTTP/1.1\r\nX Y: a\r\n\r\n"),
            // Found by tests/http1_differential.rs: Pingora served it as `/`.
            (
                "a fragment in the target",
                b"GET /#?q=1 HTTP/1.1\r\nHost: a\r\n\r\n",
            ),
            ("`<` in the target", b"GET /a<b HTTP/1.1\r\nHost: a\r\n\r\n"),
            (
                "a byte over 0x7e in the target",
                b"GET /\xe9 HTTP/1.1\r\nHost: a\r\n\r\n",
            ),
        ] {
            let refused = parse(buf);
            assert!(
                matches!(refused, Err(Refusal { status: 400, .. })),
                "{case}: {refused:?}"
            );
        }
    }

    #[test]
    fn too_many_fields_are_refused() {
        let mut buf = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_FIELDS {
            buf.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        buf.extend_from_slice(b"\r\n");
        assert_eq!(parse(&buf).map_err(|r| r.status), Err(431));
    }
}
