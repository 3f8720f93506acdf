//! tether's own accept loop, for the plain-TCP listeners of its HTTP/1 engine: the
//! listening socket is bound (or, in a graceful upgrade, taken from the old process)
//! through Pingora's table of listening sockets, under the key Pingora's own listeners use,
//! so an upgrade hands it over either way; each accepted socket goes to the [`Listener`]
//! as a [`TcpClient`], in a task on one of the server's threads picked at random (as
//! Pingora's accept does), without Pingora's per-connection stream and digest.
//!
//! The socket is registered with the reactor of the thread that serves it ([`accept_for`]),
//! not with the accepting thread's: each thread of Pingora's default runtime has a reactor
//! of its own, and a connection whose readiness another thread's reactor reports costs that
//! thread a wake-up and a cross-thread wake of the serving one for every event.
//!
//! The loop also keeps its listener's idle connections ([`Park`]): a plain connection that
//! waits for its next request past the engine's grace is sent here and its task ends; when
//! its next bytes come it is handed on as a new connection is, to a thread picked at random,
//! to go on with its requests.

use super::park::{Out, Park};
use super::tcp::TcpClient;
use super::{Listener, Resume, ToPark};
use crate::front::engine::IDLE_READ;
use async_trait::async_trait;
use log::{error, info};
use pingora_core::server::{ListenFds, ShutdownWatch};
use pingora_core::services::Service;
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::runtime::Handle;

/// The kernel's accept queue, as Pingora's listeners ask for it.
const BACKLOG: u32 = 65535;

/// How long accepting pauses when the process is out of file descriptors (EMFILE), so
/// that the loop does not spin while connections close.
const OUT_OF_FDS_PAUSE: Duration = Duration::from_secs(1);

pub struct AcceptLoop {
    name: String,
    address: SocketAddr,
    listener: Option<Arc<Listener>>,
}

impl AcceptLoop {
    pub fn new(name: String, address: SocketAddr, listener: Listener) -> AcceptLoop {
        AcceptLoop {
            name,
            address,
            listener: Some(Arc::new(listener)),
        }
    }
}

/// The listening socket: the one the old process handed over under `key`, or a new one
/// (then put in the table for the next upgrade).
fn listen(address: SocketAddr, key: &str, fds: Option<&ListenFds>) -> std::io::Result<TcpListener> {
    let handed = fds.and_then(|table| table.lock().get(key).copied());
    let socket = match handed {
        // SAFETY: the table's descriptors are listening sockets this process owns, each
        // taken by the one service that listens on its address.
        Some(fd) => TcpSocket::from_std_stream(unsafe { std::net::TcpStream::from_raw_fd(fd) }),
        None => {
            let socket = match address {
                SocketAddr::V4(_) => TcpSocket::new_v4()?,
                SocketAddr::V6(_) => TcpSocket::new_v6()?,
            };
            socket.set_reuseaddr(true)?;
            socket.bind(address)?;
            socket
        }
    };
    // On a socket already listening (handed over), this only sets the backlog.
    let listener = socket.listen(BACKLOG)?;
    if handed.is_none() {
        if let Some(table) = fds {
            table.lock().add(key.to_string(), listener.as_raw_fd());
        }
    }
    Ok(listener)
}

/// The next connection on `socket`, its socket registered with the reactor of `serving`
/// (the runtime whose thread will serve it): tokio registers a new socket with the runtime
/// entered when it is made, which is the accepting thread's unless another is entered.
pub async fn accept_for(
    socket: &TcpListener,
    serving: &Handle,
) -> std::io::Result<(TcpStream, SocketAddr)> {
    std::future::poll_fn(|cx| {
        let _serving = serving.enter();
        socket.poll_accept(cx)
    })
    .await
}

impl AcceptLoop {
    /// A new connection, in a task on `serving`'s thread.
    async fn serve(
        &self,
        app: &Arc<Listener>,
        accepted: std::io::Result<(TcpStream, SocketAddr)>,
        serving: &Handle,
    ) {
        match accepted {
            Ok((io, peer)) => {
                let _ = io.set_nodelay(true);
                let stream = Box::new(TcpClient::new(io, peer));
                serving.spawn(app.clone().task(stream));
            }
            Err(e) => {
                error!("{}: accept() failed: {e}", self.name);
                if e.raw_os_error() == Some(libc::EMFILE) {
                    tokio::time::sleep(OUT_OF_FDS_PAUSE).await;
                }
            }
        }
    }

    /// A connection out of the park. Its first bytes are read here: with some, it goes on
    /// with its requests on `serving`'s thread, its socket registered with that thread's
    /// reactor; at its client's end (or a reset) it is closed, with no task or buffer made
    /// for it; with none yet it is given back, to be parked again. One whose deadline
    /// passed is closed and counted as an idle connection that timed out is.
    async fn unpark(
        &self,
        app: &Arc<Listener>,
        out: std::io::Result<Out<Resume>>,
        serving: &Handle,
    ) -> Option<ToPark> {
        match out {
            Ok(Out::Readable {
                mut socket,
                until,
                with,
            }) => {
                let mut first = [0u8; IDLE_READ];
                let n = match socket.read(&mut first) {
                    Ok(0) => return None,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        return Some((socket, until, with));
                    }
                    Err(_) => return None,
                };
                let io = {
                    let _serving = serving.enter();
                    TcpStream::from_std(socket)
                };
                match io {
                    Ok(io) => {
                        serving.spawn(app.clone().resumed(io, until, with, &first[..n]));
                    }
                    Err(e) => error!(
                        "{}: a parked connection could not be served: {e}",
                        self.name
                    ),
                }
            }
            Ok(Out::Expired { .. }) => {
                crate::metrics::client_closed(&app.name, "request_head_timeout");
            }
            Err(e) => {
                // Not seen in practice (the park's epoll set failed): a pause, so that a
                // lasting failure does not spin the loop.
                error!("{}: parked connections: {e}", self.name);
                tokio::time::sleep(OUT_OF_FDS_PAUSE).await;
            }
        }
        None
    }
}

