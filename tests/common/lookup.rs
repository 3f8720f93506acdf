//! A real HTTP look-up service for the routing plugin tests: `GET /route/{user}` answers
//! `X-Route: <target>` (or 404), with a settable delay, and counts its calls.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone, Default)]
pub struct Lookup {
    pub addr: Option<SocketAddr>,
    routes: Arc<Mutex<HashMap<String, String>>>,
    delay: Arc<Mutex<Duration>>,
    calls: Arc<AtomicU64>,
    /// Answer with a JSON body `{"target": ...}` instead of the `X-Route` header.
    json: Arc<std::sync::atomic::AtomicBool>,
}

impl Lookup {
    pub async fn start(routes: &[(&str, &str)]) -> Lookup {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut l = Lookup {
            addr: Some(listener.local_addr().unwrap()),
            ..Lookup::default()
        };
        for (k, v) in routes {
            l.set(k, v);
        }
        let me = l.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(me.clone().serve(sock));
            }
        });
        l.addr = l.addr.take();
        l
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr.unwrap()
    }

    pub fn set(&self, user: &str, target: &str) {
        self.routes
            .lock()
            .unwrap()
            .insert(user.into(), target.into());
    }

    pub fn set_delay(&self, d: Duration) {
        *self.delay.lock().unwrap() = d;
    }

    pub fn answer_json(&self) {
        self.json.store(true, Ordering::SeqCst);
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    async fn serve(self, mut sock: tokio::net::TcpStream) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                match sock.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            self.calls.fetch_add(1, Ordering::SeqCst);
            let delay = *self.delay.lock().unwrap();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let path = head.split(' ').nth(1).unwrap_or("");
            let user = path.strip_prefix("/route/").unwrap_or("");
            let target = self.routes.lock().unwrap().get(user).cloned();
            let json = self.json.load(Ordering::SeqCst);
            let resp = match target {
                Some(t) if json => {
                    let body = serde_json::json!({ "target": t, "user": user }).to_string();
                    format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
                }
                Some(t) => format!("HTTP/1.1 200 OK\r\nX-Route: {t}\r\nContent-Length: 0\r\n\r\n"),
                None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string(),
            };
            if sock.write_all(resp.as_bytes()).await.is_err() {
                return;
            }
        }
    }
}
