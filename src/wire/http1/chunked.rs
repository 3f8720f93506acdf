//! The chunked transfer coding (RFC 9112 §7.1), read incrementally and strictly: a
//! chunk-size of at most 16 hex digits, extensions of printable bytes within a
//! bounded line, CRLF line ends only (a bare CR or LF is refused), and a bounded trailer
//! section. The data is handed out as ranges of the caller's buffer, never copied.

use super::head::{bad, Refusal};

/// Longest chunk-size line, extensions included (Node.js and h11 bound it likewise; an
/// unbounded one lets a client make the proxy read forever without a byte of data).
pub const MAX_LINE: usize = 4096;

/// Longest trailer section.
pub const MAX_TRAILERS: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// In the chunk-size digits (`digits` read so far).
    Size {
        digits: u8,
    },
    /// After the digits: whitespace (BWS) before `;` or CR.
    AfterSize,
    /// In the extensions, up to CR.
    Extension,
    /// The CR of a size line was read; LF must follow.
    SizeLf,
    /// In a chunk's data.
    Data,
    /// After the data: CR, then LF.
    DataCr,
    DataLf,
    /// In the trailer section: at the start of a line (`Line`), inside one, or after CR.
    TrailerLineStart,
    TrailerLine,
    TrailerLf {
        empty: bool,
    },
    Done,
}

/// What the decoder found in the input it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Chunk data: `input[start..end]`.
    Data { start: usize, end: usize },
    /// The input is used up; more is needed.
    More,
    /// The body's end (last chunk and trailer section) was read.
    End,
}

/// A chunked body being read.
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
    /// The current chunk's size, then what is left of its data.
    size: u64,
    /// Bytes of the current size line, or of the trailer section.
    line: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            state: State::Size { digits: 0 },
            size: 0,
            line: 0,
        }
    }
}

/// Most digits of a chunk size.
const MAX_DIGITS: u8 = 16;

const TOO_MANY_DIGITS: Refusal = bad("400 Bad Request: a chunk size of more than 16 digits\n");
const TOO_LONG: Refusal = bad("400 Bad Request: a chunk-size line too long\n");
const MALFORMED: Refusal = bad("400 Bad Request: a malformed chunked body\n");

