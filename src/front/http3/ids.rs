//! What the router and the connections say to each other: the datagrams the router hands
//! a connection, the connection ids a connection tells the router to route to it, how such
//! ids are made, and the keyed tokens that go with them (stateless resets, Retry).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// The length of the connection ids tether issues.
pub const CID_LEN: usize = quiche::MAX_CONN_ID_LEN;

/// The largest UDP payload tether sends (what every path between loopback and the internet
/// carries, as quiche's examples use).
pub const MAX_DATAGRAM: usize = 1350;

/// A datagram and its sender's address.
pub type Datagram = (Vec<u8>, SocketAddr);

/// What connections tell the router.
pub enum ToRouter {
    /// Connection `.0` issued id `.1`.
    Add(u64, Vec<u8>),
    /// An id the client retired.
    Remove(Vec<u8>),
    /// The connection ended: none of its ids route anywhere.
    Closed(u64),
}

/// A fresh, random connection id.
pub fn new_cid() -> Vec<u8> {
    let mut cid = vec![0u8; CID_LEN];
    boring::rand::rand_bytes(&mut cid).expect("BoringSSL's random bytes");
    cid
}

/// How long a Retry token stays good: the client sends it back at once.
const TOKEN_LIFE: Duration = Duration::from_secs(10);

/// The listener's secret for what it must be able to recognise later: the stateless reset
/// token of each connection id it issues (the same in a process that follows it, when the
/// key is kept in `state_dir`), and the Retry tokens that prove a client's address.
pub struct Keys {
    secret: [u8; 32],
}

impl Keys {
    /// The key kept in `file` (made there at the first start), or, without a file, one of
    /// this process's own.
    pub fn load(file: Option<&Path>) -> std::io::Result<Keys> {
        let mut secret = [0u8; 32];
        match file {
            Some(file) => match std::fs::read(file) {
                Ok(kept) if kept.len() == secret.len() => secret.copy_from_slice(&kept),
                Ok(_) => {
                    return Err(std::io::Error::other(format!(
                        "{}: not 32 bytes",
                        file.display()
                    )))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    random(&mut secret);
                    write_secret(file, &secret)?;
                }
                Err(e) => return Err(e),
            },
            None => random(&mut secret),
        }
        Ok(Keys { secret })
    }

    /// HMAC-SHA256 of `parts`, one after the other (at most 128 bytes in all).
    fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut data = [0u8; 128];
        let mut n = 0;
        for part in parts {
            let end = (n + part.len()).min(data.len());
            data[n..end].copy_from_slice(&part[..end - n]);
            n = end;
        }
        boring::hash::hmac_sha256(&self.secret, &data[..n]).expect("an HMAC")
    }

    /// The stateless reset token of connection id `cid` (RFC 9000 §10.3.2).
    pub fn reset_token(&self, cid: &[u8]) -> u128 {
        let mac = self.mac(&[b"reset", cid]);
        u128::from_be_bytes(mac[..16].try_into().expect("16 bytes"))
    }

    /// A Retry token for a client at `peer` whose first packet went to `odcid`: a MAC, when
    /// it was made, and `odcid`.
    pub fn retry_token(&self, peer: SocketAddr, odcid: &[u8]) -> Vec<u8> {
        let made = now_secs().to_be_bytes();
        let mac = self.mac(&[b"retry", peer.to_string().as_bytes(), &made, odcid]);
        [&mac[..16], &made[..], odcid].concat()
    }

    /// The original destination id that a good `token` from `peer` carries.
    pub fn check_retry<'t>(&self, peer: SocketAddr, token: &'t [u8]) -> Option<&'t [u8]> {
        if token.len() < 24 {
            return None;
        }
        let (mac, rest) = token.split_at(16);
        let (made, odcid) = rest.split_at(8);
        let age = now_secs().saturating_sub(u64::from_be_bytes(made.try_into().ok()?));
        let want = self.mac(&[b"retry", peer.to_string().as_bytes(), made, odcid]);
        let good = boring::memcmp::eq(mac, &want[..16]) && age <= TOKEN_LIFE.as_secs();
        good.then_some(odcid)
    }
}

fn random(out: &mut [u8]) {
    boring::rand::rand_bytes(out).expect("BoringSSL's random bytes");
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Writes a new secret readable by this user only.
fn write_secret(file: &Path, secret: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)?;
    f.write_all(secret)
}

/// A stateless reset for a short-header packet of `len` bytes to `dcid` (RFC 9000 §10.3):
/// shorter than the packet that caused it (so two endpoints never answer each other for
/// ever), and long enough to look like any packet; `None` for a packet too short.
pub fn stateless_reset(keys: &Keys, dcid: &[u8], len: usize, out: &mut [u8]) -> Option<usize> {
    let n = len.checked_sub(1)?.min(43).min(out.len());
    if n < 21 {
        return None;
    }
    random(&mut out[..n - 16]);
    // A short header's first bits: 0b01, the rest random.
    out[0] = 0x40 | (out[0] & 0x3f);
    out[n - 16..n].copy_from_slice(&keys.reset_token(dcid).to_be_bytes());
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_tokens_prove_an_address_and_resets_are_keyed() {
        let keys = Keys::load(None).unwrap();
        let peer: SocketAddr = "127.0.0.2:4433".parse().unwrap();
        let token = keys.retry_token(peer, b"odcid-1");
        assert_eq!(keys.check_retry(peer, &token), Some(&b"odcid-1"[..]));
        let other: SocketAddr = "127.0.0.3:4433".parse().unwrap();
        assert_eq!(keys.check_retry(other, &token), None);
        let mut forged = token.clone();
        forged[0] ^= 1;
        assert_eq!(keys.check_retry(peer, &forged), None);
        assert_eq!(keys.check_retry(peer, &token[..10]), None);
        assert_eq!(keys.reset_token(b"a"), keys.reset_token(b"a"));
        assert_ne!(keys.reset_token(b"a"), keys.reset_token(b"b"));
        let mut out = [0u8; 64];
        assert_eq!(stateless_reset(&keys, b"a", 21, &mut out), None);
        let n = stateless_reset(&keys, b"a", 100, &mut out).unwrap();
        assert_eq!(n, 43);
        assert_eq!(out[0] & 0xc0, 0x40);
        assert_eq!(out[n - 16..n], keys.reset_token(b"a").to_be_bytes());
    }
}
