//! AJP/1.3 to real Tomcats (Debian's `tomcat10`) in operation: a Tomcat stopped with
//! SIGSTOP is noticed by its CPing and its requests go to the other instance; one
//! restarted under load loses no request; large bodies stream both ways without tether
//! holding them, and a servlet's flush reaches the client.
//!
//! The tests skip (print "skipped: tomcat10 not installed") only when the package is
//! missing; `./run test` installs it.

mod common;

use common::real_tomcat::{lines, tether_over_ajp, tether_over_ajp_with, RealTomcat, AJP_SECRET};
use common::{scratch_dir, Opts, Tether};
use std::io::{Read, Write};
use std::process::Command;

/// The tests run one at a time: each starts its own Tomcats, and six JVMs starting,
/// restarting and serving at once on a small machine make one test's Tomcat too slow for
/// what another measures (a failover's answer within the client's 10 s).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A Tomcat that takes connections but serves nothing (stopped with SIGSTOP, as in a long
/// GC pause or with every thread busy): with `ping: request`, its CPing goes unanswered
/// for `ping_timeout`, it is marked down, and its session's requests (a POST too: nothing
/// of it was sent) are served by the other instance instead of waiting `read_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_tomcat_is_noticed_by_its_cping_and_its_requests_fail_over() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = scratch_dir("ajp-cping");
    let Some(tomcats) = RealTomcat::start_all(&dir, &["tc1", "tc2"]) else {
        println!("skipped: tomcat10 not installed");
        return;
    };
    let ping = ", ping: request, ping_timeout: 1s";
    let t = tether_over_ajp_with(&tomcats, &dir, (AJP_SECRET, ping), "");
    let mut client = t.client();
    let on_tc1 = [("Cookie", "JSESSIONID=0123456789ABCDEF.tc1")];
    // Served by tc1 while it runs, which leaves a kept connection to it in the pool.
    let r = client.get("/index.jsp", &on_tc1).await.unwrap();
    assert_eq!(lines(&r.body)["jvmRoute"], "tc1");

    let pid = tomcats[0].pid() as i32;
    // SAFETY: a signal to the JVM this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // The signal is delivered on its own time: wait until the JVM is stopped (state `T`).
    let stopped = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('T'))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !stopped() {
        assert!(std::time::Instant::now() < deadline, "tc1 did not stop");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let r = client.get("/index.jsp", &on_tc1).await;
    let post = client
        .request(
            "POST",
            "/echo.jsp",
            &[("Cookie", &b"JSESSIONID=0123456789ABCDEF.tc1"[..])],
            b"x=1",
        )
        .await;
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let r = r.expect("an answer while tc1 is stopped");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(lines(&r.body)["jvmRoute"], "tc2", "failed over to tc2");
    let post = post.expect("an answer to the POST");
    assert_eq!(post.status, 200, "{}", String::from_utf8_lossy(&post.body));
    assert_eq!(
        lines(&post.body)["body"],
        "3/230",
        "the POST went whole to tc2"
    );
}

