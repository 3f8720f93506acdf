//! The WebSphere-like backend: every response announces partitions no response announced
//! before.

use super::*;

pub(crate) async fn serve(f: &HashMap<String, String>) -> Res<()> {
    let addrs = list(f.get("listen").unwrap_or_else(|| usage()));
    let clones = Arc::new(list(f.get("clones").unwrap_or_else(|| usage())));
    let fresh: u64 = f.get("fresh").map_or(Ok(64), |v| v.parse())?;
    if clones.is_empty() || addrs.is_empty() {
        usage()
    }
    let next = Arc::new(AtomicU64::new(1));
    let mut tasks = Vec::new();
    for (i, a) in addrs.iter().enumerate() {
        let listener = TcpListener::bind(a.as_str()).await?;
        let (next, clones) = (next.clone(), clones.clone());
        let name = format!("was{}", i + 1);
        tasks.push(tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let (next, clones, name) = (next.clone(), clones.clone(), name.clone());
                tokio::spawn(async move {
                    let _ = connection(s, &next, &clones, &name, fresh).await;
                });
            }
        }));
    }
    eprintln!("fleet_lag: serving on {}", addrs.join(", "));
    for t in tasks {
        t.await?;
    }
    Ok(())
}

/// One keep-alive connection: GET requests without bodies, each answered with `fresh` new
/// partitions in `$WSPT`.
pub(crate) async fn connection(
    s: TcpStream,
    next: &AtomicU64,
    clones: &[String],
    name: &str,
    fresh: u64,
) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let (r, mut w) = s.into_split();
    let mut r = BufReader::new(r);
    let mut line = String::new();
    loop {
        // The request head, to its empty line.
        let mut close = false;
        loop {
            line.clear();
            if r.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if l.to_ascii_lowercase().starts_with("connection:") && l.contains("close") {
                close = true;
            }
        }
        let first = next.fetch_add(fresh, Relaxed);
        let mut wspt = String::with_capacity(fresh as usize * 16);
        for k in first..first + fresh {
            if !wspt.is_empty() {
                wspt.push_str(", ");
            }
            let clone = &clones[(k % clones.len() as u64) as usize];
            wspt.push_str(&format!("f{k}={clone}"));
        }
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Server: {name}\r\n$WSPT: {wspt}\r\n\r\nok\n"
        );
        w.write_all(resp.as_bytes()).await?;
        if close {
            return Ok(());
        }
    }
}
