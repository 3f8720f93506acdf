//! A kept-alive connection that waits past the engine's grace (a second) gives its buffers
//! and its request's future back (memory per idle connection). Over TLS it waits
//! in a small future of its own, and its next request must still come through that wait
//! whole: BoringSSL hands the wait's first read a record's bytes and keeps the rest. On
//! plain TCP its task ends and its socket is parked in the listener's accept loop
//! (`tether_engine_parked_connections`) until its next bytes, its client's end, its
//! deadline or the server's stop.

mod common;

use common::pki::Pki;
use common::{scratch_dir, server_line, tomcats, Opts, Tether};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Reads one answer (head and `Content-Length` body) from `conn`: its status line.
fn answer(conn: &mut impl Read) -> String {
    head(conn).lines().next().unwrap().to_string()
}

/// Reads one answer (head and `Content-Length` body): its head.
fn head(conn: &mut impl Read) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(
            conn.read(&mut byte).unwrap(),
            1,
            "closed in a head: {got:?}"
        );
        got.push(byte[0]);
    }
    let head = String::from_utf8(got).unwrap();
    let mut body = vec![0; field(&head, "content-length").parse().unwrap()];
    conn.read_exact(&mut body).unwrap();
    head
}

fn field(head: &str, name: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no {name} in {head}"))
}

/// Three requests on `conn`, waiting past the grace after the first two: their statuses.
/// The second is longer than the wait's first read.
fn idle_between_requests(conn: &mut (impl Read + Write)) -> Vec<String> {
    let long = format!(
        "GET /2 HTTP/1.1\r\nHost: a.test\r\nX-Long: {}\r\n\r\n",
        "v".repeat(9000)
    );
    let mut statuses = Vec::new();
    for (request, pause) in [
        ("GET /1 HTTP/1.1\r\nHost: a.test\r\n\r\n".to_string(), 1500),
        (long, 1500),
        ("GET /3 HTTP/1.1\r\nHost: a.test\r\n\r\n".to_string(), 0),
    ] {
        conn.write_all(request.as_bytes()).unwrap();
        statuses.push(answer(conn));
        std::thread::sleep(Duration::from_millis(pause));
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_connection_idle_past_the_grace_serves_its_next_requests() {
    let dir = scratch_dir("engine-idle-tls");
    let pki = Pki::new(&dir);
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        listener_extra: pki.listener_tls(),
        metrics: true,
        ..Opts::default()
    });
    let addr = t.addr;
    let client = tokio::task::spawn_blocking(move || {
        let mut c = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
        c.set_verify(boring::ssl::SslVerifyMode::NONE);
        let tcp = TcpStream::connect(addr).unwrap();
        let mut tls = c.build().connect("a.test", tcp).unwrap();
        idle_between_requests(&mut tls)
    });
    let statuses = client.await.unwrap();
    assert_eq!(statuses, ["HTTP/1.1 200 OK"; 3]);
    // All three on the one connection: one handshake.
    let scrape = common::scrape(t.metrics.unwrap()).await;
    assert!(
        scrape.contains(r#"tether_tls_handshakes_total{listener="web",result="ok"} 1"#),
        "{scrape}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The same on plain TCP, where the connection's whole record is given back while it waits
/// and made again around the wait's first read (a request longer than that read too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_connection_idle_past_the_grace_serves_its_next_requests() {
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        ..Opts::default()
    });
    let addr = t.addr;
    let statuses = tokio::task::spawn_blocking(move || {
        idle_between_requests(&mut TcpStream::connect(addr).unwrap())
    })
    .await
    .unwrap();
    assert_eq!(statuses, ["HTTP/1.1 200 OK"; 3]);
}

/// tether on its engine (whichever path `TETHER_HTTP1` picks for the others), with its
/// metrics, in front of `servers` (YAML list items), with more fields of the listener and
/// of `server:`.
fn on_engine(servers: String, listener: &str, server: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("    servers:\n{servers}"),
        metrics: true,
        listener_extra: format!("    http1: engine\n{listener}"),
        server_extra: server.to_string(),
        ..Opts::default()
    })
}

/// The value of `series` (its name and labels, as printed) in a scrape.
async fn scraped(metrics: SocketAddr, series: &str) -> Option<i64> {
    let scrape = common::scrape(metrics).await;
    let prefix = format!("{series} ");
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim().parse().unwrap())
}

/// `tether_engine_parked_connections` of listener `web` in a scrape.
async fn parked(metrics: SocketAddr) -> i64 {
    let series = "tether_engine_parked_connections{listener=\"web\"}";
    scraped(metrics, series).await.unwrap_or(0)
}