/// tether's peak resident memory (`VmHWM`), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Large bodies both ways over AJP, streamed: a 10 MB upload (with a length, and chunked)
/// arrives whole; a 100 MiB answer reaches the client without tether holding it (its peak
/// memory grows by far less); a servlet's flush reaches the client before the servlet
/// goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_stream_both_ways_and_a_flush_reaches_the_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = scratch_dir("ajp-large");
    let Some(tomcats) = RealTomcat::start_all(&dir, &["tc1"]) else {
        println!("skipped: tomcat10 not installed");
        return;
    };
    let t = tether_over_ajp(&tomcats, &dir, AJP_SECRET, "");
    let url = |path: &str| format!("http://{}{path}", t.addr);

    let upload: Vec<u8> = (0..10_000_000u32).map(|i| (i % 253) as u8).collect();
    let sum: u64 = upload.iter().map(|&b| u64::from(b)).sum();
    let file = dir.join("upload.bin");
    std::fs::write(&file, &upload).unwrap();
    for chunked in [false, true] {
        let mut curl = Command::new("curl");
        curl.args(["-s", "--max-time", "60"]);
        if chunked {
            curl.args(["-H", "Transfer-Encoding: chunked"]);
        }
        let out = curl
            .args(["--data-binary", &format!("@{}", file.display())])
            .arg(url("/echo.jsp"))
            .output()
            .expect("curl");
        assert_eq!(
            lines(&out.stdout)["body"],
            format!("{}/{sum}", upload.len()),
            "chunked: {chunked}"
        );
    }

    let before = peak_kib(t.pid());
    let out = Command::new("curl")
        .args(["-s", "--max-time", "120", "-o", "/dev/null"])
        .args(["-w", "%{http_code} %{size_download}"])
        .arg(url("/big.jsp?mib=100"))
        .output()
        .expect("curl");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("200 {}", 100u64 << 20)
    );
    let grew = peak_kib(t.pid()).saturating_sub(before);
    assert!(
        grew < 32 * 1024,
        "tether's peak memory grew by {grew} KiB for 100 MiB"
    );

    let gate = dir.join("gate");
    let mut raw = std::net::TcpStream::connect(t.addr).unwrap();
    raw.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "GET /flush.jsp?gate={} HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n\r\n",
        gate.display()
    );
    raw.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("first;") {
        let n = raw
            .read(&mut buf)
            .expect("the flushed part, while the servlet waits");
        assert!(
            n > 0,
            "the connection ended: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    std::fs::write(&gate, b"go").unwrap();
    raw.read_to_end(&mut got).unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("second"), "{text}");
    drop(tomcats);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Tomcat restarted while requests flow (a crash, then the operator starts it again on
/// its ports): the requests it was serving go to the other instance, none fails, and once
/// it is back it serves its share again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tomcat_restarted_under_load_loses_no_request_and_comes_back() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = scratch_dir("ajp-restart");
    let Some(mut tomcats) = RealTomcat::start_all(&dir, &["tc1", "tc2"]) else {
        println!("skipped: tomcat10 not installed");
        return;
    };
    let file = dir.join("ajp.secret");
    std::fs::write(&file, AJP_SECRET).unwrap();
    let mut cluster = format!(
        "    recover_after: 1s\n    health_check: {{ kind: cping, interval: 300ms, timeout: 250ms, rise: 1, fall: 1 }}\n    ajp: {{ secret_file: {} }}\n    servers:\n",
        file.display()
    );
    for tc in &tomcats {
        cluster.push_str(&format!(
            "      - {{ name: {r}, address: \"{a}\", route: {r} }}\n",
            r = tc.route(),
            a = tc.ajp_addr()
        ));
    }
    let t = Tether::start_with(Opts {
        cluster,
        listener_extra: "    http1: engine\n".into(),
        ..Opts::default()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..4 {
        let (addr, stop) = (t.addr, stop.clone());
        load.push(tokio::spawn(async move {
            let mut answers: Vec<(u16, String)> = Vec::new();
            let mut client = tether::cli::sim::HttpClient::new(addr);
            while !stop.load(Ordering::Relaxed) {
                match client.get("/echo.jsp", &[]).await {
                    Ok(r) => {
                        let body = String::from_utf8_lossy(&r.body).into_owned();
                        answers.push((r.status, body));
                    }
                    Err(e) => answers.push((0, e.to_string())),
                }
            }
            answers
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    tokio::task::block_in_place(|| tomcats[0].restart());
    // Back in the pool: new sessions land on it again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let page = lines(&t.client().get("/index.jsp", &[]).await.unwrap().body);
        if page["jvmRoute"] == "tc1" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tc1 never served again"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for task in load {
        for (status, what) in task.await.unwrap() {
            total += 1;
            assert_eq!(
                status,
                200,
                "a request failed while tc1 restarted: {what}; log:\n{}",
                t.log()
            );
        }
    }
    assert!(total > 20, "{total} requests");
}
