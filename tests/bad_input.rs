//! Hostile and malformed requests: never a panic; routed as a new session or refused with 4xx.

mod common;

use common::{server_line, tomcats, Tether};
use tether::cli::sim::send_raw;

fn raw_get(path: &[u8], cookie: &[u8]) -> Vec<u8> {
    let mut r = b"GET ".to_vec();
    r.extend_from_slice(path);
    r.extend_from_slice(b" HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n");
    if !cookie.is_empty() {
        r.extend_from_slice(b"Cookie: ");
        r.extend_from_slice(cookie);
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"\r\n");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_session_ids_are_new_sessions_or_4xx() {
    let sims = tomcats(2).await;
    let mut cluster = String::from("    servers:\n");
    for s in &sims {
        cluster.push_str(&server_line(s, ""));
    }
    let mut t = Tether::start(&cluster);
    let huge_id = format!("JSESSIONID={}.tc2", "A".repeat(10 * 1024));
    // ~22 KB: under the default 32 KiB limit on the request head.
    let many: String = (0..2000)
        .map(|i| format!("c{i}=v{i}; "))
        .collect::<String>()
        + "JSESSIONID=X.tc2";
    let enormous: String = (0..200_000).map(|i| format!("c{i}=v; ")).collect();

    // (what, path, cookie, expectation)
    enum Want {
        NewSession,
        Server(&'static str),
        Status(u16),
        ClientError,
    }
    let cases: Vec<(&str, Vec<u8>, Vec<u8>, Want)> = vec![
        (
            "malformed cookie",
            b"/".to_vec(),
            b";;;==; JSESSIONID; =x; \"".to_vec(),
            Want::NewSession,
        ),
        (
            "empty cookie value",
            b"/".to_vec(),
            b"JSESSIONID=".to_vec(),
            Want::NewSession,
        ),
        (
            "only quotes",
            b"/".to_vec(),
            b"JSESSIONID=\"\"".to_vec(),
            Want::NewSession,
        ),
        (
            "empty ;jsessionid=",
            b"/app;jsessionid=".to_vec(),
            vec![],
            Want::NewSession,
        ),
        (
            "empty ;jsessionid= then cookie",
            b"/app;jsessionid=?a=b".to_vec(),
            b"JSESSIONID=K.tc2".to_vec(),
            Want::Server("tc2"),
        ),
        (
            "10 KB session id",
            b"/".to_vec(),
            huge_id.into_bytes(),
            Want::NewSession,
        ),
        (
            "non-UTF-8 session id",
            b"/".to_vec(),
            b"JSESSIONID=\xff\xfe\x80.tc2".to_vec(),
            Want::Server("tc2"),
        ),
        (
            "non-UTF-8 other cookie",
            b"/".to_vec(),
            b"a=\xc3\x28; JSESSIONID=Z.tc1".to_vec(),
            Want::Server("tc1"),
        ),
        (
            "2,000 cookies",
            b"/".to_vec(),
            many.into_bytes(),
            Want::Server("tc2"),
        ),
        (
            "40 KB of cookies: over max_request_head",
            b"/".to_vec(),
            (0..4000)
                .map(|i| format!("c{i}=v{i}; "))
                .collect::<String>()
                .into_bytes(),
            Want::Status(431),
        ),
        (
            "1.6 MB of cookies",
            b"/".to_vec(),
            enormous.into_bytes(),
            Want::ClientError,
        ),
    ];
    for (what, path, cookie, want) in cases {
        let resp = send_raw(t.addr, &raw_get(&path, &cookie)).await;
        match (want, resp) {
            (Want::NewSession, Ok(r)) => {
                assert_eq!(r.status, 200, "{what}");
                assert!(
                    r.set_cookie("JSESSIONID").is_some(),
                    "{what}: a new session is created"
                );
            }
            (Want::Server(s), Ok(r)) => {
                assert_eq!(r.status, 200, "{what}");
                assert_eq!(r.header("x-server"), Some(s), "{what}");
            }
            (Want::Status(s), Ok(r)) => {
                assert_eq!(r.status, s, "{what}");
                assert_eq!(r.header("connection"), Some("close"), "{what}");
            }
            (Want::ClientError, Ok(r)) => {
                assert!((400..500).contains(&r.status), "{what}: {}", r.status)
            }
            // Refusing an oversized head by closing the connection is also a refusal.
            (Want::ClientError, Err(_)) => {}
            (_, Err(e)) => panic!("{what}: {e}"),
        }
        assert!(t.alive(), "tether died on {what}: {}", t.log());
    }
    assert!(!t.log().contains("panicked"), "{}", t.log());
    let ok = t.client().get("/", &[]).await.unwrap();
    assert_eq!(ok.status, 200, "still serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_utf8_path_and_broken_request_lines_do_not_hurt() {
    let sims = tomcats(1).await;
    let t = Tether::start(&format!("    servers:\n{}", server_line(&sims[0], "")));
    let raws: [&[u8]; 4] = [
        b"GET /app;jsessionid=\xff\xfe.tc1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /\x00 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"NOT-HTTP\r\n\r\n",
        b"GET / HTTP/1.1\r\nCookie\r\n\r\n",
    ];
    for raw in raws {
        if let Ok(r) = send_raw(t.addr, raw).await {
            assert!(
                r.status == 200 || (400..500).contains(&r.status),
                "{}",
                r.status
            );
        }
    }
    assert_eq!(t.client().get("/", &[]).await.unwrap().status, 200);
    assert!(!t.log().contains("panicked"));
}
