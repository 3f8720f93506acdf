//! What tether sends a server over AJP: the request (`FORWARD_REQUEST`: method, protocol,
//! path, the client's address and port, the server name and port the client used, whether
//! it came over TLS, the fields with the common names coded, then the attributes), the
//! body in packets, and the CPing that asks whether the server is alive.
//!
//! Attributes are tether's facts only (the TLS of the client's connection, the route of
//! the server chosen, the secret, the client's port): no field of the client's ever
//! becomes an attribute (CVE-2020-1938, "Ghostcat").

use super::packet::{TooLarge, Writer};

/// Message types to the server.
const FORWARD_REQUEST: u8 = 2;
const CPING: u8 = 10;

/// Attribute codes.
const QUERY_STRING: u8 = 0x05;
const ROUTE: u8 = 0x06;
const SSL_CERT: u8 = 0x07;
const SSL_CIPHER: u8 = 0x08;
const SSL_SESSION: u8 = 0x09;
const REQ_ATTRIBUTE: u8 = 0x0A;
const SSL_KEY_SIZE: u8 = 0x0B;
const SECRET: u8 = 0x0C;
const STORED_METHOD: u8 = 0x0D;
const ARE_DONE: u8 = 0xFF;

/// The method byte of a method without a code of its own (sent as `STORED_METHOD`).
const METHOD_STORED: u8 = 0xFF;

/// Methods by code (code = place + 1).
const METHODS: [&str; 27] = [
    "OPTIONS",
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "DELETE",
    "TRACE",
    "PROPFIND",
    "PROPPATCH",
    "MKCOL",
    "COPY",
    "MOVE",
    "LOCK",
    "UNLOCK",
    "ACL",
    "REPORT",
    "VERSION-CONTROL",
    "CHECKIN",
    "CHECKOUT",
    "UNCHECKOUT",
    "SEARCH",
    "MKWORKSPACE",
    "UPDATE",
    "LABEL",
    "MERGE",
    "BASELINE-CONTROL",
    "MKACTIVITY",
];

/// Request field names by code (code = 0xA000 + place + 1).
const FIELDS: [&str; 14] = [
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "authorization",
    "connection",
    "content-type",
    "content-length",
    "cookie",
    "cookie2",
    "host",
    "pragma",
    "referer",
    "user-agent",
];

/// The empty body packet, the end of a request's body.
pub const END_OF_BODY: [u8; 4] = [0x12, 0x34, 0, 0];

/// The TLS of the client's connection, as the server's servlet API shows it.
pub struct Tls<'a> {
    pub cipher: &'a [u8],
    pub session_id: Option<&'a [u8]>,
    pub key_size: Option<u16>,
    /// `TLSv1.3`, ... (Tomcat's `AJP_SSL_PROTOCOL`).
    pub protocol: &'a [u8],
    /// The client's certificate chain in PEM, when it sent one.
    pub cert_pem: Option<&'a [u8]>,
}

/// A request to forward.
pub struct Forward<'a> {
    pub method: &'a [u8],
    /// `HTTP/1.1`, `HTTP/2.0` (`request.getProtocol()`).
    pub protocol: &'a [u8],
    /// The path, without the query.
    pub path: &'a [u8],
    pub query: Option<&'a [u8]>,
    /// The client's address and port, as tether names the client.
    pub remote_addr: &'a [u8],
    pub remote_port: Option<u16>,
    /// The address the client connected to (Tomcat's `AJP_LOCAL_ADDR`).
    pub local_addr: Option<&'a [u8]>,
    /// The host and port the client addressed.
    pub server_name: &'a [u8],
    pub server_port: u16,
    pub tls: Option<Tls<'a>>,
    /// The route of the server chosen (mod_jk sends it).
    pub route: Option<&'a [u8]>,
    /// The connector's `secret`.
    pub secret: Option<&'a [u8]>,
}