/// Waits up to 3 s for the parked count to be `n`: the count it ended at.
async fn parked_becomes(metrics: SocketAddr, n: i64) -> i64 {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let now = parked(metrics).await;
        if now == n || Instant::now() > until {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Many connections idle at once are parked (their tasks end), and each one's next request
/// comes back on it, for its own session, on the server that holds it; three times over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_plain_connections_are_parked_and_each_served_again_as_its_own() {
    let sims = tomcats(2).await;
    let servers: String = sims.iter().map(|s| server_line(s, "")).collect();
    let t = on_engine(servers, "", "");
    let (addr, metrics) = (t.addr, t.metrics.unwrap());
    const N: usize = 40;
    let mut conns = sessions(addr, N).await;
    // Three times over: parked, woken in turn (the last parked first, then the first),
    // parked.
    for round in 2..=4 {
        assert_eq!(
            parked_becomes(metrics, N as i64).await,
            N as i64,
            "round {round}"
        );
        conns.reverse();
        let (back, answers) = again(conns).await;
        conns = back;
        let expected: Vec<String> = conns
            .iter()
            .map(|(_, id)| format!("{id} {round}"))
            .collect();
        assert_eq!(answers, expected, "round {round}");
    }
    assert_eq!(sims.iter().map(|s| s.requests()).sum::<u64>(), 4 * N as u64);
    // Each connection was served again and waits in its task now (within the grace).
    assert_eq!(parked(metrics).await, 0);
}

/// A client that closes its parked connection frees it at once, not at its deadline (a
/// minute by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_connection_whose_client_closes_is_let_go_at_once() {
    let sims = tomcats(1).await;
    let t = on_engine(server_line(&sims[0], ""), "", "");
    let metrics = t.metrics.unwrap();
    let mut conn = TcpStream::connect(t.addr).unwrap();
    conn.write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .unwrap();
    head(&mut conn);
    assert_eq!(parked_becomes(metrics, 1).await, 1);
    drop(conn);
    assert_eq!(parked_becomes(metrics, 0).await, 0);
    // The listener goes on.
    assert_eq!(t.client().get("/", &[]).await.unwrap().status, 200);
}

/// A parked connection is closed when its next head's deadline passes (the keep-alive
/// timeout, then the head timeout), and counted as an idle connection that times out is;
/// and parked connections close when the server stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_connections_close_at_their_deadline_and_at_the_stop() {
    let sims = tomcats(1).await;
    let limits = "    limits:\n      keepalive_timeout: 2s\n      request_head_timeout: 1s\n";
    let t = on_engine(server_line(&sims[0], ""), limits, "");
    let metrics = t.metrics.unwrap();
    let ask = |addr| {
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
            .unwrap();
        head(&mut conn);
        conn
    };
    let mut conn = ask(t.addr);
    let asked = Instant::now();
    assert_eq!(parked_becomes(metrics, 1).await, 1);
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(conn.read(&mut [0u8; 1]).unwrap(), 0, "closed");
    // Due 3 s after the answer was sent, which the client read a moment later.
    let closed_after = asked.elapsed();
    assert!(
        closed_after >= Duration::from_millis(2500) && closed_after < Duration::from_secs(6),
        "{closed_after:?}"
    );
    // The socket is closed before the park's count is lowered: the client may see the
    // end first.
    assert_eq!(parked_becomes(metrics, 0).await, 0);
    let scrape = common::scrape(metrics).await;
    assert!(
        scrape.contains(
            "tether_client_closed_total{listener=\"web\",reason=\"request_head_timeout\"} 1"
        ),
        "{scrape}"
    );

    let mut conn = ask(t.addr);
    assert_eq!(parked_becomes(metrics, 1).await, 1);
    t.terminate();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(conn.read(&mut [0u8; 1]).unwrap(), 0, "closed at the stop");
}

/// `tether_engine_buffered_idle_connections` in a scrape.
async fn buffered(metrics: SocketAddr) -> i64 {
    let series = "tether_engine_buffered_idle_connections";
    scraped(metrics, series)
        .await
        .expect("the gauge of buffered idle connections")
}

/// `n` connections to `addr`, each with one request answered: the connection and its
/// session.
async fn sessions(addr: SocketAddr, n: usize) -> Vec<(TcpStream, String)> {
    tokio::task::spawn_blocking(move || {
        (0..n)
            .map(|_| {
                let mut conn = TcpStream::connect(addr).unwrap();
                conn.write_all(b"GET /a HTTP/1.1\r\nHost: a.test\r\n\r\n")
                    .unwrap();
                let id = field(&head(&mut conn), "x-session-id");
                (conn, id)
            })
            .collect()
    })
    .await
    .unwrap()
}

