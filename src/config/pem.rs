//! Certificates and keys in PEM files, loaded and checked when the config is (`tether -t`,
//! start, reload): readable, parseable, the key fits the certificate, not expired.

use boring::asn1::Asn1Time;
use boring::pkey::{PKey, Private};
use boring::x509::X509;
use std::path::Path;

/// A certificate chain (leaf first) and its private key.
pub struct CertKey {
    pub chain: Vec<X509>,
    pub key: PKey<Private>,
}

impl CertKey {
    pub fn leaf(&self) -> &X509 {
        &self.chain[0]
    }

    /// When the leaf certificate expires, in Unix seconds.
    pub fn not_after_unix(&self) -> i64 {
        let epoch = Asn1Time::from_unix(0).expect("the epoch is a valid time");
        epoch
            .diff(self.leaf().not_after())
            .map_or(0, |d| i64::from(d.days) * 86_400 + i64::from(d.secs))
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read the {what} `{}`: {e}", path.display()))
}

/// Certificates of a PEM file (a chain, or a CA bundle).
pub fn load_certs(path: &Path, what: &str) -> Result<Vec<X509>, String> {
    let pem = read(path, what)?;
    let certs = X509::stack_from_pem(&pem)
        .map_err(|e| format!("`{}` is not a PEM {what}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("`{}` holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

/// Loads a certificate chain and its key, and checks that they belong together and that
/// the certificate is valid now.
pub fn load_cert_key(cert: &Path, key: &Path) -> Result<CertKey, String> {
    let chain = load_certs(cert, "certificate")?;
    let pem = read(key, "private key")?;
    let key_pair = PKey::private_key_from_pem(&pem)
        .map_err(|e| format!("`{}` is not a PEM private key: {e}", key.display()))?;
    let public = chain[0]
        .public_key()
        .map_err(|e| format!("`{}`: no public key: {e}", cert.display()))?;
    if !public.public_eq(&key_pair) {
        return Err(format!(
            "the key `{}` does not fit the certificate `{}`",
            key.display(),
            cert.display()
        ));
    }
    let now = Asn1Time::days_from_now(0).map_err(|e| e.to_string())?;
    if chain[0].not_after() < now {
        return Err(format!(
            "the certificate `{}` expired on {}",
            cert.display(),
            chain[0].not_after()
        ));
    }
    if chain[0].not_before() > now {
        return Err(format!(
            "the certificate `{}` is not valid before {}",
            cert.display(),
            chain[0].not_before()
        ));
    }
    Ok(CertKey {
        chain,
        key: key_pair,
    })
}
