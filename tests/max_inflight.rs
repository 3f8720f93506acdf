//! Per-server bounds on requests in flight (`max_inflight`) with their queues, against
//! simulated Tomcats that count how many requests they hold at once: a server never holds
//! more than its bound; a session's requests wait for its own server and are never moved
//! while it is only busy; new sessions go to a server with room; a full queue or a wait
//! past `queue.timeout` is a 503 with `Retry-After`; and every slot comes back, whatever
//! ended its request (the client gone, the server failing, a timeout).

mod common;

use common::{Opts, Tether};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A server that holds each request `?ms=N` milliseconds (default 20) and counts the
/// requests it holds at once, and the most it held; `/reset` closes the connection
/// without an answer.
struct Busy {
    addr: SocketAddr,
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl Busy {
    async fn start(route: &'static str) -> Busy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (n, m) = (now.clone(), most.clone());
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                tokio::spawn(serve(s, route, n.clone(), m.clone()));
            }
        });
        Busy { addr, now, most }
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

async fn serve(mut s: TcpStream, route: &str, now: Arc<AtomicUsize>, most: Arc<AtomicUsize>) {
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let held = now.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(held, Ordering::SeqCst);
        let ms = target
            .split("ms=")
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(20);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        now.fetch_sub(1, Ordering::SeqCst);
        if target.starts_with("/reset") {
            return;
        }
        let answer = format!(
            "HTTP/1.1 200 OK\r\nX-Server: {route}\r\nSet-Cookie: JSESSIONID=N{held}.{route}\r\nContent-Length: 2\r\n\r\nok"
        );
        if s.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// tether in front of `servers` (each `(server, route)`) with `settings` for the cluster.
fn tether(servers: &[(&Busy, &str)], settings: &str) -> Tether {
    let mut cluster = format!("{settings}    servers:\n");
    for (s, route) in servers {
        cluster.push_str(&format!(
            "      - {{ name: {route}, address: \"{}\", route: {route} }}\n",
            s.addr
        ));
    }
    Tether::start_with(Opts {
        cluster,
        metrics: true,
        ..Opts::default()
    })
}

/// A series' value in a scrape; 0 when absent.
fn series(scrape: &str, name_and_labels: &str) -> f64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_wait_for_their_own_busy_server_which_never_holds_more_than_its_bound() {
    let (r1, r2) = (Busy::start("r1").await, Busy::start("r2").await);
    let settings = "    max_inflight: 4\n    queue: { length: 1000, timeout: 10s }\n";
    let t = tether(&[(&r1, "r1"), (&r2, "r2")], settings);
    // 100 clients of 20 sessions, 10 requests each.
    let mut clients = Vec::new();
    for c in 0..100 {
        let addr = t.addr;
        clients.push(tokio::spawn(async move {
            let session = c % 20;
            let route = if session % 2 == 0 { "r1" } else { "r2" };
            let cookie = format!("JSESSIONID=S{session}.{route}");
            let mut client = tether::cli::sim::HttpClient::new(addr);
            let mut seen = Vec::new();
            for _ in 0..10 {
                let r = client.get("/x", &[("Cookie", &cookie)]).await.unwrap();
                seen.push((r.status, r.header("x-server").unwrap_or("").to_string()));
            }
            (route, seen)
        }));
    }
    for c in clients {
        let (route, seen) = c.await.unwrap();
        for (status, server) in seen {
            assert_eq!((status, server.as_str()), (200, route), "its own server");
        }
    }
    assert!(
        r1.most() <= 4 && r2.most() <= 4,
        "{} {}",
        r1.most(),
        r2.most()
    );
    assert_eq!((r1.most(), r2.most()), (4, 4), "both were at their bound");
    let scrape = common::scrape(t.metrics.unwrap()).await;
    let waited = series(
        &scrape,
        r#"tether_queue_wait_seconds_count{cluster="shop"} "#,
    );
    assert!(waited > 0.0, "requests queued: {scrape}");
    for route in ["r1", "r2"] {
        let labels = format!(r#"tether_inflight_requests{{cluster="shop",server="{route}"}} "#);
        assert_eq!(series(&scrape, &labels), 0.0, "{route}: {scrape}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_sessions_go_to_room_and_a_full_queue_or_a_long_wait_is_a_503() {
    let (r1, r2) = (Busy::start("r1").await, Busy::start("r2").await);
    let settings = "    max_inflight: 2\n    queue: { length: 2, timeout: 300ms }\n";
    let t = tether(&[(&r1, "r1"), (&r2, "r2")], settings);
    // r1's two slots held for 2 s by its sessions.
    let hold = |route: &'static str| {
        let addr = t.addr;
        tokio::spawn(async move {
            let cookie = format!("JSESSIONID=H.{route}");
            let mut client = tether::cli::sim::HttpClient::new(addr);
            client
                .get("/x?ms=2000", &[("Cookie", &cookie)])
                .await
                .unwrap()
                .status
        })
    };
    let held = [hold("r1"), hold("r1")];
    tokio::time::sleep(Duration::from_millis(300)).await;
    // New sessions: to r2, which has room, every time.
    for _ in 0..4 {
        let r = t.client().get("/x", &[]).await.unwrap();
        assert_eq!(
            r.header("x-server"),
            Some("r2"),
            "a new session goes to room"
        );
    }
    // r1's sessions: two wait in its queue and give up after 300 ms; the next three
    // find its queue full and are refused at once. All with Retry-After.
    let mut asks = Vec::new();
    for _ in 0..2 {
        let addr = t.addr;
        asks.push(tokio::spawn(async move {
            let mut client = tether::cli::sim::HttpClient::new(addr);
            client
                .get("/x", &[("Cookie", "JSESSIONID=W.r1")])
                .await
                .unwrap()
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    for _ in 0..3 {
        let r = t
            .client()
            .get("/x", &[("Cookie", "JSESSIONID=F.r1")])
            .await
            .unwrap();
        assert_eq!(r.status, 503, "the queue is full");
        assert_eq!(r.header("retry-after"), Some("1"));
    }
    for a in asks {
        let r = a.await.unwrap();
        assert_eq!(r.status, 503, "no slot in the queue's time");
        assert_eq!(r.header("retry-after"), Some("1"));
    }
    for h in held {
        assert_eq!(h.await.unwrap(), 200);
    }
    assert!(r1.most() <= 2, "{}", r1.most());
    let scrape = common::scrape(t.metrics.unwrap()).await;
    let refused = |reason: &str| {
        let labels = format!(
            r#"tether_queue_refused_total{{cluster="shop",reason="{reason}",server="r1"}} "#
        );
        series(&scrape, &labels)
    };
    assert_eq!(
        (refused("full"), refused("timeout")),
        (3.0, 2.0),
        "{scrape}"
    );
    // Its slots all came back: r1 takes its two again at once.
    let again = [hold("r1"), hold("r1")];
    for h in again {
        assert_eq!(h.await.unwrap(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_slot_is_lost_to_clients_that_leave_servers_that_fail_or_timeouts() {
    let r1 = Busy::start("r1").await;
    let settings =
        "    max_inflight: 2\n    read_timeout: 200ms\n    queue: { length: 100, timeout: 5s }\n";
    let t = tether(&[(&r1, "r1")], settings);
    let cookie = [("Cookie", "JSESSIONID=A.r1")];
    for _ in 0..10 {
        // A client that leaves while its request is at the server.
        let mut s = std::net::TcpStream::connect(t.addr).unwrap();
        std::io::Write::write_all(
            &mut s,
            b"GET /x?ms=100 HTTP/1.1\r\nHost: shop\r\nCookie: JSESSIONID=A.r1\r\n\r\n",
        )
        .unwrap();
        drop(s);
        // A server that drops the request, and one that answers too late.
        let _ = t
            .client()
            .request(
                "POST",
                "/reset",
                &[("Cookie", &b"JSESSIONID=A.r1"[..])],
                b"x",
            )
            .await;
        let r = t.client().get("/x?ms=400", &cookie).await.unwrap();
        assert_eq!(r.status, 504);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Both slots are free: two slow requests are at the server at once.
    let mut both = Vec::new();
    for _ in 0..2 {
        let addr = t.addr;
        both.push(tokio::spawn(async move {
            let mut client = tether::cli::sim::HttpClient::new(addr);
            client
                .get("/x?ms=150", &[("Cookie", "JSESSIONID=A.r1")])
                .await
                .unwrap()
                .status
        }));
    }
    tokio::time::sleep(Duration::from_millis(75)).await;
    assert_eq!(
        r1.now.load(Ordering::SeqCst),
        2,
        "both slots free after 30 failures"
    );
    for b in both {
        assert_eq!(b.await.unwrap(), 200);
    }
}

/// A request of session `cookie` to `path`, on its own connection; its status and server.
fn ask(
    t: &Tether,
    path: &'static str,
    cookie: Option<String>,
) -> tokio::task::JoinHandle<(u16, String)> {
    let addr = t.addr;
    tokio::spawn(async move {
        let mut client = tether::cli::sim::HttpClient::new(addr);
        let headers: Vec<(&str, &str)> = cookie.iter().map(|c| ("Cookie", c.as_str())).collect();
        let r = client.get(path, &headers).await.unwrap();
        (r.status, r.header("x-server").unwrap_or("").to_string())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_sessions_wait_for_the_first_free_server_and_queues_keep_their_order() {
    let (r1, r2) = (Busy::start("r1").await, Busy::start("r2").await);
    let settings = "    max_inflight: 1\n    queue: { length: 10, timeout: 5s }\n";
    let t = tether(&[(&r1, "r1"), (&r2, "r2")], settings);
    let session = |route: &str| Some(format!("JSESSIONID=H.{route}"));
    // r1 is held 1.5 s, r2 0.5 s.
    let long = ask(&t, "/x?ms=1500", session("r1"));
    let short = ask(&t, "/x?ms=500", session("r2"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Three new sessions find no room: they wait in the cluster's queue, and all go to r2,
    // the first to hand a slot back (each holding it 20 ms), while r1 is still busy.
    let new: Vec<_> = (0..3).map(|_| ask(&t, "/x", None)).collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let scrape = common::scrape(t.metrics.unwrap()).await;
    assert_eq!(
        series(
            &scrape,
            r#"tether_queued_requests{cluster="shop",server=""} "#
        ),
        3.0,
        "{scrape}"
    );
    for n in new {
        assert_eq!(
            n.await.unwrap(),
            (200, "r2".to_string()),
            "the first free server"
        );
    }
    assert_eq!(r1.now.load(Ordering::SeqCst), 1, "r1 still busy meanwhile");
    assert_eq!(long.await.unwrap().0, 200);
    assert_eq!(short.await.unwrap().0, 200);
    // r1's own queue keeps its order: requests queued 50 ms apart are answered in turn.
    let hold = ask(&t, "/x?ms=300", session("r1"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let done = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut queued = Vec::new();
    for i in 0..4 {
        let (asked, done) = (ask(&t, "/x?ms=30", session("r1")), done.clone());
        queued.push(tokio::spawn(async move {
            let answer = asked.await.unwrap();
            done.lock().unwrap().push(i);
            answer
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for q in queued {
        assert_eq!(q.await.unwrap(), (200, "r1".to_string()));
    }
    assert_eq!(hold.await.unwrap().0, 200);
    assert_eq!(
        *done.lock().unwrap(),
        [0, 1, 2, 3],
        "first come, first served"
    );
    assert!(r1.most() <= 1 && r2.most() <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_requests_with_aborts_resets_and_timeouts_leave_every_slot_free() {
    let (r1, r2) = (Busy::start("r1").await, Busy::start("r2").await);
    let settings =
        "    max_inflight: 4\n    read_timeout: 100ms\n    queue: { length: 1000, timeout: 10s }\n";
    let t = tether(&[(&r1, "r1"), (&r2, "r2")], settings);
    // 100 clients, 100 requests each: mostly quick ones of 20 sessions and new ones; every
    // 10th a server reset, every 25th a timeout, every 7th a client that leaves mid-way.
    let mut clients = Vec::new();
    for c in 0..100u32 {
        let addr = t.addr;
        clients.push(tokio::spawn(async move {
            let session = c % 20;
            let route = if session % 2 == 0 { "r1" } else { "r2" };
            let cookie = format!("JSESSIONID=S{session}.{route}");
            let mut client = tether::cli::sim::HttpClient::new(addr);
            let mut statuses = Vec::new();
            for i in 0..100u32 {
                let n = c * 100 + i;
                let cookies = [("Cookie", cookie.as_str())];
                let headers: &[(&str, &str)] = if n % 3 == 0 { &[] } else { &cookies };
                if n % 7 == 0 {
                    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let head =
                        format!("GET /x?ms=5 HTTP/1.1\r\nHost: shop\r\nCookie: {cookie}\r\n\r\n");
                    s.write_all(head.as_bytes()).await.unwrap();
                    continue;
                }
                let (method, path) = match n {
                    n if n % 10 == 0 => ("POST", "/reset?ms=1"),
                    n if n % 25 == 1 => ("GET", "/x?ms=150"),
                    _ => ("GET", "/x?ms=1"),
                };
                let heads: Vec<(&str, &[u8])> =
                    headers.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
                let r = client.request(method, path, &heads, b"").await;
                statuses.push(r.map_or(0, |r| r.status));
            }
            statuses
        }));
    }
    let mut by_status = std::collections::BTreeMap::new();
    for c in clients {
        for s in c.await.unwrap() {
            *by_status.entry(s).or_insert(0u32) += 1;
        }
    }
    assert!(
        by_status.get(&200).copied().unwrap_or(0) > 5_000,
        "{by_status:?}"
    );
    assert!(
        by_status.contains_key(&504),
        "timeouts happened: {by_status:?}"
    );
    // (A request tether gave up on, at its timeout or its client's leaving, goes on at
    // the server, as at a Tomcat: the servers' own counts may pass the bound here.)
    tokio::time::sleep(Duration::from_millis(500)).await;
    let scrape = common::scrape(t.metrics.unwrap()).await;
    for route in ["r1", "r2"] {
        let labels = format!(r#"tether_inflight_requests{{cluster="shop",server="{route}"}} "#);
        assert_eq!(series(&scrape, &labels), 0.0, "{route}: {scrape}");
    }
    // And the slots are truly free: four requests per server are there at once (within
    // the read_timeout).
    let slow: Vec<_> = ["r1", "r2"]
        .iter()
        .flat_map(|r| (0..4).map(move |_| Some(format!("JSESSIONID=F.{r}"))))
        .map(|c| ask(&t, "/x?ms=80", c))
        .collect();
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert_eq!(
        (r1.now.load(Ordering::SeqCst), r2.now.load(Ordering::SeqCst)),
        (4, 4),
        "every slot free after 10,000 requests"
    );
    for s in slow {
        assert_eq!(s.await.unwrap().0, 200);
    }
}
