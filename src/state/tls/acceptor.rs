//! A listener's TLS acceptor from its `tls:` section: the default certificate and more by
//! SNI, ALPN, the minimum version, ciphers and client certificates.

use crate::config::pem::{load_cert_key, load_certs, CertKey};
use crate::config::{ClientAuth, ListenerTls, ServiceTls, TlsVersion};
use boring::ssl::{
    AlpnError, NameType, SniError, SslAcceptor, SslAcceptorBuilder, SslContext, SslContextBuilder,
    SslMethod, SslVerifyMode, SslVersion,
};
use boring::x509::X509Name;
use std::collections::HashMap;
use std::sync::Arc;

/// A built acceptor and what the metrics say of its certificates.
pub struct Acceptor {
    pub acceptor: SslAcceptor,
    /// (certificate's name in the config, expiry in Unix seconds), default first.
    pub expiry: Vec<(String, i64)>,
}

/// The first of our protocols (in our order) the client offers, as the client's bytes.
fn select<'a>(ours: &[String], client: &'a [u8]) -> Option<&'a [u8]> {
    ours.iter().find_map(|p| {
        let mut rest = client;
        while let Some((&len, tail)) = rest.split_first() {
            let (proto, next) = tail.split_at_checked(len as usize)?;
            if proto == p.as_bytes() {
                return Some(proto);
            }
            rest = next;
        }
        None
    })
}

/// Everything but the certificate, the same for the default and every SNI context.
fn base(tls: &ListenerTls) -> Result<SslAcceptorBuilder, String> {
    let err = |what: &str, e: boring::error::ErrorStack| format!("{what}: {e}");
    // Mozilla's "intermediate" profile: TLS 1.2 and 1.3, forward-secret AEAD ciphers.
    let mut b =
        SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).map_err(|e| err("TLS setup", e))?;
    let min = match tls.min_version {
        TlsVersion::V1_2 => SslVersion::TLS1_2,
        TlsVersion::V1_3 => SslVersion::TLS1_3,
    };
    b.set_min_proto_version(Some(min))
        .map_err(|e| err("min_version", e))?;
    if let Some(ciphers) = &tls.ciphers {
        b.set_cipher_list(ciphers).map_err(|e| err("ciphers", e))?;
    }
    // Needed for session resumption with client certificates; harmless without.
    b.set_session_id_context(b"tether")
        .map_err(|e| err("TLS setup", e))?;
    if !tls.alpn.is_empty() {
        let ours = tls.alpn.clone();
        b.set_alpn_select_callback(move |_, client| select(&ours, client).ok_or(AlpnError::NOACK));
    }
    client_auth(&mut b, tls)?;
    Ok(b)
}

/// Asks clients for a certificate from `tls.client_auth`'s CA, requiring one when it says so.
pub(super) fn client_auth(b: &mut SslContextBuilder, tls: &ListenerTls) -> Result<(), String> {
    let Some(ClientAuth { ca, required }) = &tls.client_auth else {
        return Ok(());
    };
    let shown = ca.display();
    b.set_ca_file(ca)
        .map_err(|e| format!("client_auth.ca `{shown}`: {e}"))?;
    let names =
        X509Name::load_client_ca_file(ca).map_err(|e| format!("client_auth.ca `{shown}`: {e}"))?;
    b.set_client_ca_list(names);
    let mut mode = SslVerifyMode::PEER;
    if *required {
        mode |= SslVerifyMode::FAIL_IF_NO_PEER_CERT;
    }
    b.set_verify(mode);
    Ok(())
}

pub(super) fn use_cert(b: &mut SslContextBuilder, ck: &CertKey) -> Result<(), String> {
    let err = |e: boring::error::ErrorStack| format!("certificate: {e}");
    b.set_certificate(ck.leaf()).map_err(err)?;
    for extra in &ck.chain[1..] {
        b.add_extra_chain_cert(extra.clone()).map_err(err)?;
    }
    b.set_private_key(&ck.key).map_err(err)?;
    b.check_private_key().map_err(err)
}

