//! AJP packets: to the server `0x12 0x34`, from it `A B`, each then a big-endian 2-byte
//! payload length; in the payload, integers are 2 bytes big-endian, and strings a 2-byte
//! length, the bytes and a NUL the length does not count (`0xFFFF`: no string).

/// A packet's size by default (Tomcat's `packetSize`, mod_jk's `max_packet_size`).
pub const DEFAULT_PACKET_SIZE: usize = 8 * 1024;

/// The largest packet size either side may be set to.
pub const MAX_PACKET_SIZE: usize = 64 * 1024;

/// The 4 bytes before a payload.
pub const HEADER: usize = 4;

/// A message that does not fit the packet size: refused, never truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

/// A packet from the server that breaks the protocol, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// A packet to the server being written at the end of a buffer.
pub struct Writer<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    max: usize,
}

impl<'a> Writer<'a> {
    /// A packet of at most `max` bytes (header included), appended to `out`.
    pub fn new(out: &'a mut Vec<u8>, max: usize) -> Self {
        let start = out.len();
        out.extend_from_slice(&[0x12, 0x34, 0, 0]);
        Writer { out, start, max }
    }

    pub fn byte(&mut self, b: u8) {
        self.out.push(b);
    }

    pub fn int(&mut self, n: u16) {
        self.out.extend_from_slice(&n.to_be_bytes());
    }

    pub fn bool(&mut self, b: bool) {
        self.out.push(u8::from(b));
    }

    /// A string; one of 0xFFFF bytes or more cannot be written (0xFFFF means none), and
    /// the packet is then too large anyway.
    pub fn string(&mut self, s: &[u8]) {
        let len = u16::try_from(s.len()).unwrap_or(u16::MAX - 1);
        self.int(len);
        self.out.extend_from_slice(&s[..usize::from(len)]);
        self.out.push(0);
    }

    /// No string (`0xFFFF`).
    pub fn none(&mut self) {
        self.int(0xFFFF);
    }

    /// Raw bytes (a body packet's data, after its length).
    pub fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    /// Ends the packet (its length written), or takes it back out of the buffer when it
    /// is larger than the packet size.
    pub fn finish(self) -> Result<(), TooLarge> {
        let len = self.out.len() - self.start;
        if len > self.max || len - HEADER > usize::from(u16::MAX) {
            self.out.truncate(self.start);
            return Err(TooLarge);
        }
        let payload = ((len - HEADER) as u16).to_be_bytes();
        self.out[self.start + 2..self.start + 4].copy_from_slice(&payload);
        Ok(())
    }
}

/// The first packet from the server in `buf`: `Ok(Some(payload range))` when it is whole,
/// `Ok(None)` when more bytes are needed, an error for a wrong magic or a length past
/// `max` (the packet size, header included).
pub fn frame(buf: &[u8], max: usize) -> Result<Option<std::ops::Range<usize>>, Malformed> {
    if buf.len() >= 2 && &buf[..2] != b"AB" {
        return Err(Malformed("a packet that does not start with AB"));
    }
    if buf.len() < HEADER {
        return Ok(None);
    }
    let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    if len + HEADER > max {
        return Err(Malformed("a packet larger than the packet size"));
    }
    if len == 0 {
        return Err(Malformed("an empty packet"));
    }
    match buf.len() >= HEADER + len {
        true => Ok(Some(HEADER..HEADER + len)),
        false => Ok(None),
    }
}

/// A payload being read; every read is bounded by it.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, at: 0 }
    }

    pub fn byte(&mut self) -> Result<u8, Malformed> {
        let b = *self
            .buf
            .get(self.at)
            .ok_or(Malformed("a packet cut short"))?;
        self.at += 1;
        Ok(b)
    }

    pub fn int(&mut self) -> Result<u16, Malformed> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or(Malformed("a length past the packet's end"))?;
        let b = &self.buf[self.at..end];
        self.at = end;
        Ok(b)
    }

    /// A string (`None`: the null string), with its NUL checked.
    pub fn string(&mut self) -> Result<Option<&'a [u8]>, Malformed> {
        let len = self.int()?;
        if len == 0xFFFF {
            return Ok(None);
        }
        let s = self.bytes(usize::from(len))?;
        if self.byte()? != 0 {
            return Err(Malformed("a string without its NUL"));
        }
        Ok(Some(s))
    }

    /// Bytes not read yet.
    pub fn left(&self) -> usize {
        self.buf.len() - self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_is_framed_with_its_length_and_refused_past_the_packet_size() {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, DEFAULT_PACKET_SIZE);
        w.byte(2);
        w.string(b"GET");
        w.none();
        w.finish().unwrap();
        assert_eq!(
            out,
            [0x12, 0x34, 0, 9, 2, 0, 3, b'G', b'E', b'T', 0, 0xFF, 0xFF]
        );
        let mut w = Writer::new(&mut out, 16);
        w.bytes(&[0; 13]);
        assert_eq!(w.finish(), Err(TooLarge));
        assert_eq!(out.len(), 13, "a packet too large is taken back out");
    }

    #[test]
    fn the_servers_packets_are_taken_whole_or_refused() {
        assert_eq!(frame(b"AB", 8192), Ok(None));
        assert_eq!(frame(b"AB\x00\x02\x09", 8192), Ok(None));
        assert_eq!(frame(b"AB\x00\x01\x09rest", 8192), Ok(Some(4..5)));
        assert!(frame(b"XY\x00\x01\x09", 8192).is_err());
        assert!(
            frame(b"AB\x20\x00", 8192).is_err(),
            "8 KiB payload past 8 KiB"
        );
        assert!(frame(b"AB\x00\x00", 8192).is_err());
    }

    #[test]
    fn reads_stop_at_the_payloads_end() {
        let mut r = Reader::new(&[0, 5, b'a', b'b']);
        assert!(r.string().is_err());
        let mut r = Reader::new(&[0, 2, b'a', b'b', 1]);
        assert!(r.string().is_err(), "no NUL");
        let mut r = Reader::new(&[0xFF, 0xFF, 0, 1, b'x', 0]);
        assert_eq!(r.string(), Ok(None));
        assert_eq!(r.string(), Ok(Some(&b"x"[..])));
        assert!(r.byte().is_err());
    }
}
