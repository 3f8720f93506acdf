//! The harness of the HTTP/1 differential, shared by its test
//! (`tests/http1_differential.rs`, which replays `tests/corpus/http1/` and seeded
//! mutations of it) and its coverage-guided fuzz target (`fuzz/`, `bench/fuzz`): the
//! first request of a stream as tether's engine reads it (`tether::wire::http1`) and as
//! pingora-proxy's path does (pingora-core's HTTP/1 session, then tether's
//! `proxy::request_checks`), and which of their differences are on purpose.

use pingora_core::protocols::http::v1::server::HttpSession;
use tether::wire::http1::chunked::{Decoder, Event};
use tether::wire::http1::framing::{self, Body};
use tether::wire::http1::head::RequestHead;

/// A request as a server would be given it. Fields by lower-case name, sorted (Pingora's
/// map keeps names' order only within a name), without the framing fields, whose effect
/// is the body.
#[derive(Debug, PartialEq)]
pub struct Request {
    method: String,
    target: String,
    minor: u8,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

fn request(
    method: &[u8],
    target: &[u8],
    minor: u8,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
) -> Request {
    let mut fields: Vec<_> = fields
        .into_iter()
        .filter(|(n, _)| n != "content-length" && n != "transfer-encoding")
        .collect();
    fields.sort();
    Request {
        method: String::from_utf8_lossy(method).into_owned(),
        target: String::from_utf8_lossy(target).into_owned(),
        minor,
        fields,
        body,
    }
}

/// A request the engine hands to pingora-proxy (read by Pingora on both engines).
const HANDED_OVER: &str = "handed over";

/// The engine's refusal of a trailer section that is not field lines.
const TRAILERS: &str = "a malformed trailer section";

/// The engine's refusal of a chunk extension that is not `;name[=value]` of legal bytes.
const EXTENSION: &str = "a malformed chunk extension";

/// The engine's refusal of a chunk-size line that does not start with a hex digit.
const EMPTY_SIZE_LINE: &str = "a chunk-size line not starting with a digit";

/// The engine's reading of the stream's first request; `Err` with why there is none.
pub fn engine(input: &[u8]) -> Result<Request, String> {
    let mut head = RequestHead::new();
    match head.parse(input) {
        Ok(true) => {}
        Ok(false) => return Err("incomplete head".into()),
        Err(r) => return Err(r.why.into()),
    }
    let framing = framing::frame(head.minor, head.fields(input)).map_err(|r| r.why.to_string())?;
    let target = head.target.of(input);
    let absolute = tether::wire::http1::target::absolute(target).filter(|_| framing.host.is_some());
    if let Some(absolute) = &absolute {
        let host = head.values(input, "host").next();
        tether::wire::http1::target::check(absolute, host).map_err(|r| r.why.to_string())?;
    }
    if !target.starts_with(b"/") && absolute.is_none() {
        // Other absolute forms, `*` and CONNECT's authority go to pingora-proxy with the
        // bytes read: both engines read them as Pingora does.
        return Err(HANDED_OVER.into());
    }
    let rest = &input[head.len..];
    let body = match framing.body {
        Body::Empty => Vec::new(),
        Body::Length(n) => match usize::try_from(n).ok().filter(|&n| n <= rest.len()) {
            Some(n) => rest[..n].to_vec(),
            None => return Err("incomplete body".into()),
        },
        Body::Chunked => {
            let (mut decoder, mut body, mut at) = (Decoder::default(), Vec::new(), 0);
            loop {
                let (used, event) = decoder.next(&rest[at..]).map_err(|r| {
                    // The size line where the decoder stopped (after the CRLF that ends the
                    // previous chunk's data).
                    let next = &rest[at..];
                    let next = if at > 0 {
                        next.strip_prefix(b"\r\n").unwrap_or(next)
                    } else {
                        next
                    };
                    let size_line =
                        &next[..next.iter().position(|&b| b == b'\r').unwrap_or(next.len())];
                    let size = size_line[..size_line
                        .iter()
                        .position(|&b| b == b';')
                        .unwrap_or(size_line.len())]
                        .trim_ascii_end();
                    if !size.first().is_some_and(u8::is_ascii_hexdigit) {
                        EMPTY_SIZE_LINE.to_string()
                    } else if size.len() < size_line.len()
                        && !size.is_empty()
                        && size.iter().all(u8::is_ascii_hexdigit)
                    {
                        // The size is fine; what follows `;` is not an extension.
                        EXTENSION.to_string()
                    } else if !size.is_empty() && size.iter().all(|&b| b == b'0') {
                        // The last chunk was read: the decoder refused its trailer section.
                        TRAILERS.to_string()
                    } else {
                        r.why.to_string()
                    }
                })?;
                match event {
                    Event::Data { start, end } => {
                        body.extend_from_slice(&rest[at + start..at + end])
                    }
                    Event::More => return Err("incomplete body".into()),
                    Event::End => break,
                }
                at += used;
            }
            body
        }
    };
    let fields = head
        .fields(input)
        .map(|(n, v)| {
            (
                String::from_utf8_lossy(n).to_ascii_lowercase(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect();
    Ok(request(
        head.method.of(input),
        head.target.of(input),
        head.minor,
        fields,
        body,
    ))
}

/// pingora-proxy's path: Pingora's session reads the head and the body, tether's checks
/// run on the head between (as `TetherProxy::early_request` does).
pub async fn pingora(input: &[u8]) -> Result<Request, String> {
    let mut session = HttpSession::new(Box::new(std::io::Cursor::new(input.to_vec())));
    match session.read_request().await {
        Ok(Some(_)) => {}
        Ok(None) => return Err("no head".into()),
        Err(e) => return Err(e.to_string()),
    }
    let raw = session.get_headers_raw_bytes();
    tether::front::proxy::request_checks::check(session.req_header_mut(), Some(&raw))
        .map_err(str::to_string)?;
    let mut body = Vec::new();
    loop {
        match session.read_body_bytes().await {
            Ok(Some(b)) => body.extend_from_slice(&b),
            Ok(None) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    let req = session.req_header();
    let minor = match req.version {
        http::Version::HTTP_10 => 0,
        http::Version::HTTP_11 => 1,
        v => return Err(format!("version {v:?}")),
    };
    let fields = req
        .headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    Ok(request(
        req.method.as_str().as_bytes(),
        req.raw_path(),
        minor,
        fields,
        body,
    ))
}

/// Differences that are meant, and why; `None` for any other.
pub fn on_purpose(
    input: &[u8],
    engine: &Result<Request, String>,
    pingora: &Result<Request, String>,
) -> Option<&'static str> {
    match (engine, pingora) {
        (Err(why), _) if why == HANDED_OVER => Some("handed over"),
        // RFC 9112 §2.2 lets a server accept a line ended by LF alone; the engine does not,
        // because a front end that frames by CRLF only would read the stream differently.
        (Err(why), Ok(_)) if why.contains("LF alone") => Some("bare LF"),
        // A chunk-size line starts with a hex digit (RFC 9112 §7.1: `chunk-size = 1*HEXDIG`);
        // Pingora's body reader (httparse's `parse_chunk_size`) skips whitespace before it
        // and reads a line without digits as 0, the last chunk, so the body ends early there
        // and what follows would be another request.
        (Err(why), Ok(_)) if why == EMPTY_SIZE_LINE => Some("empty chunk-size line"),
        // Trailer fields are field lines (RFC 9112 §7.1.2); the engine checks them, Pingora
        // skips to the empty line that ends them (and drops them: trailers never reach a
        // server on either engine).
        (Err(why), Ok(_)) if why == TRAILERS => Some("malformed trailers"),
        // Chunk extensions (RFC 9112 §7.1.1) are checked by the engine; Pingora's reader
        // skips everything after `;` to the line's end.
        (Err(why), Ok(_)) if why == EXTENSION => Some("malformed chunk extension"),
        // A fragment (`#…`) is not part of a request target (RFC 9112 §3.2): the engine
        // refuses it; Pingora drops it and serves the path before it.
        (Err(why), Ok(_)) if why.contains("fragment") => Some("fragment in the target"),
        // A byte not allowed in a request target (a tab, a control, a space): RFC 9112 §3.2
        // says to answer 400 and not to correct it; Pingora percent-encodes it and goes on
        // (its target is then not what the client's request line says).
        (Err(_), Ok(_)) if illegal_target(first_line(input)) => Some("target corrected by Pingora"),
        // A target that is not a path is absolute-form, `*` or CONNECT's authority; with a byte RFC 3986 does not allow, the engine refuses it, and
        // Pingora's URI parser may take it (as an authority).
        (Err(why), Ok(p)) if why.contains("request target") && !p.target.starts_with('/') => {
            Some("not a path, with a byte a target may not hold")
        }
        _ => None,
    }
}

fn first_line(input: &[u8]) -> &[u8] {
    let start = input
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(input.len());
    let line = &input[start..];
    &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())]
}

/// Does the request line's target (between its first and its last space) hold a byte a
/// target may not (a control, a tab, a space, a byte over 0x7e)?
fn illegal_target(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (Some(first), Some(last)) = (
        line.iter().position(|&b| b == b' '),
        line.iter().rposition(|&b| b == b' '),
    ) else {
        return false;
    };
    first < last
        && line[first + 1..last]
            .iter()
            .any(|&b| !(0x21..=0x7e).contains(&b))
}

/// Compares the two readings of `input`; a difference not on purpose is returned.
pub async fn differ(input: &[u8]) -> Option<String> {
    let (e, p) = (engine(input), pingora(input).await);
    let same = match (&e, &p) {
        (Ok(a), Ok(b)) => a == b,
        (Err(_), Err(_)) => true,
        _ => false,
    };
    if same || on_purpose(input, &e, &p).is_some() {
        return None;
    }
    Some(format!(
        "input {:?}\n  engine:  {e:?}\n  pingora: {p:?}",
        String::from_utf8_lossy(input)
    ))
}
