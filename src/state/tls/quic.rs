//! A listener's TLS for QUIC (HTTP/3): the same certificates, SNI names and client
//! certificates as its TCP acceptor, on a plain BoringSSL context that quiche drives. QUIC
//! is TLS 1.3 only, whose ciphers are not chosen by a cipher string, and quiche chooses
//! the ALPN (`h3`) itself.

use super::acceptor::{client_auth, sni_contexts, switch_by_name, use_cert};
use crate::config::pem::load_cert_key;
use crate::config::ListenerTls;
use boring::ssl::{SslContextBuilder, SslInfoCallbackMode, SslMethod, SslVersion};
use pingora_core::protocols::tls::SslDigest;
use std::cell::Cell;

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
    client_auth(&mut b, tls)?;
    Ok(b)
}

/// The context QUIC handshakes of `tls`'s listener start with (the default certificate;
/// a client's SNI switches it to its name's).
pub fn build_quic(tls: &ListenerTls) -> Result<SslContextBuilder, String> {
    let default = load_cert_key(&tls.cert, &tls.key)?;
    let (by_name, _) = sni_contexts(tls, |ck| {
        let mut b = base(tls)?;
        use_cert(&mut b, ck)?;
        Ok(b.build())
    })?;
    let mut b = base(tls)?;
    use_cert(&mut b, &default)?;
    switch_by_name(&mut b, by_name);
    Ok(b)
}
