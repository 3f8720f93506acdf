//! Wire-level helpers shared by the simulated server and the test client.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// Largest request or response head either side accepts.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// Largest decoded chunked body; keeps a bogus chunk size from allocating gigabytes.
pub(crate) const MAX_BODY: usize = 64 * 1024 * 1024;
/// Longest chunk-size or trailer line we accept.
const MAX_LINE: u64 = 8 * 1024;

/// Outcome of reading one message head.
pub(crate) enum Head {
    /// The head including its terminating blank line.
    Complete(Vec<u8>),
    /// The peer closed the connection before sending a single byte.
    Eof,
    /// The head grew past the limit without ending.
    TooLarge,
}

/// Reads up to and including the `\r\n\r\n` that ends a head, leaving any body bytes buffered.
pub(crate) async fn read_head<R: AsyncBufRead + Unpin>(r: &mut R, max: usize) -> io::Result<Head> {
    let mut head = Vec::new();
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return match head.is_empty() {
                true => Ok(Head::Eof),
                false => Err(io::ErrorKind::UnexpectedEof.into()),
            };
        }
        let (old_len, got) = (head.len(), buf.len());
        head.extend_from_slice(buf);
        // The terminator may straddle two reads, so look back three bytes.
        let from = old_len.saturating_sub(3);
        if let Some(pos) = find(&head[from..], b"\r\n\r\n") {
            let end = from + pos + 4;
            // Consume only the head; what follows belongs to the body or the next message.
            r.consume(end - old_len);
            head.truncate(end);
            return Ok(if end > max {
                Head::TooLarge
            } else {
                Head::Complete(head)
            });
        }
        r.consume(got);
        if head.len() > max {
            return Ok(Head::TooLarge);
        }
    }
}

/// Decodes a chunked body (extensions and trailers are read and ignored).
pub(crate) async fn read_chunked<R: AsyncBufRead + Unpin>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = read_line(r).await?;
        let size = line.split(|&b| b == b';').next().unwrap_or_default();
        let size = std::str::from_utf8(size)
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .ok_or_else(|| invalid("bad chunk size"))?;
        if size == 0 {
            while !read_line(r).await?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(invalid("chunked body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..]).await?;
        if !read_line(r).await?.is_empty() {
            return Err(invalid("chunk not followed by CRLF"));
        }
    }
}

/// Reads and discards a request body so the next request on the connection parses cleanly.
pub(crate) async fn discard_body<R: AsyncBufRead + Unpin>(
    r: &mut R,
    headers: &[(String, Vec<u8>)],
) -> io::Result<()> {
    if has_token(headers, "transfer-encoding", "chunked") {
        return read_chunked(r).await.map(drop);
    }
    let len = content_length(headers)?.unwrap_or(0);
    match tokio::io::copy(&mut r.take(len), &mut tokio::io::sink()).await? == len {
        true => Ok(()),
        false => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

/// Reads one line and returns it without its line ending.
async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.take(MAX_LINE).read_until(b'\n', &mut line).await?;
    if line.pop() != Some(b'\n') {
        return Err(invalid("line too long or truncated"));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(line)
}

/// Copies httparse headers into owned pairs with lower-cased names.
pub(crate) fn owned_headers(headers: &[httparse::Header<'_>]) -> Vec<(String, Vec<u8>)> {
    headers
        .iter()
        .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
        .collect()
}

/// Values of every header called `name` (which must be lower-case).
pub(crate) fn values<'a>(
    headers: &'a [(String, Vec<u8>)],
    name: &'a str,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    headers
        .iter()
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
}

/// True if any comma-separated token of any `name` header equals `token` (case-insensitive).
pub(crate) fn has_token(headers: &[(String, Vec<u8>)], name: &str, token: &str) -> bool {
    values(headers, name)
        .flat_map(|v| v.split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Whether the connection stays open after this message: HTTP/1.1 unless `Connection: close`,
/// HTTP/1.0 only with `Connection: keep-alive`.
pub(crate) fn keeps_alive(headers: &[(String, Vec<u8>)], http10: bool) -> bool {
    match http10 {
        false => !has_token(headers, "connection", "close"),
        true => has_token(headers, "connection", "keep-alive"),
    }
}

/// The Content-Length, `Ok(None)` if absent, or an error if malformed or contradictory.
pub(crate) fn content_length(headers: &[(String, Vec<u8>)]) -> io::Result<Option<u64>> {
    let mut found = None;
    for v in values(headers, "content-length") {
        let n = std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| invalid("bad Content-Length"))?;
        if found.is_some_and(|f| f != n) {
            return Err(invalid("conflicting Content-Length"));
        }
        found = Some(n);
    }
    Ok(found)
}

pub(crate) fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn head_stops_at_blank_line_and_leaves_body() {
        let mut input: &[u8] = b"GET / HTTP/1.1\r\nA: b\r\n\r\nBODY";
        let Head::Complete(head) = read_head(&mut input, MAX_HEAD).await.unwrap() else {
            panic!("expected a complete head");
        };
        assert_eq!(head, b"GET / HTTP/1.1\r\nA: b\r\n\r\n");
        assert_eq!(input, b"BODY");
    }

    #[tokio::test]
    async fn head_limits_and_eof() {
        let mut empty: &[u8] = b"";
        assert!(matches!(read_head(&mut empty, 10).await, Ok(Head::Eof)));
        let mut long: &[u8] = b"GET / HTTP/1.1\r\nX: yyyyyyyy\r\n\r\n";
        assert!(matches!(read_head(&mut long, 10).await, Ok(Head::TooLarge)));
        let mut cut: &[u8] = b"GET / HTTP/1.1\r\n";
        assert!(read_head(&mut cut, MAX_HEAD).await.is_err());
    }

    #[tokio::test]
    async fn chunked_with_extension_and_trailer() {
        let mut input: &[u8] = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        assert_eq!(read_chunked(&mut input).await.unwrap(), b"hello world");
        assert_eq!(input, b"NEXT");
        let mut bad: &[u8] = b"zz\r\n";
        assert!(read_chunked(&mut bad).await.is_err());
    }

    #[test]
    fn header_helpers() {
        let h = vec![
            ("connection".to_string(), b"keep-alive, Close".to_vec()),
            ("content-length".to_string(), b"3".to_vec()),
            ("content-length".to_string(), b" 3 ".to_vec()),
        ];
        assert!(has_token(&h, "connection", "close"));
        assert_eq!(content_length(&h).unwrap(), Some(3));
        let conflict = vec![h[1].clone(), ("content-length".into(), b"4".to_vec())];
        assert!(content_length(&conflict).is_err());
    }
}
