//! Command-line flags shared by the benchmark's example proxies (`bare_pingora`, `lean_h1`).

pub struct Args {
    pub listen: String,
    pub threads: usize,
    pub work_stealing: bool,
    pub forwarded: bool,
    pub timeouts: bool,
    pub upstreams: Vec<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: bare_pingora|lean_h1 [--listen ADDR] [--threads N] [--work-stealing true|false] [--forwarded]\n\
         \x20                   [--timeouts]\n\
         \x20                   [--upstream ADDR,ADDR,...]\n\
         (or BARE_LISTEN, BARE_THREADS, BARE_WORK_STEALING, BARE_FORWARDED=1, BARE_TIMEOUTS=1,\n\
         \x20BARE_UPSTREAMS)"
    );
    std::process::exit(2)
}

pub fn parse_args() -> Args {
    let env = |k: &str| std::env::var(k).ok();
    let mut listen = env("BARE_LISTEN").unwrap_or_else(|| "127.0.0.1:6188".into());
    let mut threads: usize = env("BARE_THREADS")
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let mut work_stealing: bool = env("BARE_WORK_STEALING")
        .and_then(|t| t.parse().ok())
        .unwrap_or(true);
    let flag = |k: &str| env(k).is_some_and(|v| v == "1" || v == "true");
    let mut forwarded = flag("BARE_FORWARDED");
    let mut timeouts = flag("BARE_TIMEOUTS");
    let mut upstreams = env("BARE_UPSTREAMS").unwrap_or_default();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--listen" => listen = val(),
            "--threads" => threads = val().parse().unwrap_or_else(|_| usage()),
            "--work-stealing" => work_stealing = val().parse().unwrap_or_else(|_| usage()),
            "--forwarded" => forwarded = true,
            "--timeouts" => timeouts = true,
            "--upstream" | "--upstreams" => upstreams = val(),
            _ => usage(),
        }
    }
    let upstreams: Vec<String> = upstreams
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    if upstreams.is_empty() || threads == 0 {
        usage();
    }
    Args {
        listen,
        threads,
        work_stealing,
        forwarded,
        timeouts,
        upstreams,
    }
}

/// A Pingora server for `args`, bootstrapped, stopping at once on a signal.
pub fn server(args: &Args) -> pingora_core::server::Server {
    use pingora_core::server::configuration::{Opt, ServerConf};
    let conf = ServerConf {
        threads: args.threads,
        work_stealing: args.work_stealing,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(0),
        ..ServerConf::default()
    };
    let mut server = pingora_core::server::Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();
    server
}
