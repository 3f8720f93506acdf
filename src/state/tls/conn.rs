//! What a TLS connection's handshake established, kept for every request on it (HTTP/1.1
//! and each HTTP/2 stream): SNI, client certificate, session id, cipher strength. Pingora's
//! own digest has the version and cipher name; this adds what the servers are told, and
//! what the plugins read (`TlsFacts`), made once per connection.

use async_trait::async_trait;
use boring::ssl::{NameType, SslRef};
use boring::x509::X509NameRef;
use pingora_core::listeners::TlsAccept;
use std::any::Any;
use std::sync::Arc;

#[derive(Debug, Default, Clone)]
pub struct ConnTls {
    /// SNI, version and client certificate subject, for the plugins.
    pub facts: Arc<tether_plugins::TlsFacts>,
    /// The client certificate (DER), when one was presented and verified.
    pub client_cert_der: Option<Vec<u8>>,
    /// The certificates the client sent after its own (DER), intermediates to its CA.
    pub client_chain_der: Vec<Vec<u8>>,
    /// The TLS session id, hex.
    pub session_id: Option<String>,
    /// Secret bits of the cipher (Tomcat's `ssl_cipher_usekeysize`).
    pub cipher_bits: Option<i32>,
}

impl ConnTls {
    fn of(ssl: &SslRef) -> ConnTls {
        let client_cert_der = ssl.peer_certificate().and_then(|c| c.to_der().ok());
        // A server's view of the chain may or may not hold the leaf: it is left out here.
        let client_chain_der = match (&client_cert_der, ssl.peer_cert_chain()) {
            (Some(leaf), Some(chain)) => chain
                .iter()
                .filter_map(|c| c.to_der().ok())
                .filter(|der| der != leaf)
                .collect(),
            _ => Vec::new(),
        };
        ConnTls {
            facts: Arc::new(tether_plugins::TlsFacts {
                sni: ssl.servername(NameType::HOST_NAME).map(Into::into),
                version: ssl.version_str().into(),
                client_subject: ssl
                    .peer_certificate()
                    .map(|c| distinguished_name(c.subject_name()).into()),
            }),
            client_cert_der,
            client_chain_der,
            session_id: ssl
                .session()
                .map(|s| s.id().iter().map(|b| format!("{b:02x}")).collect())
                .filter(|s: &String| !s.is_empty()),
            cipher_bits: ssl.current_cipher().map(|c| c.bits().secret),
        }
    }
}

/// A name as RFC 4514 writes it: the most specific part first (`CN=alice,O=Example`),
/// short attribute names (or the dotted OID), `,+"\\<>;=` and a leading `#` or space
/// escaped with a backslash.
pub fn distinguished_name(name: &X509NameRef) -> String {
    let mut out = String::new();
    let entries: Vec<_> = name.entries().collect();
    for entry in entries.iter().rev() {
        if !out.is_empty() {
            out.push(',');
        }
        let nid = entry.object().nid();
        match nid.short_name() {
            Ok(short) if nid != boring::nid::Nid::UNDEF => out.push_str(short),
            _ => out.push_str(&entry.object().to_string()),
        }
        out.push('=');
        let value = entry
            .data()
            .as_utf8()
            .map(|v| v.to_string())
            .unwrap_or_default();
        for (i, ch) in value.chars().enumerate() {
            let leading = i == 0 && (ch == '#' || ch == ' ');
            if leading || matches!(ch, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=') {
                out.push('\\');
            }
            if ch.is_control() {
                out.push_str(&format!("\\{:02X}", ch as u32));
            } else {
                out.push(ch);
            }
        }
    }
    out
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
