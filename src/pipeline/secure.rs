//! What the servers are told about the client's connection when it is TLS: the facts come
//! from the connection's digest (version, cipher) and what the handshake recorded (SNI,
//! client certificate, session id, cipher strength). WebSphere's `$WS*` headers are set in
//! `websphere`; Tomcat's `SSLValve` headers here.

use super::upstream_fields::UpstreamFields;
use crate::config::SslHeaders;
use crate::state::tls::ConnTls;
use base64::Engine;
use pingora_core::protocols::tls::SslDigest;
use pingora_proxy::Session;
use std::sync::Arc;

/// The client connection's TLS, when it is TLS.
pub struct Secure {
    pub digest: Arc<SslDigest>,
}

impl Secure {
    /// From the downstream session (HTTP/1.1 or an HTTP/2 stream).
    pub fn of(session: &Session) -> Option<Secure> {
        let digest = session.as_downstream().digest()?.ssl_digest.clone()?;
        Some(Secure { digest })
    }

    pub fn cipher(&self) -> &str {
        &self.digest.cipher
    }

    pub fn conn(&self) -> Option<&ConnTls> {
        self.digest.extension.get::<ConnTls>()
    }

    /// The client certificate, base64 DER (`$WSCC`).
    pub fn client_cert_base64(&self) -> Option<String> {
        let der = self.conn()?.client_cert_der.as_ref()?;
        Some(base64::engine::general_purpose::STANDARD.encode(der))
    }

    /// The client certificate as PEM on one line (what Apache's `%{SSL_CLIENT_CERT}s`
    /// sends and Tomcat's `SSLValve` reads: newlines as spaces).
    pub fn client_cert_pem_line(&self) -> Option<String> {
        let b64 = self.client_cert_base64()?;
        let mut out = String::from("-----BEGIN CERTIFICATE----- ");
        for chunk in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
            out.push(' ');
        }
        out.push_str("-----END CERTIFICATE-----");
        Some(out)
    }
}

impl Secure {
    /// The client certificate and the chain it sent after it, as PEM in lines of 64 (what
    /// AJP's `ssl_cert` carries, as mod_jk's `+ForwardSSLCertChain` sends it; Tomcat reads
    /// the chain from it).
    pub fn client_cert_pem(&self) -> Option<String> {
        let conn = self.conn()?;
        let leaf = conn.client_cert_der.as_ref()?;
        let mut out = String::new();
        for der in std::iter::once(leaf).chain(&conn.client_chain_der) {
            let b64 = base64::engine::general_purpose::STANDARD.encode(der);
            out.push_str("-----BEGIN CERTIFICATE-----\n");
            for chunk in b64.as_bytes().chunks(64) {
                out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
                out.push('\n');
            }
            out.push_str("-----END CERTIFICATE-----\n");
        }
        Some(out)
    }
}

/// Sets (or removes, so a client cannot send them) Tomcat's `SSLValve` headers.
pub fn set_ssl_headers(req: &mut impl UpstreamFields, names: &SslHeaders, tls: Option<&Secure>) {
    for name in [
        &names.client_cert,
        &names.cipher,
        &names.session_id,
        &names.key_size,
    ] {
        req.remove(name.as_str());
    }
    let Some(tls) = tls else { return };
    req.set_named(&names.cipher, tls.cipher().as_bytes());
    if let Some(pem) = tls.client_cert_pem_line() {
        req.set_named(&names.client_cert, pem.as_bytes());
    }
    let conn = tls.conn();
    if let Some(id) = conn.and_then(|c| c.session_id.as_deref()) {
        req.set_named(&names.session_id, id.as_bytes());
    }
    if let Some(bits) = conn.and_then(|c| c.cipher_bits) {
        let mut buf = [0u8; 48];
        req.set_named(
            &names.key_size,
            super::forwarded::write_on_stack(&mut buf, bits),
        );
    }
}
