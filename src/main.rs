//! tether's command line: parse it, then check the config, run the proxy or run the demo.

use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tether::process::service::{build_server, RunOptions};

// jemalloc: a proxy makes many small, short-lived objects per request, which jemalloc serves
// from thread caches where glibc's malloc takes a visible share of a core; and it gives
// memory back (mimalloc was as fast but held several times the memory of many idle
// connections, glibc kept growing when they came again). The measurements are in
// CHANGELOG.md and bench/README.md.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "tether",
    version,
    about = "Sticky-session reverse proxy for Java application servers",
    long_about = "Sticky-session reverse proxy for Java application servers: keeps each HTTP \
        session on the server that holds it, with mod_jk's rules and WebSphere's partition \
        tables.\n\n\
        With -c FILE it runs the proxy FILE describes; with -t it checks FILE and exits. \
        Signals: SIGHUP reloads the config, SIGTERM stops gracefully, SIGINT stops at once, \
        SIGQUIT hands the listening sockets to a process started with -u, SIGUSR1 reopens \
        the access log, SIGUSR2 (under systemd) starts the new binary of `tether upgrade`."
)]
struct Cli {
    /// tether's YAML config file.
    #[arg(short = 'c', long = "conf", value_name = "FILE", global = true)]
    conf: Option<PathBuf>,
    /// Check the config file and exit (non-zero on error).
    #[arg(short = 't', long = "test")]
    test: bool,
    /// Take over from a running instance (graceful binary upgrade).
    #[arg(short = 'u', long = "upgrade")]
    upgrade: bool,
    /// Run in the background.
    #[arg(short = 'd', long = "daemon")]
    daemon: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Start simulated Tomcat servers behind tether, run a scripted scenario, keep serving.
    Demo {
        /// Address for the demo's tether listener (default 127.0.0.1:8080, or a free port).
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
        /// Run two tether instances sharing one redis-server instead (needs redis-server).
        #[arg(long, conflicts_with = "listen")]
        fleet: bool,
    },
    /// Replace the running tether with a new binary, without dropping a connection.
    ///
    /// The running tether is found through the config's pid_file; the new binary is this
    /// one, or --binary, and runs in the background.
    Upgrade {
        /// The new binary (default: this one).
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
    },
    /// Drain a server through the admin API; with --wait, until its last session ended.
    ///
    /// With --wait, the command returns once the server's last live session has expired
    /// (exit 0), or at the timeout (exit 1).
    Drain {
        /// The server to drain, as CLUSTER/SERVER (names from the config file).
        #[arg(value_name = "CLUSTER/SERVER")]
        target: String,
        /// Wait until the server has no live session, printing how many are left.
        #[arg(long)]
        wait: bool,
        /// Give up waiting after this long (e.g. 45m; with --wait).
        #[arg(
            long,
            value_name = "DURATION",
            default_value = "1h",
            requires = "wait",
            value_parser = duration
        )]
        timeout: std::time::Duration,
        /// What to do once empty: `stop` the server.
        #[arg(long, value_name = "ACTION", value_parser = ["stop"], requires = "wait")]
        then: Option<String>,
        /// How often to look while waiting.
        #[arg(long, default_value = "2s", value_parser = duration, hide = true)]
        every: std::time::Duration,
    },
    /// Explain where a request would go under the config file (every server up), and why.
    Explain {
        /// `METHOD URL` or `URL`, e.g. 'GET /shop/cart;jsessionid=ABC.n1'
        #[arg(value_name = "REQUEST")]
        request: String,
        /// A request field, `Name: value` (repeatable).
        #[arg(short = 'H', long = "header", value_name = "FIELD")]
        headers: Vec<String>,
        /// The listener it arrives on (default: the first).
        #[arg(long, value_name = "NAME")]
        listener: Option<String>,
    },
    /// Print a tether config made from a mod_jk or WebSphere plug-in config.
    Import {
        #[command(subcommand)]
        source: tether::config::import::Source,
    },
    /// Print tether's manual page in roff (read it with `tether man | man -l -`).
    Man {
        /// The subcommand whose page to print instead, e.g. `drain` or `import mod_jk`.
        #[arg(value_name = "SUBCOMMAND")]
        subcommand: Vec<String>,
        /// Write every page (tether.1, tether-SUBCOMMAND.1) into this directory instead.
        #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
        dir: Option<PathBuf>,
    },
}

impl Command {
    /// A command that prints a result and ends (not one that runs a server).
    fn prints(&self) -> bool {
        matches!(
            self,
            Command::Import { .. } | Command::Man { .. } | Command::Explain { .. }
        )
    }
}

/// A duration on the command line (`45m`, `2s`), as in the config file.
fn duration(text: &str) -> Result<std::time::Duration, String> {
    tether_plugins::parse_duration(text)
}

