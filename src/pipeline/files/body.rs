//! A file answer's body, sent without the request's thread ever waiting for the disk: reads
//! into memory try `RWF_NOWAIT` (served from the page cache, or refused at once) before
//! tokio's blocking pool reads; `sendfile`, which has no such flag, runs on the request's
//! thread only for bytes the page cache holds (`cachestat`), in the blocking pool
//! otherwise, a socket-buffer's worth at a time.

use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::io::{Errno, ReadWriteFlags};
use std::io::{self, IoSliceMut};
use std::sync::atomic::{AtomicBool, Ordering};
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
        let n = match self.read_now(out, want)? {
            Some(n) => n,
            None => self.read_pooled(out, want).await?,
        };
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.offset += n as u64;
        self.remaining -= n as u64;
        Ok(n)
    }

    /// Up to `want` bytes from the page cache, appended to `out`; `None` when they are not
    /// all there (or the file system cannot say without waiting).
    fn read_now(&self, out: &mut Vec<u8>, want: usize) -> io::Result<Option<usize>> {
        let start = out.len();
        out.resize(start + want, 0);
        let nowait = rustix::io::preadv2(
            &*self.file,
            &mut [IoSliceMut::new(&mut out[start..])],
            self.offset,
            ReadWriteFlags::NOWAIT,
        );
        let n = match nowait {
            Ok(n) if n > 0 => Some(n),
            Ok(_) | Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => None,
            Err(e) => {
                out.truncate(start);
                return Err(e.into());
            }
        };
        out.truncate(start + n.unwrap_or(0));
        Ok(n)
    }

    /// Up to `want` bytes read in tokio's blocking pool, appended to `out`.
    async fn read_pooled(&self, out: &mut Vec<u8>, want: usize) -> io::Result<usize> {
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
        Ok(read.len())
    }

    /// Does the page cache hold all that is left to send? Then `sendfile` copies from
    /// memory and [`Body::send_now`] may run on the request's thread. `false` when the
    /// kernel cannot say (`cachestat` is Linux 6.5's).
    pub fn cached(&self) -> bool {
        cached(&self.file, self.offset, self.remaining)
    }

    /// Sends what the socket takes now, on this thread (for a body the page cache holds:
    /// [`Body::cached`]); `Ok(true)` once the body is sent, `Ok(false)` when the socket
    /// takes no more for now.
    pub fn send_now(&mut self, socket: BorrowedFd<'_>) -> io::Result<bool> {
        let sent = send(socket, &self.file, self.offset, self.remaining)?;
        self.offset += sent;
        self.remaining -= sent;
        Ok(self.remaining == 0)
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

/// The kernel has no `cachestat` (before Linux 6.5): every body is sent from the pool.
static NO_CACHESTAT: AtomicBool = AtomicBool::new(false);

/// `cachestat(2)`'s number on every architecture (it is in the common syscall table).
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Are all pages of `file`'s bytes `offset..offset + len` in the page cache?
fn cached(file: &OwnedFd, offset: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    if NO_CACHESTAT.load(Ordering::Relaxed) {
        return false;
    }
    let range = CachestatRange { off: offset, len };
    let mut stat = Cachestat::default();
    // SAFETY: the descriptor is open (borrowed from `file`), and both structures are the
    // kernel's layout, alive for the call.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if r != 0 {
        if io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            NO_CACHESTAT.store(true, Ordering::Relaxed);
        }
        return false;
    }
    const PAGE: u64 = 4096;
    let pages = (offset + len).div_ceil(PAGE) - offset / PAGE;
    stat.nr_cache >= pages
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn file(bytes: &[u8]) -> OwnedFd {
        let path = std::env::temp_dir().join(format!("tether-body-{}", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
        let f = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        f.into()
    }

    #[tokio::test]
    async fn the_pool_reads_what_the_cache_would() {
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let body = Body::new(file(&bytes), 1000, 150_000);
        let (mut now, mut pooled) = (b"head".to_vec(), b"head".to_vec());
        let n = body.read_now(&mut now, 70_000).unwrap();
        assert_eq!(n, Some(70_000), "a file just written is in the page cache");
        assert_eq!(body.read_pooled(&mut pooled, 70_000).await.unwrap(), 70_000);
        assert_eq!(now, pooled);
        assert_eq!(&now[4..], &bytes[1000..71_000]);
    }

    #[tokio::test]
    async fn a_body_reads_its_range_then_ends() {
        let bytes = vec![7u8; 10_000];
        let mut body = Body::new(file(&bytes), 9_000, 1_000);
        let mut out = Vec::new();
        while !body.is_done() {
            body.read(&mut out, 300).await.unwrap();
        }
        assert_eq!(out.len(), 1_000);
        // A file shorter than the length promised is an error, not a short answer.
        let mut short = Body::new(file(&bytes), 9_500, 1_000);
        let mut out = Vec::new();
        assert_eq!(short.read(&mut out, 1_000).await.unwrap(), 500);
        let end = short.read(&mut out, 1_000).await.unwrap_err();
        assert_eq!(end.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn sendfile_stops_when_the_socket_is_full_and_goes_on_after() {
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        let f = file(&bytes);
        let (tx, mut rx) = std::os::unix::net::UnixStream::pair().unwrap();
        tx.set_nonblocking(true).unwrap();
        let socket: OwnedFd = tx.into();
        let (mut offset, mut got) = (0u64, Vec::new());
        let mut rounds = 0;
        while offset < bytes.len() as u64 {
            let sent = send(socket.as_fd(), &f, offset, bytes.len() as u64 - offset).unwrap();
            offset += sent;
            rounds += 1;
            let mut buf = vec![0; 1 << 20];
            while got.len() < offset as usize {
                let n = rx.read(&mut buf).unwrap();
                got.extend_from_slice(&buf[..n]);
            }
        }
        assert!(rounds > 1, "a socket's buffer holds less than 3 MB");
        assert!(got == bytes);
    }

    #[tokio::test]
    async fn the_cache_check_sees_pages_dropped_and_read_again() {
        let bytes = vec![1u8; 256 * 1024];
        let f = file(&bytes);
        rustix::fs::fsync(&f).unwrap();
        let body = Body::new(f, 0, bytes.len() as u64);
        assert!(body.cached(), "written just now");
        if NO_CACHESTAT.load(Ordering::Relaxed) {
            return; // a kernel before 6.5: every body goes through the pool
        }
        let advice = rustix::fs::Advice::DontNeed;
        rustix::fs::fadvise(&*body.file, 0, None, advice).unwrap();
        assert!(!body.cached(), "its clean pages dropped");
        let mut out = Vec::new();
        let mut again = Body::new(rustix::io::dup(&*body.file).unwrap(), 0, bytes.len() as u64);
        while !again.is_done() {
            out.clear();
            again.read(&mut out, CHUNK).await.unwrap();
        }
        assert!(body.cached(), "read again");
    }
}
