//! Test certificates, generated per test run (no private key is committed): a CA, server
//! certificates for `a.test` (the default), `b.test` (by SNI) and `127.0.0.1`/`localhost`
//! (`loopback`, for a TLS Redis), a client certificate, one issued by an intermediate CA
//! (`client-chained`), an expired certificate and a key that fits nothing.
#![allow(dead_code)]

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use std::path::{Path, PathBuf};

pub struct Pki {
    pub dir: PathBuf,
}

fn leaf(
    names: &[&str],
    cn: &str,
    ca: &rcgen::Certificate,
    ca_key: &KeyPair,
    client: bool,
) -> (String, String) {
    let mut p =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    if client {
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    }
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca, ca_key).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    /// Writes every file into `dir`.
    pub fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "tether test CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        write("ca.pem", &ca.pem());
        for (file, names, cn, client) in [
            ("a", &["a.test", "localhost"][..], "a.test", false),
            ("b", &["b.test"][..], "b.test", false),
            ("a2", &["a.test", "localhost"][..], "a.test second", false),
            ("client", &["client.test"][..], "client one", true),
            (
                "loopback",
                &["127.0.0.1", "localhost"][..],
                "127.0.0.1",
                false,
            ),
        ] {
            let (cert, key) = leaf(names, cn, &ca, &ca_key, client);
            write(&format!("{file}.crt"), &cert);
            write(&format!("{file}.key"), &key);
        }
        // A client certificate issued by an intermediate CA, its file holding the chain
        // (leaf, then intermediate) as a client sends it.
        let mut mid = CertificateParams::new(Vec::<String>::new()).unwrap();
        mid.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        mid.distinguished_name
            .push(DnType::CommonName, "tether test intermediate");
        let mid_key = KeyPair::generate().unwrap();
        let mid = mid.signed_by(&mid_key, &ca, &ca_key).unwrap();
        let (cert, key) = leaf(&["client2.test"], "client two", &mid, &mid_key, true);
        write("client-chained.crt", &format!("{cert}{}", mid.pem()));
        write("client-chained.key", &key);
        // An expired certificate for a.test.
        let mut p = CertificateParams::new(vec!["a.test".to_string()]).unwrap();
        p.not_before = date_time_ymd(2001, 1, 1);
        p.not_after = date_time_ymd(2002, 1, 1);
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
        write("expired.crt", &cert.pem());
        write("expired.key", &key.serialize_pem());
        // A key that fits no certificate, and another CA nobody signed with.
        write("other.key", &KeyPair::generate().unwrap().serialize_pem());
        let mut other = CertificateParams::new(Vec::<String>::new()).unwrap();
        other.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let other_key = KeyPair::generate().unwrap();
        write(
            "other-ca.pem",
            &other.self_signed(&other_key).unwrap().pem(),
        );
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// A listener's `tls:` section with the `a.test` certificate (lines of `listener_extra`).
    pub fn listener_tls(&self) -> String {
        format!(
            "    tls:\n      cert: {}\n      key: {}\n",
            self.path("a.crt"),
            self.path("a.key")
        )
    }
}
