//! A blocking client of the admin API for tether's own commands: the address and token of
//! a config file, one request per connection, a JSON answer. Over HTTPS when the admin API
//! has `tls:`, trusting exactly the certificate the config names (the command runs beside
//! tether, with its config), not a CA.

use crate::config::{Config, ServiceTls};
use boring::ssl::{SslConnector, SslMethod, SslVerifyMode};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct AdminClient {
    address: SocketAddr,
    token: Option<String>,
    timeout: Duration,
    tls: Option<ServiceTls>,
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
            tls: admin.tls.clone(),
        })
    }

    /// Writes `head` over `stream` and reads the answer until the server closes.
    fn exchange(&self, mut stream: impl Read + Write, head: &str) -> Result<Vec<u8>, String> {
        let fail = |e: std::io::Error| format!("admin API at {}: {e}", self.address);
        stream.write_all(head.as_bytes()).map_err(fail)?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).map_err(fail)?;
        Ok(answer)
    }

    /// The TLS session over `stream`, checked to show `tls.cert`'s own certificate.
    fn handshake(
        &self,
        tls: &ServiceTls,
        stream: TcpStream,
    ) -> Result<boring::ssl::SslStream<TcpStream>, String> {
        let fail = |e: String| format!("admin API at {} (https): {e}", self.address);
        let ours = crate::config::pem::load_certs(&tls.cert, "certificate")
            .map_err(fail)?
            .remove(0)
            .to_der()
            .map_err(|e| fail(e.to_string()))?;
        let mut b = SslConnector::builder(SslMethod::tls()).map_err(|e| fail(e.to_string()))?;
        // Pinned below: the certificate must be the configured one, whoever issued it.
        b.set_verify(SslVerifyMode::NONE);
        let mut config = b.build().configure().map_err(|e| fail(e.to_string()))?;
        config.set_verify_hostname(false);
        config.set_use_server_name_indication(false);
        let stream = config
            .connect("admin", stream)
            .map_err(|e| fail(format!("TLS handshake: {e}")))?;
        let theirs = stream
            .ssl()
            .peer_certificate()
            .and_then(|c| c.to_der().ok());
        if theirs.as_deref() != Some(ours.as_slice()) {
            return Err(fail(format!(
                "the server's certificate is not `{}` (admin.tls.cert)",
                tls.cert.display()
            )));
        }
        Ok(stream)
    }

    /// Sends `method path`; the status and the JSON body.
    pub fn call(&self, method: &str, path: &str) -> Result<(u16, serde_json::Value), String> {
        let fail = |e: std::io::Error| format!("admin API at {}: {e}", self.address);
        let stream = TcpStream::connect_timeout(&self.address, self.timeout).map_err(fail)?;
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
        let answer = match &self.tls {
            Some(tls) => self.exchange(self.handshake(tls, stream)?, &head)?,
            None => self.exchange(stream, &head)?,
        };
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
