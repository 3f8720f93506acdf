//! Raw serde types of the TLS sections and the https redirect, as written in the file:
//! `listeners[].tls`, `listeners[].redirect_https`, `clusters[].tls`, `clusters[].ssl_headers`
//! (validated in `tls.rs`).

use serde::Deserialize;

/// `listeners[].tls`.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawListenerTls {
    pub cert: String,
    pub key: String,
    #[serde(default)]
    pub sni: Vec<RawSni>,
    pub alpn: Option<Vec<String>>,
    pub min_version: Option<String>,
    pub ciphers: Option<String>,
    pub client_auth: Option<RawClientAuth>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawSni {
    pub names: Vec<String>,
    pub cert: String,
    pub key: String,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawClientAuth {
    pub ca: String,
    pub mode: Option<String>,
}

/// `listeners[].redirect_https`.
#[derive(Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRedirect {
    pub port: Option<u16>,
    pub status: Option<u16>,
}

/// `clusters[].tls`.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawClusterTls {
    pub ca: Option<String>,
    pub sni: Option<String>,
    pub verify: Option<bool>,
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
}

/// `clusters[].ajp`: the servers speak AJP/1.3.
#[derive(Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAjp {
    pub secret_file: Option<String>,
    pub packet_size: Option<usize>,
    pub ping: Option<String>,
    pub ping_timeout: Option<String>,
    pub ping_interval: Option<String>,
}

/// `clusters[].ssl_headers`: Tomcat `SSLValve` header names.
#[derive(Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSslHeaders {
    pub client_cert: Option<String>,
    pub cipher: Option<String>,
    pub session_id: Option<String>,
    pub key_size: Option<String>,
}