/// Each connection's next request, for its session: the session and count each answer
/// names.
async fn again(mut conns: Vec<(TcpStream, String)>) -> (Vec<(TcpStream, String)>, Vec<String>) {
    tokio::task::spawn_blocking(move || {
        let answers = conns
            .iter_mut()
            .map(|(conn, id)| {
                let request =
                    format!("GET /b HTTP/1.1\r\nHost: a.test\r\nCookie: JSESSIONID={id}\r\n\r\n");
                conn.write_all(request.as_bytes()).unwrap();
                let head = head(conn);
                format!(
                    "{} {}",
                    field(&head, "x-session-id"),
                    field(&head, "x-session-count")
                )
            })
            .collect();
        (conns, answers)
    })
    .await
    .unwrap()
}

/// Within the grace (a second), connections that wait for their next request keep their
/// buffers, up to `server.idle_buffers_per_thread` of them per thread; then they give
/// them back and are parked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_connections_keep_their_buffers_for_the_grace() {
    let sims = tomcats(1).await;
    let t = on_engine(server_line(&sims[0], ""), "", "");
    let metrics = t.metrics.unwrap();
    const N: usize = 10;
    let asked = Instant::now();
    let conns = sessions(t.addr, N).await;
    let now = buffered(metrics).await;
    // All within the grace, unless the machine took most of it to open them.
    if asked.elapsed() < Duration::from_millis(800) {
        assert_eq!(now, N as i64);
    }
    assert_eq!(parked_becomes(metrics, N as i64).await, N as i64);
    assert_eq!(buffered(metrics).await, 0);
    drop(conns);
}

/// Past `server.idle_buffers_per_thread` (here none), a connection that must wait gives
/// its buffers back at once, waits out the grace in its task (its next request within it
/// is served from there, for its own session), and is parked after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_places_in_the_grace_a_connection_gives_its_buffers_back_at_once() {
    let sims = tomcats(1).await;
    let t = on_engine(
        server_line(&sims[0], ""),
        "",
        "  idle_buffers_per_thread: 0\n",
    );
    let metrics = t.metrics.unwrap();
    const N: usize = 10;
    let conns = sessions(t.addr, N).await;
    let asked = Instant::now();
    assert_eq!(buffered(metrics).await, 0);
    let (conns, answers) = again(conns).await;
    let expected: Vec<String> = conns.iter().map(|(_, id)| format!("{id} 2")).collect();
    assert_eq!(answers, expected);
    // Served from their tasks: none was parked within the grace.
    if asked.elapsed() < Duration::from_millis(800) {
        assert_eq!(parked(metrics).await, 0);
    }
    assert_eq!(parked_becomes(metrics, N as i64).await, N as i64);
    let (_conns, answers) = again(conns).await;
    assert!(answers.iter().all(|a| a.ends_with(" 3")), "{answers:?}");
    assert_eq!(sims[0].requests(), 3 * N as u64);
}

/// `tether_heap_bytes{kind="allocated"}` in a scrape.
async fn heap_allocated(metrics: SocketAddr) -> i64 {
    let series = "tether_heap_bytes{kind=\"allocated\"}";
    scraped(metrics, series).await.expect("the heap's figure")
}

/// An idle TLS connection keeps a read buffer of one TLS record's size, not Pingora's
/// 64 KiB, however much it read before: what each of 100 holds on the heap after an upload
/// of 100 kB (before: about 70 KiB, of which as much as the upload filled stayed resident).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tls_connection_keeps_a_read_buffer_of_one_record() {
    let dir = scratch_dir("engine-idle-tls-buffer");
    let pki = Pki::new(&dir);
    let sims = tomcats(1).await;
    let t = on_engine(server_line(&sims[0], ""), &pki.listener_tls(), "");
    let (addr, metrics) = (t.addr, t.metrics.unwrap());
    let upload = move || {
        let mut c = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
        c.set_verify(boring::ssl::SslVerifyMode::NONE);
        let tcp = TcpStream::connect(addr).unwrap();
        let mut tls = c.build().connect("a.test", tcp).unwrap();
        let body = vec![b'x'; 100_000];
        let head = format!(
            "POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        tls.write_all(head.as_bytes()).unwrap();
        tls.write_all(&body).unwrap();
        assert_eq!(answer(&mut tls), "HTTP/1.1 200 OK");
        tls
    };
    // The threads' caches and the server's pooled connections first.
    let warm: Vec<_> = tokio::task::spawn_blocking(move || (0..4).map(|_| upload()).collect())
        .await
        .unwrap();
    drop(warm);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = heap_allocated(metrics).await;
    const N: i64 = 100;
    let conns: Vec<_> = tokio::task::spawn_blocking(move || (0..N).map(|_| upload()).collect())
        .await
        .unwrap();
    // Past the engine's grace: each waits without its request's buffers.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let each = (heap_allocated(metrics).await - before) / N;
    assert!(
        each > 0 && each < 40 * 1024,
        "{each} bytes of heap per idle TLS connection"
    );
    drop(conns);
    let _ = std::fs::remove_dir_all(dir);
}
