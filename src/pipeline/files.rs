//! Files from a directory (`serve:`), the web server's job behind mod_jk: the request's
//! path made into a name under the root (`path.rs`), opened beneath it (`open.rs`), the
//! answer's status and fields decided by the request's conditions and range (`served.rs`),
//! and its body sent without the request's thread waiting for the disk (`body.rs`). Each
//! front end puts a [`Served`] on its own wire; what is refused is an [`Answer`].

mod body;
mod open;
mod path;
mod range;
mod served;

pub use body::{Body, CHUNK};
pub use served::Served;

use crate::config::Files;
use crate::pipeline::Answer;
use crate::routing::Fields;
use crate::wire::coding::{self, Coding};
use open::Miss;
use std::sync::Arc;

/// What a request to a `serve:` directory gets.
// A file answer's head facts are built on the stack; boxing them would cost every file
// answer an allocation to save a few hundred bytes of a value matched at once.
#[allow(clippy::large_enum_variant)]
pub enum Outcome<'f> {
    File(Served<'f>),
    /// The path names a directory: a redirect to the path with its `/` (and the query).
    Moved(String),
    /// 400 (a path no file has), 404, 405.
    Refused(Answer<'static>),
}

/// Why a path is refused with 400.
const MALFORMED: &str = "400 Bad Request: the path cannot name a file\n";

/// The answer to a request (`method`, its target in origin-form, its `fields`) from `files`.
pub async fn look_up<'f>(
    files: &'f Arc<Files>,
    method: &[u8],
    origin: &[u8],
    fields: &impl Fields,
) -> Outcome<'f> {
    let head = match method {
        b"GET" => false,
        b"HEAD" => true,
        _ => return Outcome::Refused(Answer::NotAllowed),
    };
    let (path, query) = match origin.iter().position(|&b| b == b'?') {
        Some(q) => (&origin[..q], Some(&origin[q..])),
        None => (origin, None),
    };
    let name = match path::name(files, path) {
        Ok(name) => name,
        Err(path::Refused::Malformed) => {
            return Outcome::Refused(Answer::Refusal {
                status: 400,
                why: MALFORMED,
            })
        }
        Err(path::Refused::Hidden) => return Outcome::Refused(Answer::NoFile),
    };
    let (accepts, n) = accepted(files, fields);
    let found = match open::find(files, &name, &accepts[..n], true) {
        Err(Miss::WouldBlock) => {
            let files = files.clone();
            tokio::task::spawn_blocking(move || open::find(&files, &name, &accepts[..n], false))
                .await
                .unwrap_or(Err(Miss::NotFound))
        }
        found => found,
    };
    match found {
        Ok(file) => Outcome::File(Served::decide(files, file, head, fields)),
        Err(Miss::Directory) => {
            let mut to = String::with_capacity(path.len() + 1 + query.map_or(0, <[u8]>::len));
            to.push_str(std::str::from_utf8(path).unwrap_or("/"));
            to.push('/');
            to.push_str(
                query
                    .and_then(|q| std::str::from_utf8(q).ok())
                    .unwrap_or(""),
            );
            Outcome::Moved(to)
        }
        Err(Miss::NotFound | Miss::WouldBlock) => Outcome::Refused(Answer::NoFile),
    }
}

/// The codings of precompressed siblings worth looking for, the client's favourite first.
fn accepted(files: &Files, fields: &impl Fields) -> ([Coding; 2], usize) {
    let mut out = [Coding::Br; 2];
    if !files.precompressed {
        return (out, 0);
    }
    let accept = fields.first(&http::header::ACCEPT_ENCODING);
    let Some(first) = coding::preferred(accept, &[Coding::Br, Coding::Gzip]) else {
        return (out, 0);
    };
    out[0] = first;
    let other = if first == Coding::Br {
        Coding::Gzip
    } else {
        Coding::Br
    };
    match coding::preferred(accept, &[other]) {
        Some(second) => {
            out[1] = second;
            (out, 2)
        }
        None => (out, 1),
    }
}
