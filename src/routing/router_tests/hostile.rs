//! Hostile input: bad paths, cookies and random bytes never panic and degrade to a sane
//! decision.

use super::*;
use crate::routing::MAX_SESSION_ID_LEN;

/// (what, raw path, raw Cookie header values, expected outcome or `None` for a reject)
type BadInput<'a> = (&'a str, &'a [u8], &'a [&'a [u8]], Option<Outcome>);

fn decide_raw(r: &ClusterRouter, path: &[u8], cookies: &[&[u8]]) -> Decision {
    let mut h = HeaderMap::new();
    for c in cookies {
        h.append(
            COOKIE,
            HeaderValue::from_bytes(c).expect("valid header bytes"),
        );
    }
    r.decide(path, &h, &Tried::default(), NOW)
}

fn outcome(d: Decision) -> Option<Outcome> {
    match d {
        Decision::Route { outcome, .. } => Some(outcome),
        Decision::Reject(_) => None,
    }
}

#[test]
fn bad_input_never_panics() {
    let r = ClusterRouter::new(&four(), None);
    let long = format!("JSESSIONID={}.n1", "A".repeat(10 * 1024));
    let at_limit = format!("JSESSIONID={}.n1", "A".repeat(MAX_SESSION_ID_LEN - 3));
    let over_limit = format!("JSESSIONID={}.n1", "A".repeat(MAX_SESSION_ID_LEN - 2));
    let many: String = (0..5000)
        .map(|i| format!("c{i}=v{i}; "))
        .collect::<String>()
        + "JSESSIONID=Z.n3";
    let many_sessions: String = (0..3000)
        .map(|i| format!("JSESSIONID=S{i}.gone; "))
        .collect();
    let long_path = format!("/app;jsessionid={}.n2", "B".repeat(10 * 1024));
    use Outcome::*;
    let cases: &[BadInput] = &[
        (
            "empty ;jsessionid=",
            b"/app;jsessionid=",
            &[],
            Some(NewSession),
        ),
        (
            "empty ;jsessionid= before ?",
            b"/app;jsessionid=?a=b",
            &[],
            Some(NewSession),
        ),
        (
            "bare ;jsessionid",
            b"/app;jsessionid",
            &[],
            Some(NewSession),
        ),
        ("only semicolons", b";;;;;", &[], Some(NewSession)),
        ("empty path", b"", &[], Some(NewSession)),
        (
            "path param of dots",
            b"/;jsessionid=...",
            &[],
            Some(HashFallback),
        ),
        (
            "path param one dot",
            b"/;jsessionid=.",
            &[],
            Some(HashFallback),
        ),
        (
            "path param non-UTF-8 id, good route",
            b"/;jsessionid=\xff\xfe.n1",
            &[],
            Some(RouteHit),
        ),
        (
            "10 KB path parameter ignored",
            long_path.as_bytes(),
            &[],
            Some(NewSession),
        ),
        (
            "10 KB session id ignored",
            b"/",
            &[long.as_bytes()],
            Some(NewSession),
        ),
        (
            "session id at the limit used",
            b"/",
            &[at_limit.as_bytes()],
            Some(RouteHit),
        ),
        (
            "session id one over the limit ignored",
            b"/",
            &[over_limit.as_bytes()],
            Some(NewSession),
        ),
        (
            "10 KB id, then a good one",
            b"/",
            &[long.as_bytes(), b"JSESSIONID=B.n2"],
            Some(RouteHit),
        ),
        (
            "non-UTF-8 cookie bytes",
            b"/",
            &[b"JSESSIONID=\xc3\x28\xa0\xa1.\xff"],
            Some(HashFallback),
        ),
        (
            "non-UTF-8 route of a server's length",
            b"/",
            &[b"JSESSIONID=A.\xffn1"],
            Some(HashFallback),
        ),
        (
            "non-UTF-8 cookie name",
            b"/",
            &[b"\xffJSESSIONID=A.n1"],
            Some(NewSession),
        ),
        (
            "thousands of cookies",
            b"/",
            &[many.as_bytes()],
            Some(RouteHit),
        ),
        (
            "thousands of orphan sessions",
            b"/",
            &[many_sessions.as_bytes()],
            Some(HashFallback),
        ),
        ("only dots", b"/", &[b"JSESSIONID=...."], Some(HashFallback)),
        (
            "only quotes",
            b"/",
            &[b"JSESSIONID=\"\"\"\""],
            Some(HashFallback),
        ),
        ("one quote", b"/", &[b"JSESSIONID=\""], Some(HashFallback)),
        (
            "empty quotes",
            b"/",
            &[b"JSESSIONID=\"\""],
            Some(NewSession),
        ),
        ("empty value", b"/", &[b"JSESSIONID="], Some(NewSession)),
        (
            "quoted dot",
            b"/",
            &[b"JSESSIONID=\".\""],
            Some(HashFallback),
        ),
        (
            "trailing dot",
            b"/",
            &[b"JSESSIONID=ABC."],
            Some(HashFallback),
        ),
        (
            "leading dot route",
            b"/",
            &[b"JSESSIONID=.n1"],
            Some(RouteHit),
        ),
        (
            "dot then dot",
            b"/",
            &[b"JSESSIONID=A..n1"],
            Some(HashFallback),
        ),
        ("no equals", b"/", &[b"JSESSIONID"], Some(NewSession)),
        (
            "equals soup",
            b"/",
            &[b";=;==;JSESSIONID==;="],
            Some(HashFallback),
        ),
        (
            "tabs and spaces",
            b"/",
            &[b" \t JSESSIONID \t = \t A.n4 \t ;"],
            Some(RouteHit),
        ),
        ("empty header", b"/", &[b""], Some(NewSession)),
        (
            "many empty headers",
            b"/",
            &[b"", b";", b"; ;"],
            Some(NewSession),
        ),
    ];
    for (what, path, cookies, want) in cases {
        let got = decide_raw(&r, path, cookies);
        assert_eq!(outcome(got), *want, "{what}: {got:?}");
    }
}

#[test]
fn bad_input_on_a_websphere_cluster_never_panics() {
    let mut cfg = four();
    cfg.session_style = SessionStyle::Websphere;
    cfg.servers
        .iter_mut()
        .enumerate()
        .for_each(|(i, s)| s.clone_id = Some(format!("c{i}")));
    let r = ClusterRouter::new(&cfg, None);
    let inputs: &[&[u8]] = &[
        b"JSESSIONID=:",
        b"JSESSIONID=::::",
        b"JSESSIONID=0000:",
        b"JSESSIONID=0000::c1",
        b"JSESSIONID=:c1",
        b"JSESSIONID=\xff:\xfe:c9",
        b"JSESSIONID=\"0000A:c2\"",
    ];
    for input in inputs {
        let got = decide_raw(&r, b"/", &[input]);
        assert!(
            matches!(got, Decision::Route { .. }),
            "{}: {got:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn random_bytes_never_panic() {
    let r = ClusterRouter::new(&four(), None);
    let mut x: u32 = 12345;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    // Bytes biased towards the ones the parsers care about.
    let alphabet = b"JSESSIONID=;.\"  \t:+n1234?/#\xff\x80";
    for _ in 0..5000 {
        let len = (next() % 80) as usize;
        let mut cookie_bytes = b"JSESSIONID=".to_vec();
        let mut path = b"/a;jsessionid=".to_vec();
        for _ in 0..len {
            cookie_bytes.push(alphabet[next() as usize % alphabet.len()]);
            path.push(alphabet[next() as usize % alphabet.len()]);
        }
        if let Ok(v) = HeaderValue::from_bytes(&cookie_bytes) {
            let mut h = HeaderMap::new();
            h.append(COOKIE, v);
            let _ = r.decide(&path, &h, &Tried::default(), NOW);
            let _ = r.decide(b"/", &h, &Tried::default(), NOW);
        }
    }
}

/// A WebSphere cluster of two clones with a table of `max` partitions.
fn websphere(max: usize) -> ClusterRouter {
    let mut cfg = four();
    cfg.session_style = SessionStyle::Websphere;
    cfg.partition_table_max = max;
    cfg.servers.truncate(2);
    cfg.servers[0].clone_id = Some("c1".into());
    cfg.servers[1].clone_id = Some("c2".into());
    ClusterRouter::new(&cfg, None)
}

/// A `$WSPT` flood adds at most the per-response quota, however it is packed: one value
/// of 1,024 entries, or 400 `$WSPT` headers.
#[test]
fn a_wspt_flood_adds_at_most_the_quota_per_response() {
    use crate::routing::router::learn::MAX_NEW_PER_RESPONSE as QUOTA;
    let r = websphere(100_000);
    let t = r.partitions().unwrap();
    let one_value: String = (0..1_024).map(|i| format!("{i}=c1,")).collect();
    let l = r.learn_wspt(one_value.as_bytes());
    assert_eq!((l.changed, l.full, l.refused), (QUOTA, 1_024 - QUOTA, None));
    assert_eq!(t.len(), QUOTA as usize);

    let headers: Vec<String> = (0..400).map(|i| format!("h{i}=c2")).collect();
    let l = r.learn_wspt_response(headers.iter().map(|h| h.as_bytes()));
    assert_eq!((l.changed, l.full), (QUOTA, 400 - QUOTA));
    assert_eq!(t.len(), 2 * QUOTA as usize);
    assert_eq!(t.rejected(), (1_024 - QUOTA + 400 - QUOTA) as u64);
}
