//! A file answer's body, sent without the request's thread ever waiting for the disk: reads
//! into memory try `RWF_NOWAIT` (served from the page cache, or refused at once) before
//! tokio's blocking pool reads; `sendfile`, which has no such flag, runs in the blocking
//! pool, a socket-buffer's worth at a time, the request's thread only waiting for the
//! socket to take more.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::{Errno, ReadWriteFlags};
use std::io::{self, IoSliceMut};
use std::sync::Arc;

/// Bytes read into memory at a time (for TLS, HTTP/2, pingora-proxy's path).
pub const CHUNK: usize = 64 * 1024;

/// The part of a file still to send.
#[derive(Debug)]
pub struct Body {
    file: Arc<OwnedFd>,
    offset: u64,
    remaining: u64,
}

impl Body {
    pub(super) fn new(file: OwnedFd, offset: u64, len: u64) -> Body {
        Body {
            file: Arc::new(file),
            offset,
            remaining: len,
        }
    }

    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    pub fn is_done(&self) -> bool {
        self.remaining == 0
    }

    /// Appends the next part (at most `max` bytes, at least one) to `out`. A file that
    /// shrank while it was sent is an error: the length was promised in the head.
    pub async fn read(&mut self, out: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        let want = max.min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let start = out.len();
        out.resize(start + want, 0);
        let nowait = rustix::io::preadv2(
            &*self.file,
            &mut [IoSliceMut::new(&mut out[start..])],
            self.offset,
            ReadWriteFlags::NOWAIT,
        );
        let n = match nowait {
            Ok(n) if n > 0 => n,
            Ok(_) | Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => {
                out.truncate(start);
                let (file, offset) = (self.file.clone(), self.offset);
                let read = tokio::task::spawn_blocking(move || {
                    let mut buf = vec![0; want];
                    let n = rustix::io::pread(&*file, &mut buf[..], offset)?;
                    buf.truncate(n);
                    Ok::<_, io::Error>(buf)
                })
                .await
                .map_err(io::Error::other)??;
                out.extend_from_slice(&read);
                read.len()
            }
            Err(e) => {
                out.truncate(start);
                return Err(e.into());
            }
        };
        out.truncate(start + n);
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.offset += n as u64;
        self.remaining -= n as u64;
        Ok(n)
    }

    /// Sends what the socket takes now (in the blocking pool), until it takes no more
    /// (`EAGAIN`) or the body is sent; `Ok(false)`: wait for the socket to be writable and
    /// call again.
    pub async fn send_round(&mut self, socket: &Arc<OwnedFd>) -> io::Result<bool> {
        let (file, socket) = (self.file.clone(), socket.clone());
        let (offset, remaining) = (self.offset, self.remaining);
        let sent =
            tokio::task::spawn_blocking(move || send(socket.as_fd(), &file, offset, remaining))
                .await
                .map_err(io::Error::other)??;
        self.offset += sent;
        self.remaining -= sent;
        Ok(self.remaining == 0)
    }
}

/// `sendfile` of up to `remaining` bytes from `offset` until the socket refuses more; the
/// bytes it took.
fn send(
    socket: BorrowedFd<'_>,
    file: &OwnedFd,
    mut offset: u64,
    remaining: u64,
) -> io::Result<u64> {
    let start = offset;
    let end = offset + remaining;
    while offset < end {
        let count = usize::try_from(end - offset)
            .unwrap_or(usize::MAX)
            .min(1 << 30);
        match rustix::fs::sendfile(socket, file, Some(&mut offset), count) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            Err(Errno::AGAIN) => break,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(offset - start)
}
