//! Servers with a fixed answer (or none), and one server's entry in tether's `/status`.

use super::Tether;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `listener`: every request read (a read, however much it holds) gets `answer`;
/// `None` answers nothing and holds the connection (a server that never answers).
pub fn fixed(listener: TcpListener, answer: Option<Vec<u8>>) {
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    if let Some(a) = &answer {
                        if s.write_all(a).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
}

/// Server `name` of the first cluster as `GET /status` shows it.
pub async fn status_of(t: &Tether, name: &str) -> serde_json::Value {
    status_with(t, None, name).await
}

/// [`status_of`], asked with `token`.
pub async fn status_with(t: &Tether, token: Option<&str>, name: &str) -> serde_json::Value {
    let (status, json) = t.admin("GET", "/status", token, b"").await;
    assert_eq!(status, 200, "{json}");
    json["clusters"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no server {name} in {json}"))
        .clone()
}