#[async_trait]
impl Service for AcceptLoop {
    async fn start_service(
        &mut self,
        fds: Option<ListenFds>,
        mut shutdown: ShutdownWatch,
        _listeners_per_fd: usize,
    ) {
        let app = self.listener.take().expect("a service starts once");
        let key = self.address.to_string();
        // The address was checked free before the server started (`bind_check`); failing
        // here is as Pingora's listeners fail.
        let socket = listen(self.address, &key, fds.as_ref())
            .unwrap_or_else(|e| panic!("cannot listen on {key}: {e}"));
        app.watch_stop(&shutdown);
        let (to_park, mut parked) = tokio::sync::mpsc::unbounded_channel::<ToPark>();
        // Without a park (the kernel refused an epoll set), idle connections wait in
        // their tasks.
        let mut park = Park::new()
            .inspect_err(|e| error!("{}: idle connections not parked: {e}", self.name))
            .ok();
        if park.is_some() {
            app.park_in(to_park);
        }
        let parked_gauge = crate::metrics::engine_parked(&app.name);
        loop {
            let serving = pingora_runtime::current_handle();
            let next_parked = async {
                match park.as_mut() {
                    Some(park) => park.next().await,
                    None => std::future::pending().await,
                }
            };
            let to_park = tokio::select! {
                accepted = accept_for(&socket, &serving) => {
                    self.serve(&app, accepted, &serving).await;
                    None
                }
                Some(to_park) = parked.recv() => Some(to_park),
                out = next_parked => self.unpark(&app, out, &serving).await,
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        info!("Shutting down {key}");
                        break;
                    }
                    continue;
                }
            };
            if let (Some(park), Some((socket, until, resume))) = (park.as_mut(), to_park) {
                if let Err(e) = park.put(socket, until, resume) {
                    error!("{}: an idle connection could not be parked: {e}", self.name);
                }
            }
            if let Some(park) = park.as_ref() {
                parked_gauge.set(park.len() as i64);
            }
        }
        // Parked connections close with the park, as idle ones close when the server stops;
        // so do those on their way to it, and any sent later (the channel is closed).
        drop(park);
        drop(parked);
        parked_gauge.set(0);
        drop(socket);
        pingora_core::apps::ServerApp::cleanup(&*app).await;
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn listen_addresses(&self) -> Option<Vec<String>> {
        Some(vec![self.address.to_string()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tokio::io::AsyncReadExt;
    use tokio::runtime::{Builder, Runtime};

    fn runtime() -> Runtime {
        Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// A client that connects to a new listener on an address the kernel picks, and the
    /// first bytes it sends.
    fn connect(socket: &TcpListener) -> std::net::TcpStream {
        let mut client = std::net::TcpStream::connect(socket.local_addr().unwrap()).unwrap();
        client.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        client
    }

    /// The accepted socket is the serving runtime's: its readiness comes from that
    /// runtime's reactor, and ends when that runtime does, though the accepting one goes on.
    #[test]
    fn an_accepted_socket_is_registered_with_the_serving_runtime() {
        let accepting = runtime();
        let serving = runtime();
        let (stream, _client) = accepting.block_on(async {
            let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let client = connect(&socket);
            let (stream, _) = accept_for(&socket, serving.handle()).await.unwrap();
            (stream, client)
        });
        drop(serving);
        let ready = accepting.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), stream.readable()).await
        });
        let Ok(Err(gone)) = ready else {
            panic!("the socket's readiness outlived the serving runtime: {ready:?}");
        };
        assert!(gone.to_string().contains("shut"), "{gone}");
    }

    /// ... and served there: the runtime it was accepted for reads its bytes.
    #[test]
    fn the_serving_runtime_reads_an_accepted_socket() {
        let accepting = runtime();
        let serving = Builder::new_current_thread().enable_all().build().unwrap();
        let handle = serving.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driver = std::thread::spawn(move || serving.block_on(stopped));
        let first = accepting.block_on(async {
            let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let _client = connect(&socket);
            let (mut stream, _) = accept_for(&socket, &handle).await.unwrap();
            let read = handle.spawn(async move {
                let mut first = [0u8; 16];
                stream.read_exact(&mut first).await.map(|_| first)
            });
            tokio::time::timeout(Duration::from_secs(5), read).await
        });
        stop.send(()).unwrap();
        driver.join().unwrap().unwrap();
        assert_eq!(&first.unwrap().unwrap().unwrap(), b"GET / HTTP/1.1\r\n");
    }
}
