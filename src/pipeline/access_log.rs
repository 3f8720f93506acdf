//! The access log: one JSON line per request, written by a thread of its own.
//!
//! The request path only moves a small record into a bounded channel (`try_send`): it
//! never formats, never touches the file and never waits. When the writer falls behind
//! and the channel is full, the line is dropped and counted
//! (`tether_access_log_dropped_total`) rather than slowing requests down.
//!
//! The file is opened when the server is built (a bad path fails the start), but the writer
//! thread starts with the background services, after Pingora daemonized (`-d`, upgrade):
//! threads do not survive `fork`. `SIGUSR1` reopens the file (for logrotate). Session ids
//! in paths are masked by default (`mask_session_ids`).

mod mask;

use crate::config::AccessLogSettings;
use crate::metrics::ACCESS_LOG_DROPPED;
use crate::routing::{ClusterRouter, Outcome};
use async_trait::async_trait;
use log::{info, warn};
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use serde::Serialize;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Records waiting for the writer.
const QUEUE: usize = 65_536;
/// The writer flushes at least this often.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// What the request path hands over; everything cheap to move.
pub struct Record {
    pub time: SystemTime,
    pub client: Option<IpAddr>,
    pub method: http::Method,
    pub uri: http::Uri,
    pub status: u16,
    pub duration: Duration,
    pub router: Option<Arc<ClusterRouter>>,
    pub server: Option<usize>,
    pub outcome: Option<Outcome>,
    pub rejected: bool,
    pub attempts: usize,
    /// The request's HTTP version.
    pub version: http::Version,
    /// The client connection's TLS version (`TLSv1.3`), when it is TLS.
    pub tls: Option<std::borrow::Cow<'static, str>>,
    /// The host/path route the request matched, when routes are configured.
    pub route: Option<Arc<str>>,
    /// Fields the plugins added (a script's `log` phase), written under `fields`.
    pub fields: Vec<(Box<str>, Box<str>)>,
}

/// What the writer thread is told.
enum Msg {
    Line(Box<Record>),
    /// Close and reopen the file (after logrotate moved it).
    Reopen,
    /// Write out what is buffered, then say so (the process is about to exit).
    Flush(SyncSender<()>),
}

/// Every log's writer queue, for the last flush of a process that exits on its own
/// (`flush_all`).
static QUEUES: Mutex<Vec<SyncSender<Msg>>> = Mutex::new(Vec::new());

/// Writes out every access log's queued lines, waiting at most `within` for each: the
/// process exits next, and a line of the last requests must not be lost.
pub fn flush_all(within: Duration) {
    let queues = QUEUES.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for tx in queues {
        let (done, flushed) = mpsc::sync_channel(1);
        if tx.send(Msg::Flush(done)).is_ok() {
            let _ = flushed.recv_timeout(within);
        }
    }
}

/// One line of the log, as written.
#[derive(Serialize)]
struct Line<'a> {
    time: String,
    client: Option<String>,
    method: &'a str,
    path: &'a str,
    status: u16,
    duration_ms: f64,
    cluster: Option<&'a str>,
    server: Option<&'a str>,
    outcome: &'a str,
    attempts: usize,
    protocol: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tls: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    route: Option<&'a str>,
    #[serde(skip_serializing_if = "Fields::is_empty")]
    fields: Fields<'a>,
}

/// Plugins' fields, as a JSON object in the order they were added.
struct Fields<'a>(&'a [(Box<str>, Box<str>)]);

impl Fields<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Fields<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(n, v)| (&**n, &**v)))
    }
}

/// The request path's end of the log.
pub struct AccessLog {
    tx: SyncSender<Msg>,
}

/// The writer's end, started as a background service (after daemonizing).
pub struct AccessLogWriter {
    tx: SyncSender<Msg>,
    state: Mutex<Option<WriterState>>,
}

struct WriterState {
    rx: Receiver<Msg>,
    file: File,
    path: PathBuf,
    mask: bool,
}

fn open_append(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

impl AccessLog {
    /// Opens (appends to) the file; the writer runs once `AccessLogWriter` is started.
    pub fn open(settings: &AccessLogSettings) -> io::Result<(AccessLog, AccessLogWriter)> {
        let file = open_append(&settings.path)?;
        let (tx, rx) = mpsc::sync_channel::<Msg>(QUEUE);
        let writer = AccessLogWriter {
            tx: tx.clone(),
            state: Mutex::new(Some(WriterState {
                rx,
                file,
                path: settings.path.clone(),
                mask: settings.mask_session_ids,
            })),
        };
        QUEUES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx.clone());
        Ok((AccessLog { tx }, writer))
    }

    /// Queues a record; drops (and counts) it when the writer is behind.
    pub fn log(&self, record: Record) {
        match self.tx.try_send(Msg::Line(Box::new(record))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                ACCESS_LOG_DROPPED.inc()
            }
        }
    }
}