/// Writes `f` with the request's fields (name and value, from `fields`, which gives them
/// each time it is called: they are counted first; the caller leaves out what must not
/// pass) as one packet of at most `max` bytes appended to `out`; a request that does not
/// fit is refused, and `out` is left as it was.
pub fn forward_request<'h, I: Iterator<Item = (&'h [u8], &'h [u8])>>(
    out: &mut Vec<u8>,
    f: &Forward,
    fields: impl Fn() -> I,
    max: usize,
) -> Result<(), TooLarge> {
    let count = u16::try_from(fields().count()).map_err(|_| TooLarge)?;
    let mut w = Writer::new(out, max);
    w.byte(FORWARD_REQUEST);
    let code = METHODS
        .iter()
        .position(|m| m.as_bytes() == f.method)
        .map_or(METHOD_STORED, |i| i as u8 + 1);
    w.byte(code);
    w.string(f.protocol);
    w.string(f.path);
    w.string(f.remote_addr);
    // The remote host: its address, as mod_jk sends it without a DNS look-up.
    w.string(f.remote_addr);
    w.string(f.server_name);
    w.int(f.server_port);
    w.bool(f.tls.is_some());
    w.int(count);
    for (name, value) in fields() {
        match FIELDS
            .iter()
            .position(|n| name.eq_ignore_ascii_case(n.as_bytes()))
        {
            Some(i) => w.int(0xA001 + i as u16),
            None => w.string(name),
        }
        w.string(value);
    }
    if let Some(query) = f.query {
        w.byte(QUERY_STRING);
        w.string(query);
    }
    if let Some(route) = f.route {
        w.byte(ROUTE);
        w.string(route);
    }
    if let Some(tls) = &f.tls {
        if let Some(cert) = tls.cert_pem {
            w.byte(SSL_CERT);
            w.string(cert);
        }
        w.byte(SSL_CIPHER);
        w.string(tls.cipher);
        if let Some(id) = tls.session_id {
            w.byte(SSL_SESSION);
            w.string(id);
        }
        if let Some(bits) = tls.key_size {
            w.byte(SSL_KEY_SIZE);
            w.int(bits);
        }
        attribute(&mut w, b"AJP_SSL_PROTOCOL", tls.protocol);
    }
    if let Some(secret) = f.secret {
        w.byte(SECRET);
        w.string(secret);
    }
    if let Some(port) = f.remote_port {
        let mut digits = [0u8; 5];
        attribute(&mut w, b"AJP_REMOTE_PORT", decimal(port, &mut digits));
    }
    if let Some(local) = f.local_addr {
        attribute(&mut w, b"AJP_LOCAL_ADDR", local);
    }
    if code == METHOD_STORED {
        w.byte(STORED_METHOD);
        w.string(f.method);
    }
    w.byte(ARE_DONE);
    w.finish()
}

/// A request attribute by name (`REQ_ATTRIBUTE`).
fn attribute(w: &mut Writer, name: &[u8], value: &[u8]) {
    w.byte(REQ_ATTRIBUTE);
    w.string(name);
    w.string(value);
}

/// `n` in decimal, in `digits`.
fn decimal(mut n: u16, digits: &mut [u8; 5]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[at..];
        }
    }
}

/// A body packet of `data` (at most `max - 6` bytes) appended to `out`.
pub fn body_packet(out: &mut Vec<u8>, data: &[u8], max: usize) -> Result<(), TooLarge> {
    let mut w = Writer::new(out, max);
    w.int(u16::try_from(data.len()).map_err(|_| TooLarge)?);
    w.bytes(data);
    w.finish()
}

/// The 6 bytes before `len` bytes of body data in a body packet (for data sent from a
/// buffer of its own).
pub fn body_packet_header(len: u16) -> [u8; 6] {
    let [p1, p2] = (len + 2).to_be_bytes();
    let [l1, l2] = len.to_be_bytes();
    [0x12, 0x34, p1, p2, l1, l2]
}

/// The CPing packet.
pub fn cping(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x12, 0x34, 0, 1, CPING]);
}

#[cfg(test)]
mod tests {
    use super::super::packet::{Reader, DEFAULT_PACKET_SIZE};
    use super::*;

    fn request<'a>(method: &'a [u8], tls: Option<Tls<'a>>) -> Forward<'a> {
        Forward {
            method,
            protocol: b"HTTP/1.1",
            path: b"/shop/cart",
            query: Some(b"id=1"),
            remote_addr: b"192.0.2.7",
            remote_port: Some(40123),
            local_addr: Some(b"10.0.0.1"),
            server_name: b"shop.example",
            server_port: 443,
            tls,
            route: Some(b"tc1"),
            secret: Some(b"s3cret"),
        }
    }

    /// A field read back: name and value.
    type Field = (Vec<u8>, Vec<u8>);
    /// An attribute read back: code, name (of a REQ_ATTRIBUTE) and value.
    type Attribute = (u8, Vec<u8>, Vec<u8>);

