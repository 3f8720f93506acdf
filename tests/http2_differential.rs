//! The differential test of the two HTTP/2 front ends: the same streams go, over h2c, to a
//! tether on Pingora's proxy (`http2: proxy`) and to one on tether's own front end
//! (`http2: engine`), each in front of a recording server. Both must forward the same
//! requests (request line, fields after tether's edits, body) and give the client the same
//! answers (status, fields, body); where they forward differently on purpose the case says
//! so (`Forwards`).

mod common;

use bytes::Bytes;
use common::recording::{recording_server, Seen};
use common::{Opts, Tether};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn start(server: SocketAddr, http2: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: s1, address: \"{server}\" }}\n"),
        listener_extra: format!("    h2c: true\n    http2: {http2}\n"),
        ..Opts::default()
    })
}

/// One stream: method, path, fields, and the body's parts (each sent as DATA).
struct Case {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    fields: &'static [(&'static str, &'static str)],
    body: &'static [&'static [u8]],
    expect: Expect,
}

/// How the front ends are expected to compare on a case.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expect {
    Same,
    /// They answer alike, and forward differently on purpose: tether's front end forwards
    /// a request with this field (docs/DESIGN.md, section 11, "Where the front ends
    /// differ").
    Forwards(&'static str),
}

/// What one side made of a stream: the answer the client got (status, fields by name in
/// a sorted list, body) and each request the server got (request line, sorted fields,
/// body).
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    status: u16,
    fields: Vec<String>,
    body: Vec<u8>,
    forwarded: Vec<(String, Vec<String>, Vec<u8>)>,
}

async fn exchange(
    addr: SocketAddr,
    (server, seen): (SocketAddr, &Arc<Mutex<Vec<Seen>>>),
    case: &Case,
    big: &Bytes,
) -> Outcome {
    seen.lock().unwrap().clear();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut client = client.ready().await.unwrap();
    let mut req = http::Request::builder()
        .method(case.method)
        .uri(format!("http://shop{}", case.path));
    for (name, value) in case.fields {
        req = req.header(*name, *value);
    }
    let req = req.body(()).unwrap();
    let (response, mut send) = client.send_request(req, case.body.is_empty()).unwrap();
    for (i, part) in case.body.iter().enumerate() {
        let last = i + 1 == case.body.len();
        let data = match *part {
            b"BIG" => big.clone(),
            part => Bytes::from_static(part),
        };
        send.reserve_capacity(data.len());
        let mut data = data;
        while !data.is_empty() {
            let n = std::future::poll_fn(|cx| send.poll_capacity(cx))
                .await
                .unwrap()
                .unwrap();
            let chunk = data.split_to(n.min(data.len()));
            send.send_data(chunk, last && data.is_empty()).unwrap();
        }
    }
    let response = tokio::time::timeout(Duration::from_secs(10), response)
        .await
        .expect("answered")
        .expect("an answer");
    let status = response.status().as_u16();
    let mut fields: Vec<String> = response
        .headers()
        .iter()
        .filter(|(n, _)| n.as_str() != "date")
        .map(|(n, v)| format!("{n}:{}", v.to_str().unwrap_or("?")))
        .collect();
    fields.sort();
    let mut recv = response.into_body();
    let mut body = Vec::new();
    while let Some(data) = recv.data().await {
        let data = data.unwrap();
        let _ = recv.flow_control().release_capacity(data.len());
        body.extend_from_slice(&data);
    }
    let forwarded = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| {
            let mut lines = r.head.split("\r\n");
            let line = lines.next().unwrap_or("").to_string();
            let mut fields: Vec<String> = lines
                .filter(|l| !l.is_empty())
                .map(|l| match l.split_once(':') {
                    Some((n, v)) => format!(
                        "{}:{}",
                        n.to_ascii_lowercase(),
                        v.trim().replace(&server.to_string(), "SERVER")
                    ),
                    None => l.to_string(),
                })
                .collect();
            fields.sort();
            (line, fields, r.body.clone())
        })
        .collect();
    Outcome {
        status,
        fields,
        body,
        forwarded,
    }
}

