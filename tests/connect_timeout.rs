//! A server that takes no connection within `connect_timeout` (its accept queue full: the
//! kernel drops the SYN) is a gateway timeout, 504, on every front end, as nginx and
//! HAProxy answer it; a server that refuses the connection is a bad gateway, 502.

mod common;

use common::{Opts, Tether};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A listener that never accepts, its queue filled: a new connection to it waits until
/// the client gives up. The queue's connections are returned to keep it full.
fn full_listener() -> (tokio::net::TcpListener, SocketAddr, Vec<TcpStream>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => held.push(s),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break,
            Err(e) => panic!("filling the queue: {e}"),
        }
        assert!(Instant::now() < deadline, "the queue never filled");
    }
    (listener, addr, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_that_times_out_is_504_and_a_refused_one_502() {
    let (_listener, full, _held) = full_listener();
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let cluster = |addr: SocketAddr| {
        format!(
            "    connect_timeout: 300ms\n    retry_on: []\n    servers:\n      - {{ name: a, address: \"{addr}\", route: a }}\n"
        )
    };
    // A tether of its own for each request: a failed connect marks the server down, and
    // the next request would be refused (503) without a try.
    let start = |addr| {
        Tether::start_with(Opts {
            cluster: cluster(addr),
            listener_extra: "    h2c: true\n".into(),
            ..Opts::default()
        })
    };
    for (addr, status) in [(full, 504), (refused, 502)] {
        let t = start(addr);
        let r = t.client().get("/", &[]).await.unwrap();
        assert_eq!(r.status, status, "HTTP/1.1 to {addr}");
        let t = start(addr);
        let out = std::process::Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--http2-prior-knowledge",
            ])
            .arg(format!("http://{}/", t.addr))
            .output()
            .unwrap();
        let got = String::from_utf8_lossy(&out.stdout);
        assert_eq!(got, status.to_string(), "HTTP/2 to {addr}");
    }
}
