//! A blocking client of the admin API for tether's own commands: the address and token of
//! a config file, one request per connection, a JSON answer.

use crate::config::Config;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct AdminClient {
    address: SocketAddr,
    token: Option<String>,
    timeout: Duration,
}

impl AdminClient {
    /// The admin API of `config`, with its `token_file`'s token or else the most able of
    /// its `tokens`; an error when it has none.
    pub fn of(config: &Config) -> Result<AdminClient, String> {
        let admin = config
            .admin
            .as_ref()
            .ok_or("the config has no admin API (`admin: { address: ... }`)")?;
        Ok(AdminClient {
            address: admin.address,
            token: admin.token.clone().or_else(|| {
                let best = admin.role_tokens.iter().max_by_key(|(_, role)| *role);
                best.map(|(t, _)| t.clone())
            }),
            timeout: Duration::from_secs(10),
        })
    }

    /// Sends `method path`; the status and the JSON body.
    pub fn call(&self, method: &str, path: &str) -> Result<(u16, serde_json::Value), String> {
        let fail = |e: std::io::Error| format!("admin API at {}: {e}", self.address);
        let mut stream = TcpStream::connect_timeout(&self.address, self.timeout).map_err(fail)?;
        stream.set_read_timeout(Some(self.timeout)).map_err(fail)?;
        stream.set_write_timeout(Some(self.timeout)).map_err(fail)?;
        let auth = self
            .token
            .as_ref()
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n",
            self.address
        );
        stream.write_all(head.as_bytes()).map_err(fail)?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).map_err(fail)?;
        let text = String::from_utf8_lossy(&answer);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("admin API at {}: no complete answer", self.address))?;
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("admin API at {}: no status line", self.address))?;
        let json = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
        Ok((status, json))
    }
}