/// Pingora builds each listener in its service's thread and panics there when it cannot
/// bind (after ~30 tries); the process would keep running without that listener. Exit
/// instead, with one line.
fn exit_on_listener_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.contains("Failed to build listeners") {
            log::error!("tether: a listener could not be opened, exiting: {message}");
            eprintln!("tether: a listener could not be opened, exiting: {message}");
            std::process::exit(1);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    // SIGUSR1 reopens the access log once the services run; until then, and without an
    // access log, it must not kill the process (its default action). logrotate sends it.
    // SIGUSR2 likewise: under systemd it starts the new binary of an upgrade.
    // SAFETY: setting a signal's disposition to SIG_IGN at start, before any thread.
    unsafe {
        libc::signal(libc::SIGUSR1, libc::SIG_IGN);
        libc::signal(libc::SIGUSR2, libc::SIG_IGN);
    }
    tether::process::logging::init();
    let cli = Cli::parse();
    if cli.command.as_ref().is_some_and(Command::prints) {
        // A command whose output goes into a pipe ends quietly when the reader stops
        // (`tether explain ... | head`), as other Unix tools do, instead of panicking on
        // the write Rust's ignored SIGPIPE turns into an error.
        // SAFETY: restoring a signal's default disposition at start, before any thread.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.command {
        Some(Command::Demo { fleet: true, .. }) => return tether::cli::demo::run_fleet(),
        Some(Command::Demo { listen, .. }) => return tether::cli::demo::run(listen),
        Some(Command::Import { source }) => return tether::config::import::run(source),
        Some(Command::Man { subcommand, dir }) => {
            return tether::cli::commands::man::run(Cli::command(), &subcommand, dir.as_deref())
        }
        Some(Command::Drain {
            target,
            wait,
            timeout,
            then,
            every,
        }) => {
            let Some(conf) = cli.conf else {
                eprintln!("tether drain: give the config file with -c FILE (for the admin API's address and token)");
                return ExitCode::from(2);
            };
            let config = match tether::config::load(&conf) {
                Ok(c) => c,
                Err(errors) => {
                    eprint!("{errors}");
                    return ExitCode::from(2);
                }
            };
            let drain = tether::cli::commands::drain::Drain {
                target,
                wait,
                timeout,
                then_stop: then.is_some(),
                every,
            };
            return tether::cli::commands::drain::run(&config, &drain);
        }
        Some(Command::Explain {
            request,
            headers,
            listener,
        }) => {
            let Some(conf) = cli.conf else {
                eprintln!("tether explain: give the config file with -c FILE");
                return ExitCode::from(2);
            };
            return match tether::config::load(&conf) {
                Ok(config) => {
                    tether::cli::commands::explain::run(&config, &request, &headers, listener)
                }
                Err(errors) => {
                    eprint!("{errors}");
                    ExitCode::from(2)
                }
            };
        }
        Some(Command::Upgrade { binary }) => {
            let Some(conf) = cli.conf else {
                eprintln!("tether upgrade: give the config file with -c FILE");
                return ExitCode::from(2);
            };
            return tether::process::upgrade::run(&conf, binary);
        }
        None => {}
    }
    let Some(path) = cli.conf else {
        eprintln!("tether: no config file given (use -c FILE, or `tether demo`)");
        return ExitCode::from(2);
    };
    let config = match tether::config::load(&path) {
        Ok(c) => c,
        Err(errors) => {
            eprint!("{errors}");
            return ExitCode::from(1);
        }
    };
    for line in tether::config::warning_lines(&config, &path.display().to_string()) {
        if cli.test {
            eprintln!("{line}");
        } else {
            log::warn!("{line}");
        }
    }
    if cli.test {
        println!("{}: configuration is valid", path.display());
        return ExitCode::SUCCESS;
    }
    let run = RunOptions {
        upgrade: cli.upgrade,
        daemon: cli.daemon,
    };
    // A listener that cannot bind is one clear line and a non-zero exit (with -u the
    // sockets come from the running process; Pingora binds only the new addresses).
    if !run.upgrade {
        if let Err(e) = tether::process::bind_check::check(&config) {
            eprintln!("tether: {e}");
            return ExitCode::FAILURE;
        }
    }
    let mut config = config;
    let daemon = run.daemon || config.server.daemon;
    let pid_file = PathBuf::from(&config.server.pid_file);
    if daemon {
        // In the background, stderr is the starting shell's (perhaps closed) terminal:
        // logs go to a file, `server.error_log` or next to the pid file.
        let log = config.server.error_log.get_or_insert_with(|| {
            pid_file
                .with_extension("log")
                .to_string_lossy()
                .into_owned()
        });
        eprintln!("tether: running in the background; logs go to {log}");
    }
    exit_on_listener_panic();
    match build_server(config, Some(path), run) {
        Ok((server, control)) => {
            if !daemon {
                // Pingora writes the pid file only when it daemonizes.
                tether::process::upgrade::write_pid_file(&pid_file);
            }
            let mut server = server;
            tether::metrics::register_heap();
            server.add_service(pingora_core::services::background::background_service(
                "allocator",
                tether::process::free_memory::ReturnFreedMemory,
            ));
            let phases = server.watch_execution_phase();
            let signals = tether::process::signals::Signals::new(control.clone());
            server.run(pingora_core::server::RunArgs {
                shutdown_signal: Box::new(signals),
            });
            tether::process::systemd::after_run(phases);
            // Pingora cancels background tasks at shutdown; the last save happens here,
            // after the last request, so a restart or upgrade finds the whole table.
            if let Some(dir) = &control.config().state_dir {
                tether::services::persist::save_all(control.snapshot(), dir);
            }
            tether::process::upgrade::remove_pid_file(&pid_file.to_string_lossy());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tether: {e}");
            ExitCode::FAILURE
        }
    }
}
