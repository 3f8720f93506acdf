//! What a server answers over AJP, one packet's payload at a time (`packet::frame` finds
//! it): the answer's head (`SEND_HEADERS`: status, reason, fields with the common names
//! coded), a part of its body (`SEND_BODY_CHUNK`; an empty one is a flush), its end
//! (`END_RESPONSE`, with whether the connection may carry another request), a request
//! for more of the request's body (`GET_BODY_CHUNK`), and the answer to a CPing (`CPONG`).
//! A payload is taken whole or refused: nothing is left unread, no length reaches past it.

use super::packet::{Malformed, Reader};

const SEND_BODY_CHUNK: u8 = 3;
const SEND_HEADERS: u8 = 4;
const END_RESPONSE: u8 = 5;
const GET_BODY_CHUNK: u8 = 6;
const CPONG: u8 = 9;

/// The whole packet a server answers a CPing with.
pub const CPONG_PACKET: [u8; 5] = [b'A', b'B', 0, 1, CPONG];

/// Response field names by code (code = 0xA000 + place + 1).
const FIELDS: [&str; 11] = [
    "Content-Type",
    "Content-Language",
    "Content-Length",
    "Date",
    "Last-Modified",
    "Location",
    "Set-Cookie",
    "Set-Cookie2",
    "Servlet-Engine",
    "Status",
    "WWW-Authenticate",
];

/// One message from the server.
#[derive(Debug)]
pub enum Message<'a> {
    Headers {
        status: u16,
        reason: &'a [u8],
        fields: ResponseHeaders<'a>,
    },
    /// Body bytes (none: a flush).
    Body(&'a [u8]),
    End {
        reuse: bool,
    },
    /// The server asks for up to this many more bytes of the request's body.
    GetBody(u16),
    Pong,
}

/// The fields of a `SEND_HEADERS` message, checked when it was parsed.
#[derive(Debug, Clone)]
pub struct ResponseHeaders<'a> {
    reader: Reader<'a>,
    left: u16,
}

impl<'a> Iterator for ResponseHeaders<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Checked by `parse`: each field reads whole.
        field(&mut self.reader).ok()
    }
}

/// One field: a coded name or a string, then the value.
fn field<'a>(r: &mut Reader<'a>) -> Result<(&'a [u8], &'a [u8]), Malformed> {
    let n = r.int()?;
    let name = if n >= 0xA000 {
        let i = usize::from(n - 0xA000);
        let name = (1..=FIELDS.len())
            .contains(&i)
            .then(|| FIELDS[i - 1].as_bytes());
        name.ok_or(Malformed("a field name code that does not exist"))?
    } else {
        let name = r.bytes(usize::from(n))?;
        if r.byte()? != 0 {
            return Err(Malformed("a string without its NUL"));
        }
        name
    };
    if name.is_empty() {
        return Err(Malformed("an empty field name"));
    }
    let value = r.string()?.ok_or(Malformed("a field without a value"))?;
    Ok((name, value))
}

/// The message in a packet's payload.
pub fn parse(payload: &[u8]) -> Result<Message<'_>, Malformed> {
    let mut r = Reader::new(payload);
    let message = match r.byte()? {
        SEND_HEADERS => {
            let status = r.int()?;
            if !(100..=999).contains(&status) {
                return Err(Malformed("a status outside 100-999"));
            }
            let reason = r.string()?.unwrap_or_default();
            let count = r.int()?;
            let fields = ResponseHeaders {
                reader: r.clone(),
                left: count,
            };
            for _ in 0..count {
                field(&mut r)?;
            }
            Message::Headers {
                status,
                reason,
                fields,
            }
        }
        SEND_BODY_CHUNK => {
            let len = r.int()?;
            let data = r.bytes(usize::from(len))?;
            // Tomcat ends a chunk with a NUL the length does not count.
            if r.left() == 1 && r.byte()? != 0 {
                return Err(Malformed("a body chunk with a byte after it"));
            }
            Message::Body(data)
        }
        END_RESPONSE => Message::End {
            reuse: match r.byte()? {
                0 => false,
                1 => true,
                _ => return Err(Malformed("an END_RESPONSE reuse flag other than 0 or 1")),
            },
        },
        GET_BODY_CHUNK => Message::GetBody(r.int()?),
        CPONG => Message::Pong,
        _ => return Err(Malformed("an unknown message type")),
    };
    if r.left() != 0 {
        return Err(Malformed("bytes after the message's end"));
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(fields: &[u8], count: u16) -> Vec<u8> {
        let mut p = vec![SEND_HEADERS, 0, 200, 0, 2, b'O', b'K', 0];
        p.extend_from_slice(&count.to_be_bytes());
        p.extend_from_slice(fields);
        p
    }

    #[test]
    fn a_head_gives_its_status_and_fields_coded_or_named() {
        let mut fields = vec![0xA0, 0x01, 0, 9];
        fields.extend_from_slice(b"text/html\0");
        fields.extend_from_slice(&[0, 5]);
        fields.extend_from_slice(b"X-One\0");
        fields.extend_from_slice(&[0, 1, b'1', 0]);
        let p = headers(&fields, 2);
        let Ok(Message::Headers {
            status,
            reason,
            fields,
        }) = parse(&p)
        else {
            panic!("a head");
        };
        assert_eq!((status, reason), (200, &b"OK"[..]));
        let got: Vec<_> = fields.collect();
        assert_eq!(
            got,
            [(&b"Content-Type"[..], &b"text/html"[..]), (b"X-One", b"1")]
        );
    }

    #[test]
    fn a_head_whose_count_lies_is_refused() {
        let mut fields = vec![0xA0, 0x01, 0, 1, b'x', 0];
        assert!(parse(&headers(&fields, 2)).is_err(), "one field, count 2");
        assert!(parse(&headers(&fields, 0)).is_err(), "one field, count 0");
        fields[1] = 0x0C;
        assert!(parse(&headers(&fields, 1)).is_err(), "no name code 0xA00C");
    }

    #[test]
    fn body_end_get_body_and_pong() {
        assert!(matches!(
            parse(&[3, 0, 2, b'h', b'i', 0]),
            Ok(Message::Body(b"hi"))
        ));
        assert!(matches!(
            parse(&[3, 0, 2, b'h', b'i']),
            Ok(Message::Body(b"hi"))
        ));
        assert!(matches!(parse(&[3, 0, 0, 0]), Ok(Message::Body(b""))));
        assert!(
            parse(&[3, 0, 3, b'h', b'i']).is_err(),
            "a length past the end"
        );
        assert!(matches!(parse(&[5, 1]), Ok(Message::End { reuse: true })));
        assert!(matches!(parse(&[5, 0]), Ok(Message::End { reuse: false })));
        assert!(parse(&[5, 2]).is_err());
        assert!(matches!(
            parse(&[6, 0x1F, 0xFA]),
            Ok(Message::GetBody(8186))
        ));
        assert!(matches!(parse(&[9]), Ok(Message::Pong)));
        assert!(parse(&[9, 0]).is_err(), "bytes after the end");
        assert!(parse(&[42]).is_err());
        assert!(parse(&[]).is_err());
    }
}
