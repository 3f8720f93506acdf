//! The service manager's end of `NOTIFY_SOCKET` for the tests of systemd's notifications:
//! a Unix datagram socket bound with `SO_PASSCRED`, as systemd binds it, so each message
//! comes with the pid that sent it.

use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::path::Path;
use std::time::{Duration, Instant};

/// The service manager's end: a datagram socket that reports each sender's pid.
pub struct NotifySocket {
    socket: UnixDatagram,
    /// The value of `NOTIFY_SOCKET` that names it.
    pub name: String,
}

impl NotifySocket {
    pub fn at_path(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        NotifySocket::with_credentials(socket, path.display().to_string())
    }

    pub fn in_abstract_namespace(tag: &str) -> NotifySocket {
        let name = format!("tether-test-{}-{tag}", std::process::id());
        let address = UnixAddr::from_abstract_name(name.as_bytes()).unwrap();
        let socket = UnixDatagram::bind_addr(&address).unwrap();
        NotifySocket::with_credentials(socket, format!("@{name}"))
    }

    pub fn with_credentials(socket: UnixDatagram, name: String) -> NotifySocket {
        let one: libc::c_int = 1;
        // SAFETY: setsockopt on a socket this test owns, with a c_int option value.
        let r = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PASSCRED,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "SO_PASSCRED: {}", std::io::Error::last_os_error());
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        NotifySocket { socket, name }
    }

    /// The next message and the pid that sent it, or None after the read timeout.
    pub fn recv(&self) -> Option<(i32, String)> {
        let mut buf = [0u8; 4096];
        // u64s: the control buffer must be aligned for `cmsghdr`.
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: recvmsg into buffers that outlive the call, with their true lengths; the
        // control messages are walked with the CMSG macros within `msg_controllen`.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control);
            let n = libc::recvmsg(self.socket.as_raw_fd(), &mut msg, 0);
            if n < 0 {
                return None;
            }
            let mut pid = 0;
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET
                    && (*cmsg).cmsg_type == libc::SCM_CREDENTIALS
                {
                    let cred: libc::ucred = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    pid = cred.pid;
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
            Some((
                pid,
                String::from_utf8_lossy(&buf[..n as usize]).into_owned(),
            ))
        }
    }

    /// Waits up to `timeout` for a message from `pid` with the line `line`; the messages
    /// read meanwhile are returned too (the last one is the match).
    pub fn wait_for(&self, pid: i32, line: &str, timeout: Duration) -> Vec<(i32, String)> {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            if let Some((from, text)) = self.recv() {
                let matched = from == pid && text.lines().any(|l| l == line);
                seen.push((from, text));
                if matched {
                    return seen;
                }
            }
        }
        panic!("no {line} from pid {pid} in {timeout:?}; received: {seen:?}");
    }
}
