//! The servers a request has already been sent to, kept inline in the request context.

use crate::config::MAX_ATTEMPTS_LIMIT;

const CAP: usize = MAX_ATTEMPTS_LIMIT as usize;

/// A small inline set of server indices; no heap.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tried {
    ids: [u32; CAP],
    len: u8,
}

impl Tried {
    pub fn contains(&self, server: usize) -> bool {
        self.ids[..self.len as usize].contains(&(server as u32))
    }

    /// Records `server`; ignored when full (`max_attempts` stops retries before that).
    pub fn push(&mut self, server: usize) {
        if (self.len as usize) < CAP && !self.contains(server) {
            self.ids[self.len as usize] = server as u32;
            self.len += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
