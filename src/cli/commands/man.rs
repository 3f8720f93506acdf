//! `tether man`: the manual pages in roff, rendered by clap_mangen from the clap definitions
//! `--help` shows, so the two cannot disagree. One page per command, as git and cargo have
//! them: `tether(1)` lists the subcommands, each in its own `tether-SUBCOMMAND(1)`.

use clap_mangen::Man;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Prints the page of `tether` (`path` empty) or of the subcommand `path` names (`["import",
/// "mod_jk"]`) to stdout; with `dir`, writes every page there instead (the Debian package's).
pub fn run(cli: clap::Command, path: &[String], dir: Option<&Path>) -> ExitCode {
    let root = prepare(cli);
    let result = match dir {
        Some(dir) => write_all(&root, dir),
        None => match find(&root, path) {
            Some(cmd) => {
                let mut page = Vec::new();
                render(&root, cmd, &mut page)
                    .and_then(|()| std::io::stdout().lock().write_all(&page))
            }
            None => {
                eprintln!(
                    "tether man: no subcommand `{}` (see `tether --help`)",
                    path.join(" ")
                );
                return ExitCode::from(2);
            }
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tether man: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The command tree as the pages show it: built (so each subcommand knows its full name,
/// `tether drain`), without clap's `help` subcommand, which `--help` covers.
fn prepare(cli: clap::Command) -> clap::Command {
    let mut root = cli.disable_help_subcommand(true);
    root.build();
    root
}

/// The subcommand that `path` names (aliases too, as the command line takes them).
fn find<'a>(root: &'a clap::Command, path: &[String]) -> Option<&'a clap::Command> {
    path.iter()
        .try_fold(root, |cmd, name| cmd.find_subcommand(name))
}

/// Where the rest of the manual is, on tether's own page (roff; nothing in it to escape).
const SEE_ALSO: &str = ".SH \"SEE ALSO\"\nThe manual: README.md and docs/ in the source tree, \
    installed by the Debian package in\n.IR /usr/share/doc/tether/ .\n";

/// One page, for `cmd` under `root`; the root's page says where the rest of the manual is.
fn render(root: &clap::Command, cmd: &clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let version = root.get_version().unwrap_or_default();
    let man = Man::new(cmd.clone())
        .source(format!("tether {version}"))
        .manual("tether manual");
    let mut page = Vec::new();
    man.render(&mut page)?;
    if std::ptr::eq(root, cmd) {
        // Before the closing VERSION section, where SEE ALSO goes on a man page.
        let at = page
            .windows(12)
            .position(|w| w == b".SH VERSION\n")
            .unwrap_or(page.len());
        page.splice(at..at, SEE_ALSO.bytes());
    }
    w.write_all(&page)
}

/// Every page of the tree (hidden subcommands left out) into `dir`, one file each, named
/// as the pages call each other: `tether.1`, `tether-drain.1`, `tether-import-mod_jk.1`.
fn write_all(root: &clap::Command, dir: &Path) -> std::io::Result<()> {
    fn walk<'a>(cmd: &'a clap::Command, out: &mut Vec<&'a clap::Command>) {
        out.push(cmd);
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, out);
        }
    }
    let mut commands = Vec::new();
    walk(root, &mut commands);
    std::fs::create_dir_all(dir)?;
    for cmd in commands {
        let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
        let file = dir.join(format!("{name}.1"));
        let mut page = Vec::new();
        render(root, cmd, &mut page)?;
        std::fs::write(&file, page)?;
        println!("{}", file.display());
    }
    Ok(())
}
