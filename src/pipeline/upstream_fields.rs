//! The fields of the head tether sends upstream, as its edits (`X-Forwarded-*`, the
//! `SSLValve` and `$WS*` fields) write them: into Pingora's `RequestHeader` on
//! pingora-proxy's path, or straight into the wire buffer on tether's own HTTP/1 engine.
//! One implementation of each edit serves both.

use http::HeaderValue;
use pingora_http::RequestHeader;

pub trait UpstreamFields {
    /// The value of the field `name` (lower case) as it stands: the client's, or one set.
    fn get(&self, name: &str) -> Option<&[u8]>;
    /// Sets `name` to `value`, replacing the fields of that name.
    fn set(&mut self, name: &'static str, value: &[u8]);
    /// [`Self::set`] with a value that needs no copy.
    fn set_static(&mut self, name: &'static str, value: &'static str);
    /// [`Self::set`] with a name from the config.
    fn set_named(&mut self, name: &str, value: &[u8]);
    /// Adds `value` to the list in `name` (`old, value`), or sets it.
    fn append_list(&mut self, name: &'static str, value: &[u8]);
    /// Sets `to` to the value of `from` (lower case): false when there is no `from`.
    fn copy_field(&mut self, from: &str, to: &'static str) -> bool;
    /// Removes every field called `name`.
    fn remove(&mut self, name: &str);
}

impl UpstreamFields for RequestHeader {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.headers.get(name).map(|v| v.as_bytes())
    }

    fn set(&mut self, name: &'static str, value: &[u8]) {
        if let Ok(v) = HeaderValue::from_bytes(value) {
            let _ = self.insert_header(name, v);
        }
    }

    fn set_static(&mut self, name: &'static str, value: &'static str) {
        let _ = self.insert_header(name, HeaderValue::from_static(value));
    }

    fn set_named(&mut self, name: &str, value: &[u8]) {
        if let Ok(v) = HeaderValue::from_bytes(value) {
            let _ = self.insert_header(name.to_string(), v);
        }
    }

    fn append_list(&mut self, name: &'static str, value: &[u8]) {
        let joined = match self.headers.get(name) {
            Some(old) if !old.is_empty() => {
                let mut joined = Vec::with_capacity(old.len() + 2 + value.len());
                joined.extend_from_slice(old.as_bytes());
                joined.extend_from_slice(b", ");
                joined.extend_from_slice(value);
                HeaderValue::from_maybe_shared(bytes::Bytes::from(joined))
            }
            _ => HeaderValue::from_bytes(value),
        };
        if let Ok(v) = joined {
            let _ = self.insert_header(name, v);
        }
    }

    fn copy_field(&mut self, from: &str, to: &'static str) -> bool {
        let Some(value) = self.headers.get(from).cloned() else {
            return false;
        };
        let _ = self.insert_header(to, value);
        true
    }

    fn remove(&mut self, name: &str) {
        self.remove_header(name);
    }
}
