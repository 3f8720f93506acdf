//! Opening a name under a `serve:` root: the kernel resolves it beneath the root
//! (`openat2` with `RESOLVE_BENEATH`: a symbolic link, `..` or mount that leads out fails
//! there, with no window between a check and the open), a directory gives its index, and a
//! precompressed sibling is taken when the client accepts its coding.
//!
//! [`find`] runs first on the request's thread with `RESOLVE_CACHED`, which fails with
//! `EAGAIN` rather than read a directory from disk; then again in tokio's blocking pool.

use super::path::Name;
use crate::config::{Files, Symlinks};
use crate::wire::coding::Coding;
use rustix::fd::OwnedFd;
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;
use std::sync::atomic::{AtomicBool, Ordering};

/// The file to answer with.
#[derive(Debug)]
pub struct Opened {
    pub file: OwnedFd,
    pub size: u64,
    /// Its modification time, seconds since the epoch.
    pub modified: i64,
    /// The media type of the name asked for (an index's, for a directory).
    pub content_type: &'static str,
    /// The coding of a precompressed sibling sent in its place.
    pub coding: Option<Coding>,
}

/// Why no file.
#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
    /// Nothing there that tether serves: 404.
    NotFound,
    /// A directory asked for without its `/`: redirected to it.
    Directory,
    /// The kernel's caches do not hold the lookup: done again where it may wait.
    WouldBlock,
}

/// Whether the kernel takes `RESOLVE_CACHED` (Linux 5.12); without it every lookup goes to
/// the blocking pool.
static NO_CACHED_LOOKUP: AtomicBool = AtomicBool::new(false);

/// Opens `name` under `files.root`; `cached`: only from the kernel's caches.
pub fn find(files: &Files, name: &Name, accepts: &[Coding], cached: bool) -> Result<Opened, Miss> {
    if cached && NO_CACHED_LOOKUP.load(Ordering::Relaxed) {
        return Err(Miss::WouldBlock);
    }
    let mut resolve = ResolveFlags::NO_MAGICLINKS;
    if files.symlinks == Symlinks::Inside {
        resolve |= ResolveFlags::BENEATH;
    }
    if cached {
        resolve |= ResolveFlags::CACHED;
    }
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let root = open(
        CWD,
        files.root.as_path(),
        dir,
        resolve - ResolveFlags::BENEATH,
    )?;
    let (file, stat) = regular_or_dir(&root, &name.relative, resolve)?;
    let (file, size, modified, shown) = match stat {
        Some(stat) => (file, stat.0, stat.1, &name.relative[..]),
        None if !name.slash => return Err(Miss::Directory),
        None => index(files, &root, &name.relative, resolve)?,
    };
    let content_type = media_type(shown);
    if files.precompressed && !accepts.is_empty() {
        let mut sibling = Vec::with_capacity(shown.len() + 4);
        for &coding in accepts {
            sibling.clear();
            sibling.extend_from_slice(shown);
            sibling.extend_from_slice(coding.suffix().as_bytes());
            match regular_or_dir(&root, &sibling, resolve) {
                Ok((file, Some((size, modified)))) => {
                    return Ok(Opened {
                        file,
                        size,
                        modified,
                        content_type,
                        coding: Some(coding),
                    })
                }
                Err(Miss::WouldBlock) => return Err(Miss::WouldBlock),
                _ => {}
            }
        }
    }
    Ok(Opened {
        file,
        size,
        modified,
        content_type,
        coding: None,
    })
}

/// The first of `files.index` in the directory `dir` (a name under `root`): its file,
/// size, time and name.
fn index<'a>(
    files: &'a Files,
    root: &OwnedFd,
    dir: &[u8],
    resolve: ResolveFlags,
) -> Result<(OwnedFd, u64, i64, &'a [u8]), Miss> {
    let mut path = Vec::with_capacity(dir.len() + 16);
    for name in &files.index {
        path.clear();
        if dir != b"." {
            path.extend_from_slice(dir);
            path.push(b'/');
        }
        path.extend_from_slice(name.as_bytes());
        match regular_or_dir(root, &path, resolve) {
            Ok((file, Some((size, modified)))) => {
                return Ok((file, size, modified, name.as_bytes()))
            }
            Err(Miss::WouldBlock) => return Err(Miss::WouldBlock),
            _ => {}
        }
    }
    Err(Miss::NotFound)
}

/// Opens `name` under `root`: a regular file with its size and time, or a directory
/// (`None`). Anything else (a device, a FIFO, a socket) is not found.
fn regular_or_dir(
    root: &OwnedFd,
    name: &[u8],
    resolve: ResolveFlags,
) -> Result<(OwnedFd, Option<(u64, i64)>), Miss> {
    // NONBLOCK: opening a FIFO must not wait for a writer (it is refused after the stat).
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    let file = open(root, name, flags, resolve)?;
    let stat = rustix::fs::fstat(&file).map_err(|_| Miss::NotFound)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {
            let size = u64::try_from(stat.st_size).unwrap_or(0);
            Ok((file, Some((size, stat.st_mtime))))
        }
        FileType::Directory => Ok((file, None)),
        _ => Err(Miss::NotFound),
    }
}

