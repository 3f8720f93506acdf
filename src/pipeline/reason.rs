//! Why a server failed, as a short sentence for people: what the console, `/status`,
//! `tether explain` and the log lines say when a connection to a server or a check of it
//! fails, the address named once (`connection refused (10.0.0.7:8080)`). Pingora's error,
//! with its context and causes, is for the debug log only.

use pingora_error::{Error, ErrorType};
use std::fmt::Write;
use std::time::Duration;

/// `d` as the config writes durations: `1s`, `250ms`, `2m`.
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0s".into(),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

/// What went wrong with `addr`, from Pingora's error; `timeout` is the wait that ran out,
/// when the caller knows it.
pub fn of(e: &Error, addr: impl std::fmt::Display, timeout: Option<Duration>) -> String {
    let after = |what: &str| match timeout {
        Some(t) => format!("{what} after {}", duration(t)),
        None => what.to_string(),
    };
    let mut said = match e.etype() {
        ErrorType::ConnectRefused => "connection refused".to_string(),
        ErrorType::ConnectTimedout => after("connect timed out"),
        ErrorType::ConnectNoRoute => "no route to the server".to_string(),
        ErrorType::TLSHandshakeTimedout => after("TLS: the handshake timed out"),
        ErrorType::InvalidCert => {
            "TLS: the server's certificate failed verification (expired, not yet valid, \
             another name, or not signed by the CA tether trusts)"
                .to_string()
        }
        ErrorType::TLSHandshakeFailure | ErrorType::HandshakeError => {
            match tls_reason(e.context.as_ref().map_or("", |c| c.as_str())) {
                Some(why) => format!("TLS: {why}"),
                None => "TLS: the handshake failed".to_string(),
            }
        }
        ErrorType::ReadTimedout => after("timed out waiting for the answer"),
        ErrorType::WriteTimedout => after("timed out sending the request"),
        ErrorType::ConnectionClosed => "the server closed the connection".to_string(),
        ErrorType::InvalidHTTPHeader | ErrorType::H1Error | ErrorType::InvalidH2 => {
            "the server's answer is not valid HTTP".to_string()
        }
        ErrorType::HTTPStatus(status) | ErrorType::CustomCode(_, status) => {
            format!("HTTP {status}")
        }
        ErrorType::ConnectError
        | ErrorType::SocketError
        | ErrorType::BindError
        | ErrorType::ReadError
        | ErrorType::WriteError => match io_reason(e) {
            Some(why) => why,
            None => words(e.etype().as_str()),
        },
        other => words(other.as_str()),
    };
    let _ = write!(said, " ({addr})");
    said
}

/// The reason of an I/O error that caused `e`, in words: `connection reset by peer`.
fn io_reason(e: &Error) -> Option<String> {
    let io = e.root_cause().downcast_ref::<std::io::Error>()?;
    let text = io.to_string();
    // "Connection reset by peer (os error 104)": the number says nothing more.
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    let first = chars.next()?;
    Some(first.to_lowercase().chain(chars).collect())
}

/// The TLS library's reason in words, from Pingora's context (`... :WRONG_VERSION_NUMBER:
/// ...` becomes `wrong version number`).
fn tls_reason(context: &str) -> Option<String> {
    let code = context
        .split([':', ','])
        .map(str::trim)
        .find(|part| part.len() > 3 && part.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))?;
    Some(code.to_ascii_lowercase().replace('_', " "))
}

/// `ConnectError` as `connect error`.
fn words(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push(' ');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn addr() -> SocketAddr {
        "127.0.0.1:19109".parse().unwrap()
    }

    #[test]
    fn connect_failures_read_as_sentences_with_the_address_once() {
        let refused = Error::explain(
            ErrorType::ConnectRefused,
            "Fail to connect to BasicPeer { _address: Inet(127.0.0.1:19109), sni: \"\" }",
        );
        assert_eq!(
            of(&refused, addr(), None),
            "connection refused (127.0.0.1:19109)"
        );
        let slow = Error::new(ErrorType::ConnectTimedout);
        assert_eq!(
            of(&slow, addr(), Some(Duration::from_secs(1))),
            "connect timed out after 1s (127.0.0.1:19109)"
        );
        let reset = Error::because(
            ErrorType::ReadError,
            "while reading",
            std::io::Error::from_raw_os_error(libc::ECONNRESET),
        );
        assert_eq!(
            of(&reset, addr(), None),
            "connection reset by peer (127.0.0.1:19109)"
        );
        let tls = Error::explain(
            ErrorType::TLSHandshakeFailure,
            "TLS connect() failed: error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER, SNI: a.test",
        );
        assert_eq!(
            of(&tls, addr(), None),
            "TLS: wrong version number (127.0.0.1:19109)"
        );
        let status = Error::new(ErrorType::CustomCode("unexpected status", 503));
        assert_eq!(of(&status, addr(), None), "HTTP 503 (127.0.0.1:19109)");
        for e in [refused, slow, reset, tls, status] {
            let said = of(&e, addr(), Some(Duration::from_millis(1500)));
            assert!(!said.contains("Peer") && !said.contains('{'), "{said}");
            assert_eq!(said.matches("127.0.0.1:19109").count(), 1, "{said}");
        }
    }

    #[test]
    fn durations_as_the_config_writes_them() {
        assert_eq!(duration(Duration::from_secs(1)), "1s");
        assert_eq!(duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(duration(Duration::from_secs(120)), "2m");
    }
}
