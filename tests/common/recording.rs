//! A recording server for tests: each request's head and (de-chunked) body are kept, the
//! answer is `200` with `got <n> bytes`, or, to a WebSocket upgrade, `101` and an echo.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server received it: head (as sent) and body (de-chunked).
#[derive(Debug, Clone)]
pub struct Seen {
    pub head: String,
    pub body: Vec<u8>,
}

/// A server that records each request and answers `200` with `got <n> bytes`, or, to a
/// WebSocket upgrade, `101` and then echoes whatever comes.
pub async fn recording_server() -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve(s, log.clone()));
        }
    });
    (addr, seen)
}

async fn serve(mut s: TcpStream, seen: Arc<Mutex<Vec<Seen>>>) {
    let mut buf = Vec::new();
    loop {
        let Some((head, raw)) = read_request(&mut s, &mut buf).await else {
            return;
        };
        let lower = head.to_ascii_lowercase();
        let body = match lower.contains("transfer-encoding: chunked") {
            true => dechunk(&raw),
            false => raw,
        };
        let upgrade = lower.contains("upgrade: websocket");
        let n = body.len();
        seen.lock().unwrap().push(Seen { head, body });
        if upgrade {
            let answer = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
            if s.write_all(answer).await.is_err() {
                return;
            }
            let (mut r, mut w) = s.split();
            let _ = tokio::io::copy(&mut r, &mut w).await;
            return;
        }
        let text = format!("got {n} bytes");
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if s.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Reads one request from `s` (after what `buf` holds): its head as sent, and its body as
/// sent (a chunked one with its coding), framed by `Content-Length` or the last chunk.
pub async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let end = read_until(s, buf, b"\r\n\r\n").await?;
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    buf.drain(..end);
    let lower = head.to_ascii_lowercase();
    if lower.contains("transfer-encoding: chunked") {
        let end = read_until(s, buf, b"0\r\n\r\n").await?;
        return Some((head, buf.drain(..end).collect()));
    }
    let len = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .map_or(0, |v| v.trim().parse::<usize>().unwrap());
    while buf.len() < len {
        if !read_more(s, buf).await {
            return None;
        }
    }
    Some((head, buf.drain(..len).collect()))
}

/// Reads until `buf` holds `marker`; the length up to and including it.
pub async fn read_until(s: &mut TcpStream, buf: &mut Vec<u8>, marker: &[u8]) -> Option<usize> {
    loop {
        if let Some(i) = buf.windows(marker.len()).position(|w| w == marker) {
            return Some(i + marker.len());
        }
        if !read_more(s, buf).await {
            return None;
        }
    }
}

pub async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 16384];
    match s.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&data[..line]).unwrap(), 16).unwrap();
        data = &data[line + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Reads what the connection sends until it closes (true) or `quiet` passes without a
/// byte (false), as text.
pub async fn read_all(s: &mut TcpStream, quiet: std::time::Duration) -> (String, bool) {
    let mut buf = Vec::new();
    loop {
        match tokio::time::timeout(quiet, read_more(s, &mut buf)).await {
            Ok(true) => {}
            Ok(false) => return (String::from_utf8_lossy(&buf).to_string(), true),
            Err(_) => return (String::from_utf8_lossy(&buf).to_string(), false),
        }
    }
}