impl Decoder {
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Reads from `input`: `(consumed, event)`. `consumed` bytes of `input` are used
    /// (through a data range's end, or all of it for `More`); call again with the rest.
    pub fn next(&mut self, input: &[u8]) -> Result<(usize, Event), Refusal> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Size { digits } => match hex(b) {
                    // At most 16 digits, leading zeros included (what fits in 64 bits, and
                    // httparse's bound, so pingora-proxy's path refuses the same sizes; a
                    // long run of zeros is how sizes are made to read differently).
                    Some(_) if digits >= MAX_DIGITS => return Err(TOO_MANY_DIGITS),
                    Some(d) => {
                        // 16 hex digits fit in 64 bits.
                        self.size = self.size << 4 | u64::from(d);
                        self.state = State::Size {
                            digits: digits.saturating_add(1),
                        };
                        self.count_line(1)?;
                    }
                    None if digits == 0 => return Err(MALFORMED),
                    None => {
                        self.state = State::AfterSize;
                        continue;
                    }
                },
                State::AfterSize => match b {
                    b'\r' => self.state = State::SizeLf,
                    b' ' | b'\t' => self.count_line(1)?,
                    b';' => {
                        self.state = State::Extension;
                        self.count_line(1)?;
                    }
                    _ => return Err(MALFORMED),
                },
                State::Extension => match b {
                    b'\r' => self.state = State::SizeLf,
                    // Printable ASCII, HTAB and obs-text, as a quoted-string allows; the
                    // extensions themselves are dropped, never relayed.
                    b'\t' | b' '..=b'~' | 0x80..=0xff => self.count_line(1)?,
                    _ => return Err(MALFORMED),
                },
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(MALFORMED);
                    }
                    self.line = 0;
                    self.state = if self.size == 0 {
                        State::TrailerLineStart
                    } else {
                        State::Data
                    };
                }
                State::Data => {
                    let take =
                        (input.len() - i).min(usize::try_from(self.size).unwrap_or(usize::MAX));
                    self.size -= take as u64;
                    if self.size == 0 {
                        self.state = State::DataCr;
                    }
                    return Ok((
                        i + take,
                        Event::Data {
                            start: i,
                            end: i + take,
                        },
                    ));
                }
                State::DataCr => match b {
                    b'\r' => self.state = State::DataLf,
                    _ => return Err(MALFORMED),
                },
                State::DataLf => match b {
                    b'\n' => self.state = State::Size { digits: 0 },
                    _ => return Err(MALFORMED),
                },
                State::TrailerLineStart | State::TrailerLine => {
                    let start = self.state == State::TrailerLineStart;
                    match b {
                        b'\r' => self.state = State::TrailerLf { empty: start },
                        b'\n' => return Err(MALFORMED),
                        0..=8 | 0x0a..=0x1f | 0x7f => return Err(MALFORMED),
                        _ => self.state = State::TrailerLine,
                    }
                    self.count_trailer()?;
                }
                State::TrailerLf { empty } => {
                    if b != b'\n' {
                        return Err(MALFORMED);
                    }
                    self.count_trailer()?;
                    if empty {
                        self.state = State::Done;
                        return Ok((i + 1, Event::End));
                    }
                    self.state = State::TrailerLineStart;
                }
                State::Done => return Ok((i, Event::End)),
            }
            i += 1;
        }
        if self.state == State::Done {
            return Ok((i, Event::End));
        }
        Ok((i, Event::More))
    }

    fn count_trailer(&mut self) -> Result<(), Refusal> {
        self.line += 1;
        if self.line > MAX_TRAILERS {
            return Err(bad("400 Bad Request: a trailer section too large\n"));
        }
        Ok(())
    }

    fn count_line(&mut self, n: usize) -> Result<(), Refusal> {
        self.line += n;
        if self.line > MAX_LINE {
            return Err(TOO_LONG);
        }
        Ok(())
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Appends `data` as one chunk of a chunked body (nothing for no data: an empty chunk
/// would end the body).
pub fn chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut n = data.len();
    while n > 0 {
        at -= 1;
        digits[at] = b"0123456789abcdef"[n & 15];
        n >>= 4;
    }
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The last chunk of a chunked body, without trailers.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `body` fed in pieces of `step` bytes: the data, or the refusal.
    fn decode(body: &[u8], step: usize) -> Result<(Vec<u8>, usize), &'static str> {
        let mut d = Decoder::default();
        let mut data = Vec::new();
        let mut fed = 0;
        let mut pending: Vec<u8> = Vec::new();
        while fed < body.len() || !pending.is_empty() {
            let end = (fed + step).min(body.len());
            pending.extend_from_slice(&body[fed..end]);
            fed = end;
            loop {
                let (used, event) = d.next(&pending).map_err(|r| r.why)?;
                match event {
                    Event::Data { start, end } => data.extend_from_slice(&pending[start..end]),
                    Event::End => return Ok((data, fed - pending.len() + used)),
                    Event::More => {}
                }
                pending.drain(..used);
                if event == Event::More || pending.is_empty() {
                    break;
                }
            }
            if fed == body.len() && !pending.is_empty() && !d.is_done() {
                // Data left that the decoder did not take: cannot happen.
                unreachable!("the decoder leaves no input unread");
            }
        }
        Err("incomplete")
    }

    #[test]
    fn chunks_split_at_every_byte_decode_alike() {
        let body = b"5\r\nhello\r\n1A;name=\"quoted; value\"\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        let whole = decode(body, body.len()).unwrap();
        assert_eq!(whole.0, b"helloabcdefghijklmnopqrstuvwxyz");
        assert_eq!(
            &body[whole.1..],
            b"NEXT",
            "the body ends where its framing does"
        );
        for step in 1..body.len() {
            assert_eq!(
                decode(body, step).unwrap(),
                whole,
                "fed {step} bytes at a time"
            );
        }
    }

    /// RFC 9112 §7.1 and the limits above, one row each.
    #[test]
    fn chunked_table() {
        let malformed = "400 Bad Request: a malformed chunked body\n";
        let digits = "400 Bad Request: a chunk size of more than 16 digits\n";
        let long = "400 Bad Request: a chunk-size line too long\n";
        let long_ext = format!("1;{}\r\na\r\n0\r\n\r\n", "x".repeat(MAX_LINE));
        let zeros = format!("{}1\r\na\r\n0\r\n\r\n", "0".repeat(100));
        for (body, expected) in [
            (&b"0\r\n\r\n"[..], Ok(&b""[..])),
            (b"3\r\nabc\r\n0\r\n\r\n", Ok(b"abc")),
            (b"3 ; ext\r\nabc\r\n0\r\n\r\n", Ok(b"abc")),
            (b"3\t;x=1\r\nabc\r\n0;last\r\n\r\n", Ok(b"abc")),
            (zeros.as_bytes(), Err(digits)),
            (b"\r\n3\r\nabc\r\n0\r\n\r\n", Err(malformed)),
            (b"x\r\n", Err(malformed)),
            (b"-1\r\n", Err(malformed)),
            (b"0x3\r\nabc\r\n0\r\n\r\n", Err(malformed)),
            (b"3 x\r\nabc\r\n0\r\n\r\n", Err(malformed)),
            (b"3\nabc\r\n0\r\n\r\n", Err(malformed)),
            (b"3\r\nabc\n0\r\n\r\n", Err(malformed)),
            (b"3\r\nabcd\r\n0\r\n\r\n", Err(malformed)),
            (b"3\r\nab\r\n0\r\n\r\n", Err(malformed)),
            (b"3;a\nb\r\nabc\r\n0\r\n\r\n", Err(malformed)),
            (b"3;a\rb\r\nabc\r\n0\r\n\r\n", Err(malformed)),
            (b"3;a\0\r\nabc\r\n0\r\n\r\n", Err(malformed)),
            (b"0\r\nX: 1\n\r\n", Err(malformed)),
            (b"0\r\nX: 1\r\n\n", Err(malformed)),
            (b"0\r\n\n", Err(malformed)),
            (b"10000000000000000\r\n", Err(digits)),
            (long_ext.as_bytes(), Err(long)),
        ] {
            let got = decode(body, body.len()).map(|(d, _)| d);
            assert_eq!(
                got.as_deref().map_err(|e| *e),
                expected,
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
        let mut trailers = b"0\r\n".to_vec();
        while trailers.len() <= MAX_TRAILERS + 3 {
            trailers.extend_from_slice(b"X-T: 0123456789\r\n");
        }
        trailers.extend_from_slice(b"\r\n");
        assert_eq!(
            decode(&trailers, trailers.len()),
            Err("400 Bad Request: a trailer section too large\n")
        );
        assert_eq!(decode(b"3\r\nabc\r\n", 100), Err("incomplete"));
    }

    /// Found by `bench/fuzz` (http1_differential): 18 zeros were read as the last chunk by
    /// the engine and refused by pingora-proxy's path.
    #[test]
    fn a_chunk_size_has_at_most_16_digits_leading_zeros_included() {
        let mut d = Decoder::default();
        assert_eq!(d.next(b"0000000000000005\r\n"), Ok((18, Event::More)));
        assert_eq!(d.size, 5);
        let mut d = Decoder::default();
        assert_eq!(d.next(b"00000000000000005\r\n"), Err(TOO_MANY_DIGITS));
        let mut d = Decoder::default();
        assert_eq!(
            d.next(b"000000000000000000;x\r\n\r\n"),
            Err(TOO_MANY_DIGITS)
        );
    }

    #[test]
    fn the_largest_chunk_size_is_read_exactly() {
        let mut d = Decoder::default();
        assert_eq!(d.next(b"ffffffffffffffff\r\n"), Ok((18, Event::More)));
        assert_eq!(d.size, u64::MAX);
    }

    #[test]
    fn chunks_written_decode_to_their_data() {
        let mut out = Vec::new();
        for part in [&b"hello"[..], b"", &[b'x'; 300][..]] {
            chunk(&mut out, part);
        }
        out.extend_from_slice(LAST_CHUNK);
        assert!(
            out.starts_with(b"5\r\nhello\r\n12c\r\n"),
            "no empty chunk before the end"
        );
        let mut d = Decoder::default();
        let (mut pos, mut data) = (0, Vec::new());
        loop {
            let (used, event) = d.next(&out[pos..]).unwrap();
            if let Event::Data { start, end } = event {
                data.extend_from_slice(&out[pos + start..pos + end]);
            }
            pos += used;
            if event == Event::End {
                break;
            }
        }
        assert_eq!(pos, out.len());
        assert_eq!(data.len(), 305);
    }
}