fn open<Fd: rustix::fd::AsFd>(
    at: Fd,
    name: impl rustix::path::Arg,
    flags: OFlags,
    resolve: ResolveFlags,
) -> Result<OwnedFd, Miss> {
    match rustix::fs::openat2(at, name, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(fd),
        Err(Errno::AGAIN) => Err(Miss::WouldBlock),
        // A kernel without `RESOLVE_CACHED` refuses the flag itself.
        Err(Errno::INVAL) if resolve.contains(ResolveFlags::CACHED) => {
            NO_CACHED_LOOKUP.store(true, Ordering::Relaxed);
            Err(Miss::WouldBlock)
        }
        // Missing, not a directory on the way, out of the root (EXDEV), a link loop,
        // unreadable: all the same to the client.
        Err(_) => Err(Miss::NotFound),
    }
}

/// The media type of a name, by its extension (`application/octet-stream` when unknown);
/// text gets its charset, as browsers otherwise guess one.
fn media_type(name: &[u8]) -> &'static str {
    let name = std::str::from_utf8(name).unwrap_or_default();
    let ext = match name.rsplit_once('.') {
        Some((_, ext)) if !ext.contains('/') => ext,
        _ => return "application/octet-stream",
    };
    match ext.to_ascii_lowercase().as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "txt" => "text/plain; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        _ => mime_guess::from_ext(ext)
            .first_raw()
            .unwrap_or("application/octet-stream"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types() {
        assert_eq!(media_type(b"a/index.html"), "text/html; charset=utf-8");
        assert_eq!(media_type(b"x.PNG"), "image/png");
        assert_eq!(media_type(b"app.js"), "text/javascript; charset=utf-8");
        assert_eq!(media_type(b"font.woff2"), "font/woff2");
        assert_eq!(media_type(b"README"), "application/octet-stream");
        assert_eq!(media_type(b"a.d/README"), "application/octet-stream");
        assert_eq!(media_type(b"x.unknownext"), "application/octet-stream");
    }

    fn files(root: &std::path::Path, precompressed: bool) -> Files {
        Files {
            root: root.to_path_buf(),
            strip_prefix: None,
            index: vec!["index.htm".into(), "index.html".into()],
            cache_control: None,
            precompressed,
            dot_files: false,
            symlinks: Symlinks::Inside,
        }
    }

    fn name(relative: &str, slash: bool) -> Name {
        Name {
            relative: relative.as_bytes().to_vec(),
            slash,
        }
    }

    #[test]
    fn the_blocking_lookup_finds_what_the_cached_one_does() {
        let dir = std::env::temp_dir().join(format!("tether-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("root");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(dir.join("outside.txt"), "no").unwrap();
        std::fs::write(root.join("d/index.html"), "index").unwrap();
        std::fs::write(root.join("a.css"), "plain").unwrap();
        std::fs::write(root.join("a.css.gz"), "gz").unwrap();
        std::os::unix::fs::symlink("../outside.txt", root.join("out")).unwrap();
        std::os::unix::fs::symlink("a.css", root.join("in.css")).unwrap();
        let plain = files(&root, false);
        let squeezed = files(&root, true);
        let gzip = [Coding::Br, Coding::Gzip];
        // The blocking lookup decides; the cached one gives the same answer or leaves it
        // to the blocking one (a link it would have to read, a name it has not seen), and
        // once a name was looked up, finds it without waiting.
        let html = "text/html; charset=utf-8";
        let css = "text/css; charset=utf-8";
        let cases: [(&Files, Name, &[Coding], Result<_, Miss>); 9] = [
            (&plain, name("d", true), &[], Ok((5, html, None))),
            (&plain, name("d", false), &[], Err(Miss::Directory)),
            (&plain, name(".", true), &[], Err(Miss::NotFound)),
            (&plain, name("a.css", false), &gzip, Ok((5, css, None))),
            (
                &squeezed,
                name("a.css", false),
                &gzip,
                Ok((2, css, Some(Coding::Gzip))),
            ),
            (&squeezed, name("a.css", false), &[], Ok((5, css, None))),
            (&plain, name("in.css", false), &[], Ok((5, css, None))),
            (&plain, name("out", false), &[], Err(Miss::NotFound)),
            (&plain, name("nothing", false), &[], Err(Miss::NotFound)),
        ];
        let found = |f: &Files, n: &Name, accepts: &[Coding], cached| {
            find(f, n, accepts, cached).map(|o| (o.size, o.content_type, o.coding))
        };
        for (f, n, accepts, expected) in &cases {
            assert_eq!(&found(f, n, accepts, false), expected, "{n:?}");
        }
        for (f, n, accepts, expected) in &cases {
            let cached = found(f, n, accepts, true);
            assert!(
                &cached == expected || cached == Err(Miss::WouldBlock),
                "{n:?}: {cached:?}"
            );
            if n.relative == b"a.css" {
                assert_eq!(
                    &cached, expected,
                    "a name looked up before is in the caches"
                );
            }
        }
        let mut any = files(&root, false);
        any.symlinks = Symlinks::Any;
        assert!(find(&any, &name("out", false), &[], false).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
