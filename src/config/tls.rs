//! Validation of the TLS sections: listeners' `tls:` and `redirect_https:`, clusters' `tls:`
//! and `ssl_headers:`. Every certificate and key is loaded and checked here, so `tether -t`
//! and a reload report a missing, unreadable, mismatched or expired file with its field.

use super::check::Check;
use super::model::{
    ClientAuth, ClusterTls, ListenerTls, Redirect, SniCert, SslHeaders, TlsVersion,
};
use super::pem::{load_cert_key, load_certs};
use super::raw_tls::{RawClusterTls, RawListenerTls, RawRedirect, RawSslHeaders};
use std::path::PathBuf;

const ALPN: &[&str] = &["h2", "http/1.1"];

/// Checks a cert/key pair, reporting at `{path}.cert` (or `.key` when only the key is bad).
pub(super) fn pair(check: &mut Check, path: &str, cert: &str, key: &str) {
    if let Err(e) = load_certs(cert.as_ref(), "certificate") {
        return check.err(format!("{path}.cert"), e);
    }
    if let Err(e) = load_cert_key(cert.as_ref(), key.as_ref()) {
        // The certificate loads: a date problem is its own, anything else is the key's.
        let field = if e.contains("expired") || e.contains("not valid before") {
            "cert"
        } else {
            "key"
        };
        check.err(format!("{path}.{field}"), e);
    }
}

pub(super) fn listener_tls(raw: &RawListenerTls, path: &str, check: &mut Check) -> ListenerTls {
    let path = format!("{path}.tls");
    pair(check, &path, &raw.cert, &raw.key);
    let mut sni = Vec::new();
    for (i, s) in raw.sni.iter().enumerate() {
        let p = format!("{path}.sni[{i}]");
        if s.names.is_empty() {
            check.err(format!("{p}.names"), "give at least one name");
        }
        for n in &s.names {
            let bare = n.strip_prefix("*.").unwrap_or(n);
            if bare.is_empty()
                || bare.contains('*')
                || !bare
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            {
                check.err(
                    format!("{p}.names"),
                    format!("`{n}` is not a host name or `*.domain`"),
                );
            }
        }
        pair(check, &p, &s.cert, &s.key);
        sni.push(SniCert {
            names: s.names.clone(),
            cert: s.cert.clone().into(),
            key: s.key.clone().into(),
        });
    }
    let alpn = raw
        .alpn
        .clone()
        .unwrap_or_else(|| ALPN.iter().map(|s| s.to_string()).collect());
    for a in &alpn {
        if !ALPN.contains(&a.as_str()) {
            check.err(
                format!("{path}.alpn"),
                format!("`{a}` is not one of h2, http/1.1"),
            );
        }
    }
    let min_version = match raw.min_version.as_deref() {
        None | Some("1.2") => TlsVersion::V1_2,
        Some("1.3") => TlsVersion::V1_3,
        Some(v) => {
            check.err(
                format!("{path}.min_version"),
                format!("`{v}` must be \"1.2\" or \"1.3\""),
            );
            TlsVersion::V1_2
        }
    };
    if let Some(c) = &raw.ciphers {
        let ok = boring::ssl::SslAcceptor::mozilla_intermediate_v5(boring::ssl::SslMethod::tls())
            .map(|mut b| b.set_cipher_list(c).is_ok())
            .unwrap_or(false);
        if !ok {
            check.err(
                format!("{path}.ciphers"),
                format!("`{c}` names no cipher BoringSSL knows"),
            );
        }
    }
    let client_auth = raw.client_auth.as_ref().map(|a| {
        if let Err(e) = load_certs(a.ca.as_ref(), "CA bundle") {
            check.err(format!("{path}.client_auth.ca"), e);
        }
        let required = match a.mode.as_deref() {
            None | Some("required") => true,
            Some("optional") => false,
            Some(m) => {
                check.err(
                    format!("{path}.client_auth.mode"),
                    format!("`{m}` must be required or optional"),
                );
                true
            }
        };
        ClientAuth {
            ca: PathBuf::from(&a.ca),
            required,
        }
    });
    ListenerTls {
        cert: raw.cert.clone().into(),
        key: raw.key.clone().into(),
        sni,
        alpn,
        min_version,
        ciphers: raw.ciphers.clone(),
        client_auth,
    }
}

pub(super) fn redirect(raw: &RawRedirect, path: &str, check: &mut Check) -> Redirect {
    let status = raw.status.unwrap_or(308);
    if ![301, 302, 307, 308].contains(&status) {
        check.err(
            format!("{path}.redirect_https.status"),
            "must be 301, 302, 307 or 308",
        );
    }
    let port = raw.port.unwrap_or(443);
    if port == 0 {
        check.err(
            format!("{path}.redirect_https.port"),
            "must be a port (1-65535)",
        );
    }
    Redirect { port, status }
}

pub(super) fn cluster_tls(raw: &RawClusterTls, path: &str, check: &mut Check) -> ClusterTls {
    let path = format!("{path}.tls");
    if let Some(ca) = &raw.ca {
        if let Err(e) = load_certs(ca.as_ref(), "CA bundle") {
            check.err(format!("{path}.ca"), e);
        }
    }
    let client_cert = match (&raw.client_cert, &raw.client_key) {
        (Some(c), Some(k)) => {
            if let Err(e) = load_cert_key(c.as_ref(), k.as_ref()) {
                check.err(format!("{path}.client_cert"), e);
            }
            Some((c.into(), k.into()))
        }
        (None, None) => None,
        _ => {
            check.err(
                format!("{path}.client_cert"),
                "client_cert and client_key go together",
            );
            None
        }
    };
    if let Some(sni) = &raw.sni {
        if sni.is_empty() || sni.contains(['/', ' ', ':']) {
            check.err(format!("{path}.sni"), format!("`{sni}` is not a host name"));
        }
    }
    ClusterTls {
        ca: raw.ca.as_ref().map(Into::into),
        sni: raw.sni.clone(),
        verify: raw.verify.unwrap_or(true),
        client_cert,
    }
}

pub(super) fn ssl_headers(raw: &RawSslHeaders, path: &str, check: &mut Check) -> SslHeaders {
    let name = |v: &Option<String>, default: &str, field: &str, check: &mut Check| {
        let n = v.clone().unwrap_or_else(|| default.to_string());
        if http::HeaderName::from_bytes(n.as_bytes()).is_err() {
            check.err(
                format!("{path}.ssl_headers.{field}"),
                format!("`{n}` is not a header name"),
            );
        }
        n
    };
    SslHeaders {
        client_cert: name(&raw.client_cert, "ssl_client_cert", "client_cert", check),
        cipher: name(&raw.cipher, "ssl_cipher", "cipher", check),
        session_id: name(&raw.session_id, "ssl_session_id", "session_id", check),
        key_size: name(&raw.key_size, "ssl_cipher_usekeysize", "key_size", check),
    }
}
