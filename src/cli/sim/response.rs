//! The response type returned by the test client, with helpers for the assertions tests make.

use super::wire;

/// A complete response; header names are lower-cased, values kept as raw bytes.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Response {
    /// First header with this name (case-insensitive), if its value is UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        let (_, value) = self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))?;
        std::str::from_utf8(value).ok()
    }

    /// All values of a header, in order (case-insensitive name).
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        wire::values(&self.headers, name)
    }

    /// The value of `cookie_name` from the first Set-Cookie that sets it.
    pub fn set_cookie(&self, cookie_name: &str) -> Option<String> {
        self.headers_named("set-cookie").find_map(|value| {
            let pair = value.split(|&b| b == b';').next()?;
            let (name, value) = std::str::from_utf8(pair).ok()?.split_once('=')?;
            (name.trim() == cookie_name).then(|| value.trim().to_string())
        })
    }

    /// The body as text, or "" if it is not UTF-8.
    pub fn body_str(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap_or("")
    }
}
