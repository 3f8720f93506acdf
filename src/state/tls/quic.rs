//! A listener's TLS for QUIC (HTTP/3): the same certificates, SNI names and client
//! certificates as its TCP acceptor, on a plain BoringSSL context that quiche drives. QUIC
//! is TLS 1.3 only, whose ciphers are not chosen by a cipher string, and quiche chooses
//! the ALPN (`h3`) itself.

use super::acceptor::{find, use_cert};
use crate::config::pem::load_cert_key;
use crate::config::{ClientAuth, ListenerTls};
use boring::ssl::{
    NameType, SniError, SslContext, SslContextBuilder, SslInfoCallbackMode, SslMethod,
    SslVerifyMode, SslVersion,
};
use boring::x509::X509Name;
use pingora_core::protocols::tls::SslDigest;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

thread_local! {
    /// The digest of the handshake that completed last on this thread.
    static DONE: Cell<Option<SslDigest>> = const { Cell::new(None) };
}

/// The digest of a handshake that completed on this thread since the last call. quiche
/// keeps its TLS session to itself: its context's callback leaves the digest here, during
/// the `recv` of the packet that completed the handshake, for the connection's task to take
/// right after it.
pub fn handshake_done() -> Option<SslDigest> {
    DONE.with(Cell::take)
}

fn base(tls: &ListenerTls) -> Result<SslContextBuilder, String> {
    let err = |what: &str, e: boring::error::ErrorStack| format!("{what}: {e}");
    let mut b = SslContextBuilder::new(SslMethod::tls()).map_err(|e| err("QUIC TLS setup", e))?;
    b.set_min_proto_version(Some(SslVersion::TLS1_3))
        .map_err(|e| err("QUIC TLS setup", e))?;
    b.set_max_proto_version(Some(SslVersion::TLS1_3))
        .map_err(|e| err("QUIC TLS setup", e))?;
    b.set_session_id_context(b"tether")
        .map_err(|e| err("QUIC TLS setup", e))?;
    b.set_info_callback(|ssl, mode, _| {
        if mode == SslInfoCallbackMode::HANDSHAKE_DONE {
            DONE.with(|done| done.set(Some(SslDigest::from_ssl(ssl))));
        }
    });
    if let Some(ClientAuth { ca, required }) = &tls.client_auth {
        let shown = ca.display();
        b.set_ca_file(ca)
            .map_err(|e| format!("client_auth.ca `{shown}`: {e}"))?;
        let names = X509Name::load_client_ca_file(ca)
            .map_err(|e| format!("client_auth.ca `{shown}`: {e}"))?;
        b.set_client_ca_list(names);
        let mut mode = SslVerifyMode::PEER;
        if *required {
            mode |= SslVerifyMode::FAIL_IF_NO_PEER_CERT;
        }
        b.set_verify(mode);
    }
    Ok(b)
}

/// The context QUIC handshakes of `tls`'s listener start with (the default certificate;
/// a client's SNI switches it to its name's).
pub fn build_quic(tls: &ListenerTls) -> Result<SslContextBuilder, String> {
    let default = load_cert_key(&tls.cert, &tls.key)?;
    let mut by_name: HashMap<String, SslContext> = HashMap::new();
    for sni in &tls.sni {
        let ck = load_cert_key(&sni.cert, &sni.key)?;
        let mut b = base(tls)?;
        use_cert(&mut b, &ck)?;
        let ctx = b.build();
        for n in &sni.names {
            by_name.insert(n.to_ascii_lowercase(), ctx.clone());
        }
    }
    let mut b = base(tls)?;
    use_cert(&mut b, &default)?;
    if !by_name.is_empty() {
        let by_name = Arc::new(by_name);
        b.set_servername_callback(move |ssl, _alert| {
            if let Some(ctx) = ssl
                .servername(NameType::HOST_NAME)
                .and_then(|n| find(&by_name, n))
            {
                ssl.set_ssl_context(ctx)
                    .map_err(|_| SniError::ALERT_FATAL)?;
            }
            Ok(())
        });
    }
    Ok(b)
}
