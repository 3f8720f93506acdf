//! A cluster's TLS to its servers (`clusters[].tls`): the CA to verify them with, the SNI
//! name, and the proxy's own client certificate, loaded once and shared by every peer.

use crate::config::pem::{load_cert_key, load_certs};
use crate::config::ClusterTls;
use boring::x509::X509;
use pingora_core::utils::tls::CertKey;
use std::sync::Arc;

pub struct UpstreamTls {
    /// Verify the server's certificate (and its name against `sni`).
    pub verify: bool,
    /// SNI and verified name; empty means "the server's address" is not used by Pingora,
    /// so tether fills it from the server's host when the config gives none.
    pub sni: Option<String>,
    pub ca: Option<Arc<Box<[X509]>>>,
    pub client_cert: Option<Arc<CertKey>>,
}

pub fn build_upstream(tls: &ClusterTls) -> Result<UpstreamTls, String> {
    let ca = match &tls.ca {
        Some(path) => Some(Arc::new(load_certs(path, "CA bundle")?.into_boxed_slice())),
        None => None,
    };
    let client_cert = match &tls.client_cert {
        Some((cert, key)) => {
            let ck = load_cert_key(cert, key)?;
            Some(Arc::new(CertKey::new(ck.chain, ck.key)))
        }
        None => None,
    };
    Ok(UpstreamTls {
        verify: tls.verify,
        sni: tls.sni.clone(),
        ca,
        client_cert,
    })
}