    /// The request's method code, fields and attributes, read back.
    fn read_back(packet: &[u8]) -> (u8, Vec<Field>, Vec<Attribute>) {
        let mut r = Reader::new(&packet[4..]);
        assert_eq!(r.byte().unwrap(), FORWARD_REQUEST);
        let method = r.byte().unwrap();
        for _ in 0..5 {
            r.string().unwrap().unwrap();
        }
        r.int().unwrap();
        r.byte().unwrap();
        let count = r.int().unwrap();
        let mut fields = Vec::new();
        for _ in 0..count {
            let n = r.int().unwrap();
            let name = match n >= 0xA000 {
                true => FIELDS[usize::from(n - 0xA001)].as_bytes().to_vec(),
                false => {
                    let name = r.bytes(usize::from(n)).unwrap().to_vec();
                    assert_eq!(r.byte().unwrap(), 0);
                    name
                }
            };
            fields.push((name, r.string().unwrap().unwrap().to_vec()));
        }
        let mut attributes = Vec::new();
        loop {
            let code = r.byte().unwrap();
            match code {
                ARE_DONE => break,
                REQ_ATTRIBUTE => {
                    let name = r.string().unwrap().unwrap().to_vec();
                    attributes.push((code, name, r.string().unwrap().unwrap().to_vec()));
                }
                SSL_KEY_SIZE => {
                    let bits = r.int().unwrap();
                    attributes.push((code, Vec::new(), bits.to_string().into_bytes()));
                }
                _ => attributes.push((code, Vec::new(), r.string().unwrap().unwrap().to_vec())),
            }
        }
        assert_eq!(r.left(), 0);
        (method, fields, attributes)
    }

    #[test]
    fn a_request_carries_its_fields_coded_and_tethers_facts_as_attributes() {
        let mut out = Vec::new();
        let fields: [(&[u8], &[u8]); 3] = [
            (b"Host", b"shop.example"),
            (b"Cookie", b"JSESSIONID=A.tc1"),
            (b"X-Custom", b"1"),
        ];
        let tls = Tls {
            cipher: b"TLS_AES_128_GCM_SHA256",
            session_id: None,
            key_size: Some(128),
            protocol: b"TLSv1.3",
            cert_pem: None,
        };
        forward_request(
            &mut out,
            &request(b"GET", Some(tls)),
            || fields.into_iter(),
            8192,
        )
        .unwrap();
        assert_eq!(&out[..2], &[0x12, 0x34]);
        assert_eq!(
            usize::from(u16::from_be_bytes([out[2], out[3]])),
            out.len() - 4
        );
        let (method, got, attributes) = read_back(&out);
        assert_eq!(method, 2, "GET's code");
        assert_eq!(got[0], (b"host".to_vec(), b"shop.example".to_vec()));
        assert_eq!(got[2], (b"X-Custom".to_vec(), b"1".to_vec()));
        let has = |code: u8, name: &[u8], value: &[u8]| {
            attributes
                .iter()
                .any(|(c, n, v)| *c == code && n == name && v == value)
        };
        assert!(has(QUERY_STRING, b"", b"id=1"));
        assert!(has(ROUTE, b"", b"tc1"));
        assert!(has(SSL_CIPHER, b"", b"TLS_AES_128_GCM_SHA256"));
        assert!(has(SSL_KEY_SIZE, b"", b"128"));
        assert!(has(SECRET, b"", b"s3cret"));
        assert!(has(REQ_ATTRIBUTE, b"AJP_REMOTE_PORT", b"40123"));
        assert!(has(REQ_ATTRIBUTE, b"AJP_LOCAL_ADDR", b"10.0.0.1"));
        assert!(has(REQ_ATTRIBUTE, b"AJP_SSL_PROTOCOL", b"TLSv1.3"));
    }

    #[test]
    fn a_method_without_a_code_is_stored() {
        let mut out = Vec::new();
        let none: [(&[u8], &[u8]); 0] = [];
        forward_request(
            &mut out,
            &request(b"PATCH", None),
            || none.into_iter(),
            8192,
        )
        .unwrap();
        let (method, _, attributes) = read_back(&out);
        assert_eq!(method, METHOD_STORED);
        assert!(attributes.contains(&(STORED_METHOD, Vec::new(), b"PATCH".to_vec())));
    }

    #[test]
    fn a_head_past_the_packet_size_is_refused_not_cut() {
        let mut out = b"kept".to_vec();
        let cookie = vec![b'c'; 9000];
        let fields = [(&b"Cookie"[..], &cookie[..])];
        let r = forward_request(
            &mut out,
            &request(b"GET", None),
            || fields.into_iter(),
            8192,
        );
        assert_eq!(r, Err(TooLarge));
        assert_eq!(out, b"kept");
        // With Tomcat's largest packet size it fits.
        forward_request(
            &mut out,
            &request(b"GET", None),
            || fields.into_iter(),
            65536,
        )
        .unwrap();
    }

    #[test]
    fn body_packets_carry_their_length_and_the_empty_one_ends_the_body() {
        let mut out = Vec::new();
        body_packet(&mut out, b"hello", DEFAULT_PACKET_SIZE).unwrap();
        assert_eq!(out, [0x12, 0x34, 0, 7, 0, 5, b'h', b'e', b'l', b'l', b'o']);
        assert!(body_packet(&mut out, &[0; 8190], DEFAULT_PACKET_SIZE).is_err());
        assert_eq!(body_packet_header(5), [0x12, 0x34, 0, 7, 0, 5]);
        assert_eq!(END_OF_BODY, [0x12, 0x34, 0, 0]);
    }
}