/// The context for `name`: exact, then `*.rest` for `first.rest`.
pub(super) fn find<'a>(
    by_name: &'a HashMap<String, SslContext>,
    name: &str,
) -> Option<&'a SslContext> {
    let name = name.to_ascii_lowercase();
    by_name.get(&name).or_else(|| {
        let (_, rest) = name.split_once('.')?;
        by_name.get(&format!("*.{rest}"))
    })
}

/// SNI contexts by lower-cased name.
pub(super) type ByName = HashMap<String, SslContext>;

/// The contexts of `tls.sni`, by lower-cased name, each made by `context` with its
/// certificate; and each certificate's (names, expiry in Unix seconds).
pub(super) fn sni_contexts(
    tls: &ListenerTls,
    context: impl Fn(&CertKey) -> Result<SslContext, String>,
) -> Result<(ByName, Vec<(String, i64)>), String> {
    let mut by_name = HashMap::new();
    let mut expiry = Vec::with_capacity(tls.sni.len());
    for sni in &tls.sni {
        let ck = load_cert_key(&sni.cert, &sni.key)?;
        let ctx = context(&ck)?;
        expiry.push((sni.names.join(","), ck.not_after_unix()));
        for n in &sni.names {
            by_name.insert(n.to_ascii_lowercase(), ctx.clone());
        }
    }
    Ok((by_name, expiry))
}

/// Makes handshakes on `b` switch to the context of the name the client asks for (SNI),
/// when `by_name` has it.
pub(super) fn switch_by_name(b: &mut SslContextBuilder, by_name: ByName) {
    if by_name.is_empty() {
        return;
    }
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

/// Builds the acceptor of `tls` (loading every file again: the config only checked them).
pub fn build_acceptor(tls: &ListenerTls) -> Result<Acceptor, String> {
    let default = load_cert_key(&tls.cert, &tls.key)?;
    let (by_name, by_name_expiry) = sni_contexts(tls, |ck| {
        let mut b = base(tls)?;
        use_cert(&mut b, ck)?;
        Ok(b.build().into_context())
    })?;
    let mut expiry = vec![("default".to_string(), default.not_after_unix())];
    expiry.extend(by_name_expiry);
    let mut b = base(tls)?;
    use_cert(&mut b, &default)?;
    switch_by_name(&mut b, by_name);
    // A CA bundle for client certificates is checked here too, with its own message.
    if let Some(auth) = &tls.client_auth {
        load_certs(&auth.ca, "CA bundle")?;
    }
    Ok(Acceptor {
        acceptor: b.build(),
        expiry,
    })
}

/// The acceptor settings of one of tether's own listeners (`admin.tls`, `metrics.tls`),
/// for Pingora's `TlsSettings`: a listener's defaults (Mozilla intermediate, TLS 1.2 and
/// 1.3) with one certificate, no ALPN (HTTP/1.1), and client certificates required when
/// `client_ca` is set.
pub fn build_service(tls: &ServiceTls) -> Result<SslAcceptorBuilder, String> {
    let as_listener = ListenerTls {
        cert: tls.cert.clone(),
        key: tls.key.clone(),
        sni: Vec::new(),
        alpn: Vec::new(),
        min_version: TlsVersion::V1_2,
        ciphers: None,
        client_auth: tls
            .client_ca
            .clone()
            .map(|ca| ClientAuth { ca, required: true }),
    };
    let ck = load_cert_key(&tls.cert, &tls.key)?;
    if let Some(ca) = &tls.client_ca {
        load_certs(ca, "CA bundle")?;
    }
    let mut b = base(&as_listener)?;
    use_cert(&mut b, &ck)?;
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_prefers_our_order() {
        let ours = ["h2".to_string(), "http/1.1".to_string()];
        assert_eq!(select(&ours, b"\x08http/1.1\x02h2"), Some(&b"h2"[..]));
        assert_eq!(select(&ours, b"\x08http/1.1"), Some(&b"http/1.1"[..]));
        assert_eq!(select(&ours[1..], b"\x02h2"), None);
        assert_eq!(
            select(&ours, b"\x09http/1.1"),
            None,
            "a length past the end"
        );
    }
}