const CASES: &[Case] = &[
    Case {
        name: "plain GET",
        method: "GET",
        path: "/a?q=1",
        fields: &[("user-agent", "t")],
        body: &[],
        expect: Expect::Same,
    },
    Case {
        name: "session in the path",
        method: "GET",
        path: "/a;jsessionid=ABC.s1?q=1",
        fields: &[],
        body: &[],
        expect: Expect::Same,
    },
    Case {
        name: "cookies in fields of their own",
        method: "GET",
        path: "/",
        fields: &[
            ("cookie", "JSESSIONID=ABC.s1"),
            ("cookie", "x=y"),
            ("x-mixed-case", "1"),
        ],
        body: &[],
        expect: Expect::Forwards("cookie:JSESSIONID=ABC.s1; x=y"),
    },
    Case {
        name: "client forwarded fields",
        method: "GET",
        path: "/",
        fields: &[
            ("x-forwarded-for", "192.0.2.1"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil"),
        ],
        body: &[],
        expect: Expect::Same,
    },
    Case {
        name: "client $WS fields",
        method: "GET",
        path: "/",
        fields: &[("$wsfo", "true"), ("$wsra", "1.2.3.4")],
        body: &[],
        expect: Expect::Same,
    },
    Case {
        name: "te: trailers",
        method: "GET",
        path: "/",
        fields: &[("te", "trailers")],
        body: &[],
        expect: Expect::Same,
    },
    Case {
        name: "HEAD",
        method: "HEAD",
        path: "/h",
        fields: &[],
        body: &[],
        expect: Expect::Same,
    },
    Case {
        name: "POST with a length",
        method: "POST",
        path: "/p",
        fields: &[("content-length", "5")],
        body: &[b"hello"],
        expect: Expect::Same,
    },
    Case {
        name: "POST without a length",
        method: "POST",
        path: "/p",
        fields: &[],
        body: &[b"hel", b"lo"],
        expect: Expect::Forwards("content-length:5"),
    },
    Case {
        name: "empty POST",
        method: "POST",
        path: "/p",
        fields: &[("content-length", "0")],
        body: &[],
        expect: Expect::Same,
    },
    Case {
        name: "large POST with a length",
        method: "POST",
        path: "/big",
        fields: &[("content-length", "300000")],
        body: &[b"BIG"],
        expect: Expect::Same,
    },
    Case {
        name: "large POST without a length",
        method: "POST",
        path: "/big",
        fields: &[],
        body: &[b"BIG"],
        expect: Expect::Same,
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_http2_front_ends_forward_and_answer_alike() {
    let (server, seen) = recording_server().await;
    let proxy = start(server, "proxy");
    let engine = start(server, "engine");
    let big = Bytes::from(vec![b'x'; 300_000]);
    let mut differ = Vec::new();
    for case in CASES {
        let on_proxy = exchange(proxy.addr, (server, &seen), case, &big).await;
        let on_engine = exchange(engine.addr, (server, &seen), case, &big).await;
        assert_eq!(on_engine.forwarded.len(), 1, "{}: {on_engine:?}", case.name);
        let alike = match case.expect {
            Expect::Same => on_proxy == on_engine,
            Expect::Forwards(field) => {
                let answer = |o: &Outcome| (o.status, o.fields.clone(), o.body.clone());
                answer(&on_proxy) == answer(&on_engine)
                    && on_engine.forwarded[0].1.iter().any(|f| f == field)
                    && on_engine.forwarded[0].2 == on_proxy.forwarded[0].2
            }
        };
        if !alike {
            differ.push(format!(
                "{}:\n  proxy:  {on_proxy:?}\n  engine: {on_engine:?}",
                case.name
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
