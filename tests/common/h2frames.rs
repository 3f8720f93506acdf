//! HTTP/2 frames written by hand, for clients that misbehave on purpose (floods, bombs,
//! stalls): the preface, frames of any type, header blocks in HPACK's literal and indexed
//! forms, and a reader of what the server sends back.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const CONTINUATION: u8 = 9;

pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// One frame.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The client preface and its SETTINGS (`settings`: id and value pairs).
pub fn preface(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let mut payload = Vec::new();
    for (id, value) in settings {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    out.extend(frame(SETTINGS, 0, 0, &payload));
    out
}

/// An HPACK integer with an `n`-bit prefix, the prefix's other bits `first`.
fn integer(out: &mut Vec<u8>, first: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128 + 128) as u8);
        value /= 128;
    }
    out.push(value as u8);
}

/// A literal field, not indexed, with a literal name.
pub fn literal(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(0);
    integer(out, 0, 7, name.len());
    out.extend_from_slice(name.as_bytes());
    integer(out, 0, 7, value.len());
    out.extend_from_slice(value);
}

/// A literal field added to the dynamic table, with a literal name.
pub fn indexed_literal(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(0x40);
    integer(out, 0, 7, name.len());
    out.extend_from_slice(name.as_bytes());
    integer(out, 0, 7, value.len());
    out.extend_from_slice(value);
}

/// A field from the tables, by index (62 is the newest dynamic entry).
pub fn indexed(out: &mut Vec<u8>, index: usize) {
    integer(out, 0x80, 7, index);
}

/// The header block of `GET <path>` on `http://shop`.
pub fn get(path: &str) -> Vec<u8> {
    let mut block = Vec::new();
    indexed(&mut block, 2); // :method GET
    indexed(&mut block, 6); // :scheme http
    literal(&mut block, ":path", path.as_bytes());
    literal(&mut block, ":authority", b"shop");
    block
}

/// Reads frames until one of `kind` comes (its flags, stream and payload), or the
/// connection ends or `wait` passes (`None`). Frames of other kinds are passed to `seen`.
pub async fn until(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    kind: u8,
    wait: std::time::Duration,
    mut seen: impl FnMut(u8, u32, &[u8]),
) -> Option<(u8, u32, Vec<u8>)> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        while buf.len() >= 9 {
            let len = (buf[0] as usize) << 16 | (buf[1] as usize) << 8 | buf[2] as usize;
            if buf.len() < 9 + len {
                break;
            }
            let (k, flags) = (buf[3], buf[4]);
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            let payload = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            if k == kind {
                return Some((flags, stream, payload));
            }
            seen(k, stream, &payload);
        }
        let mut chunk = [0u8; 16384];
        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return None,
        }
    }
}

/// Writes `bytes`; false when the server closed or stopped reading for `wait`.
pub async fn send(s: &mut TcpStream, bytes: &[u8], wait: std::time::Duration) -> bool {
    matches!(
        tokio::time::timeout(wait, s.write_all(bytes)).await,
        Ok(Ok(()))
    )
}
