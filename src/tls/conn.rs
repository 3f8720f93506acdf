//! What a TLS connection's handshake established, kept for every request on it (HTTP/1.1
//! and each HTTP/2 stream): SNI, client certificate, session id, cipher strength. Pingora's
//! own digest has the version and cipher name; this adds what the servers are told.

use async_trait::async_trait;
use boring::ssl::{NameType, SslRef};
use pingora_core::listeners::TlsAccept;
use std::any::Any;
use std::sync::Arc;

#[derive(Debug, Default, Clone)]
pub struct ConnTls {
    pub sni: Option<String>,
    /// The client certificate (DER), when one was presented and verified.
    pub client_cert_der: Option<Vec<u8>>,
    /// The TLS session id, hex.
    pub session_id: Option<String>,
    /// Secret bits of the cipher (Tomcat's `ssl_cipher_usekeysize`).
    pub cipher_bits: Option<i32>,
}

impl ConnTls {
    fn of(ssl: &SslRef) -> ConnTls {
        ConnTls {
            sni: ssl.servername(NameType::HOST_NAME).map(str::to_owned),
            client_cert_der: ssl.peer_certificate().and_then(|c| c.to_der().ok()),
            session_id: ssl
                .session()
                .map(|s| s.id().iter().map(|b| format!("{b:02x}")).collect())
                .filter(|s: &String| !s.is_empty()),
            cipher_bits: ssl.current_cipher().map(|c| c.bits().secret),
        }
    }
}

/// Records a [`ConnTls`] in the connection's TLS digest when the handshake completes.
pub struct Record;

#[async_trait]
impl TlsAccept for Record {
    async fn handshake_complete_callback(
        &self,
        ssl: &SslRef,
    ) -> Option<Arc<dyn Any + Send + Sync>> {
        Some(Arc::new(ConnTls::of(ssl)))
    }
}