impl WriterState {
    /// The writer thread's loop: lines, reopen requests and a periodic flush.
    fn run(self) {
        let WriterState {
            rx,
            file,
            path,
            mask,
        } = self;
        let shown = path.display().to_string();
        let mut out = BufWriter::new(file);
        loop {
            match rx.recv_timeout(FLUSH_EVERY) {
                Ok(Msg::Line(record)) => {
                    if let Err(e) = write_line(&mut out, &record, mask) {
                        warn!("access log {shown}: {e}");
                    }
                }
                Ok(Msg::Reopen) => {
                    let _ = out.flush();
                    match open_append(&path) {
                        Ok(f) => {
                            out = BufWriter::new(f);
                            info!("access log {shown} reopened (SIGUSR1)");
                        }
                        Err(e) => warn!(
                            "access log {shown}: cannot reopen, still writing to the old file: {e}"
                        ),
                    }
                }
                Ok(Msg::Flush(done)) => {
                    let _ = out.flush();
                    let _ = done.try_send(());
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = out.flush();
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let _ = out.flush();
    }
}

#[async_trait]
impl BackgroundService for AccessLogWriter {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(state) = state {
            if let Err(e) = std::thread::Builder::new()
                .name("tether-access-log".into())
                .spawn(move || state.run())
            {
                warn!("cannot start the access log writer: {e}");
                return;
            }
        }
        use tokio::signal::unix::{signal, SignalKind};
        let mut usr1 = match signal(SignalKind::user_defined1()) {
            Ok(s) => s,
            Err(e) => {
                warn!("cannot listen for SIGUSR1 (access log reopen): {e}");
                let _ = shutdown.changed().await;
                return;
            }
        };
        loop {
            tokio::select! {
                Some(()) = usr1.recv() => {
                    // Blocking send: a reopen must not be dropped when the queue is full.
                    let tx = self.tx.clone();
                    let _ = tokio::task::spawn_blocking(move || tx.send(Msg::Reopen)).await;
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}

fn write_line(out: &mut impl Write, r: &Record, mask: bool) -> io::Result<()> {
    let router = r.router.as_deref();
    let server = r
        .server
        .zip(router)
        .map(|(i, rt)| rt.servers()[i].config.name.as_str());
    let outcome = match (r.rejected, r.outcome) {
        (true, _) => "rejected",
        (false, Some(o)) => o.as_str(),
        (false, None) => "none",
    };
    let raw_path = r.uri.path_and_query().map_or("/", |p| p.as_str());
    let path = if mask {
        let names = router.map_or([b"jsessionid".as_slice(), b"jsessionid"], |rt| {
            rt.session_names()
        });
        mask::session_ids(raw_path, &names)
    } else {
        raw_path.into()
    };
    let line = Line {
        time: rfc3339(r.time),
        client: r.client.map(|c| c.to_string()),
        method: r.method.as_str(),
        path: &path,
        status: r.status,
        duration_ms: (r.duration.as_secs_f64() * 1e6).round() / 1e3,
        cluster: router.map(|rt| rt.name.as_str()),
        server: if r.rejected { None } else { server },
        outcome,
        attempts: r.attempts,
        protocol: match r.version {
            http::Version::HTTP_2 => "HTTP/2",
            http::Version::HTTP_3 => "HTTP/3",
            http::Version::HTTP_10 => "HTTP/1.0",
            http::Version::HTTP_09 => "HTTP/0.9",
            _ => "HTTP/1.1",
        },
        tls: r.tls.as_deref(),
        route: r.route.as_deref(),
        fields: Fields(&r.fields),
    };
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n")
}

/// `2026-11-30T10:40:52.123Z`, from the civil-from-days algorithm (no calendar crate).
fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        let at = |s: u64, ms: u64| UNIX_EPOCH + Duration::from_millis(s * 1000 + ms);
        assert_eq!(rfc3339(at(0, 0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(951_782_400, 5)), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(at(1_796_035_252, 123)), "2026-11-30T10:40:52.123Z");
    }

    #[test]
    fn lines_are_json_with_every_field() {
        let mut out = Vec::new();
        let record = Record {
            time: UNIX_EPOCH,
            client: Some("10.0.0.7".parse().unwrap()),
            method: http::Method::GET,
            uri: "/shop/cart?q=%221%22".parse().unwrap(),
            status: 200,
            duration: Duration::from_micros(1_234),
            router: None,
            server: None,
            outcome: Some(Outcome::NewSession),
            rejected: false,
            attempts: 1,
            version: http::Version::HTTP_11,
            tls: None,
            route: None,
            fields: vec![("user".into(), "001".into())],
        };
        write_line(&mut out, &record, true).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["path"], "/shop/cart?q=%221%22");
        assert_eq!(v["status"], 200);
        assert_eq!(v["duration_ms"], 1.234);
        assert_eq!(v["outcome"], "new_session");
        assert_eq!(v["client"], "10.0.0.7");
        assert_eq!(v["fields"]["user"], "001");
        assert!(out.ends_with(b"\n"));
    }

    #[test]
    fn session_ids_are_masked_unless_switched_off() {
        let record = |uri: &str| Record {
            time: UNIX_EPOCH,
            client: None,
            method: http::Method::GET,
            uri: uri.parse().unwrap(),
            status: 200,
            duration: Duration::ZERO,
            router: None,
            server: None,
            outcome: None,
            rejected: false,
            attempts: 1,
            version: http::Version::HTTP_11,
            tls: None,
            route: None,
            fields: Vec::new(),
        };
        let path = |mask: bool| {
            let mut out = Vec::new();
            write_line(&mut out, &record("/a;jsessionid=SECRET.tc1?q=1"), mask).unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            v["path"].as_str().unwrap().to_string()
        };
        assert_eq!(path(true), "/a;jsessionid=***.tc1?q=1");
        assert_eq!(path(false), "/a;jsessionid=SECRET.tc1?q=1");
    }
}
