//! The command line the manual shows is the one the binary has: every `tether ...` command
//! line in README.md and docs/*.md (code spans, and `sh`/`console` code blocks) names only
//! subcommands that `tether --help` lists and flags that the subcommand's own `--help`
//! lists. Every subcommand has a one-line description and every flag a help line, and
//! `--version` and `tether man` answer. Runs the binary only: no server, no network.
//!
//! `CLI_HELP_DOCS=DIR` checks the README.md and docs/ under DIR instead of this repository's
//! (a scratch copy, to see the test catch a made-up flag).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const TETHER: &str = env!("CARGO_BIN_EXE_tether");

/// Spans that begin with `tether ` but are names, not command lines.
const NOT_COMMANDS: &[&str] = &[];

/// Code block languages whose lines are shell command lines.
const SHELL_BLOCKS: &[&str] = &["sh", "bash", "shell", "console", "zsh"];

/// A flag as a command's `--help` lists it.
#[derive(Debug)]
struct Flag {
    short: Option<char>,
    long: Option<String>,
    takes_value: bool,
    help: String,
}

/// What one command's `--help` shows: its subcommands (name, description) and its flags.
#[derive(Debug, Default)]
struct Help {
    commands: Vec<(String, String)>,
    flags: Vec<Flag>,
}

impl Help {
    fn parse(text: &str) -> Help {
        #[derive(PartialEq)]
        enum Section {
            Other,
            Commands,
            Flags,
        }
        let mut help = Help::default();
        let mut section = Section::Other;
        for line in text.lines() {
            if line.trim().is_empty() {
                continue; // clap's long form puts a blank line between flags
            }
            if !line.starts_with(' ') {
                section = match line.trim_end() {
                    "Commands:" => Section::Commands,
                    "Options:" => Section::Flags,
                    _ => Section::Other,
                };
                continue;
            }
            let indent = line.len() - line.trim_start().len();
            let body = line.trim();
            let starts_entry = match section {
                Section::Commands => indent == 2,
                // `  -c, --conf <FILE>`, or `      --wait` when there is no short form.
                Section::Flags => indent <= 6 && body.starts_with('-'),
                Section::Other => false,
            };
            if !starts_entry {
                // A description wrapped, or put on the next line (clap's long form).
                let last = match section {
                    Section::Commands => help.commands.last_mut().map(|c| &mut c.1),
                    Section::Flags => help.flags.last_mut().map(|f| &mut f.help),
                    Section::Other => None,
                };
                if let Some(last) = last {
                    last.push(' ');
                    last.push_str(body);
                }
                continue;
            }
            let (spec, description) = body.split_once("  ").unwrap_or((body, ""));
            let description = description.trim().to_string();
            match section {
                Section::Commands => help.commands.push((spec.to_string(), description)),
                Section::Flags => {
                    let mut flag = Flag {
                        short: None,
                        long: None,
                        takes_value: spec.contains('<'),
                        help: description,
                    };
                    for word in spec.split([',', ' ']) {
                        if let Some(long) = word.strip_prefix("--") {
                            flag.long = Some(long.to_string());
                        } else if let Some(short) = word.strip_prefix('-') {
                            flag.short = short.chars().next();
                        }
                    }
                    help.flags.push(flag);
                }
                Section::Other => {}
            }
        }
        help
    }

    fn long(&self, name: &str) -> Option<&Flag> {
        self.flags.iter().find(|f| f.long.as_deref() == Some(name))
    }

    fn short(&self, c: char) -> Option<&Flag> {
        self.flags.iter().find(|f| f.short == Some(c))
    }

    fn flag_names(&self) -> String {
        let names: Vec<String> = self
            .flags
            .iter()
            .map(|f| match (&f.long, f.short) {
                (Some(long), _) => format!("--{long}"),
                (None, Some(short)) => format!("-{short}"),
                (None, None) => "?".to_string(),
            })
            .collect();
        names.join(", ")
    }
}

/// `tether PATH --help`, run once per command and kept.
#[derive(Default)]
struct Helps(HashMap<Vec<String>, Help>);

impl Helps {
    fn get(&mut self, path: &[String]) -> &Help {
        self.0.entry(path.to_vec()).or_insert_with(|| {
            let out = Command::new(TETHER)
                .args(path)
                .arg("--help")
                .output()
                .expect("run tether");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "`tether {} --help` failed: {}{}",
                path.join(" "),
                stdout,
                String::from_utf8_lossy(&out.stderr)
            );
            Help::parse(&stdout)
        })
    }
}

/// A command line the manual shows, and where.
#[derive(Debug)]
struct Mention {
    place: String,
    line: String,
}

/// The `tether ...` command lines of one Markdown file: code spans (which may wrap over
/// lines) outside code blocks, and the lines of shell code blocks (`\` continuations
/// joined, a `$ ` prompt dropped). Other blocks (YAML, diagrams) are not command lines.
fn mentions(file: &str, text: &str) -> Vec<Mention> {
    let mut out = Vec::new();
    let mut push = |line_no: usize, command: &str| {
        let command = command.split_whitespace().collect::<Vec<_>>().join(" ");
        let Some(rest) = command.strip_prefix("tether ") else {
            return;
        };
        let second = rest.split(' ').next().unwrap_or("");
        let is_word = second.starts_with(|c: char| c.is_ascii_lowercase())
            && second
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if (second.starts_with('-') || is_word) && !NOT_COMMANDS.contains(&command.as_str()) {
            out.push(Mention {
                place: format!("{file}:{line_no}"),
                line: command,
            });
        }
    };
    let mut fence: Option<String> = None;
    // A shell line continued with `\`: its first line's number and the text so far.
    let mut continued: Option<(usize, String)> = None;
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let trimmed = line.trim();
        if let Some(language) = trimmed.strip_prefix("```") {
            spans(&mut paragraph, &mut push);
            fence = match fence {
                None => Some(language.trim().to_string()),
                Some(_) => None,
            };
            continue;
        }
        match &fence {
            Some(language) if SHELL_BLOCKS.contains(&language.as_str()) => {
                let trimmed = trimmed.strip_prefix("$ ").unwrap_or(trimmed);
                let (first, mut command) = continued.take().unwrap_or((line_no, String::new()));
                match trimmed.strip_suffix('\\') {
                    Some(part) => {
                        command.push_str(part);
                        command.push(' ');
                        continued = Some((first, command));
                    }
                    None => {
                        command.push_str(trimmed);
                        push(first, &command);
                    }
                }
            }
            Some(_) => {}
            None if trimmed.is_empty() => spans(&mut paragraph, &mut push),
            None => paragraph.push((line_no, line)),
        }
    }
    spans(&mut paragraph, &mut push);
    out
}

/// The code spans of a paragraph (its lines with their numbers), each with the number of
/// the line it starts on; a span may wrap over lines.
fn spans(paragraph: &mut Vec<(usize, &str)>, push: &mut dyn FnMut(usize, &str)) {
    let Some(&(first, _)) = paragraph.first() else {
        return;
    };
    let joined: Vec<&str> = paragraph.iter().map(|(_, l)| *l).collect();
    let joined = joined.join("\n");
    let mut line_no = first;
    for (i, part) in joined.split('`').enumerate() {
        if i % 2 == 1 {
            push(line_no, part);
        }
        line_no += part.matches('\n').count();
    }
    paragraph.clear();
}

/// A command line's words as the shell splits them, up to a comment, pipe, redirection or
/// second command; the `[`, `]` and `...` of a usage line taken off.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.peek() {
            None | Some('#' | '|' | ';' | '&' | '<' | '>') => break,
            Some(_) => {}
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            match c {
                '\'' => word.extend(chars.by_ref().take_while(|&c| c != '\'')),
                '"' => word.extend(chars.by_ref().take_while(|&c| c != '"')),
                '\\' => word.extend(chars.next()),
                c => word.push(c),
            }
        }
        let word = word.trim_start_matches('[');
        let word = word.trim_end_matches([']', '.']);
        if !word.is_empty() {
            out.push(word.to_string());
        }
    }
    out
}

/// Walks a command line the way clap parses it: flags of the command reached so far (a
/// flag that takes a value takes the next word), and a command's first other word names
/// one of its subcommands. The first word not in the `--help` of its command is the error.
fn check(line: &str, helps: &mut Helps) -> Result<(), String> {
    let words = words(line);
    let mut path: Vec<String> = Vec::new();
    let mut i = 1; // past `tether`
    while i < words.len() {
        let word = &words[i];
        let help = helps.get(&path);
        let command = format!("tether {}", path.join(" "));
        let command = command.trim_end();
        if word == "--" {
            break;
        } else if let Some(flag) = word.strip_prefix("--") {
            let (name, value) = match flag.split_once('=') {
                Some((name, _)) => (name, true),
                None => (flag, false),
            };
            let Some(flag) = help.long(name) else {
                return Err(format!(
                    "`--{name}` is not a flag of `{command}` (its --help: {})",
                    help.flag_names()
                ));
            };
            if flag.takes_value && !value {
                i += 1;
            }
        } else if word.len() > 1 && word.starts_with('-') {
            for (k, c) in word.char_indices().skip(1) {
                let Some(flag) = help.short(c) else {
                    return Err(format!(
                        "`-{c}` is not a flag of `{command}` (its --help: {})",
                        help.flag_names()
                    ));
                };
                if flag.takes_value {
                    if k + c.len_utf8() == word.len() {
                        i += 1; // `-c FILE`; `-cFILE` holds its value
                    }
                    break;
                }
            }
        } else if !help.commands.is_empty() {
            if !help.commands.iter().any(|(name, _)| name == word) {
                let names: Vec<&str> = help.commands.iter().map(|(n, _)| n.as_str()).collect();
                return Err(format!(
                    "`{word}` is not a subcommand of `{command}` (its --help: {})",
                    names.join(", ")
                ));
            }
            path.push(word.clone());
        }
        i += 1;
    }
    Ok(())
}

/// The problems of every command line in `files` (name, text).
fn problems(files: &[(String, String)], helps: &mut Helps) -> (usize, Vec<String>) {
    let mut count = 0;
    let mut out = Vec::new();
    for (file, text) in files {
        for mention in mentions(file, text) {
            count += 1;
            if let Err(e) = check(&mention.line, helps) {
                out.push(format!("{}: `{}`: {e}", mention.place, mention.line));
            }
        }
    }
    (count, out)
}

fn manual_files() -> Vec<(String, String)> {
    let root = std::env::var_os("CLI_HELP_DOCS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let read = |path: &Path| std::fs::read_to_string(path).expect("read the manual");
    let mut files = vec![("README.md".to_string(), read(&root.join("README.md")))];
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    for path in chapters {
        let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
        files.push((name, read(&path)));
    }
    files
}

#[test]
fn every_command_and_flag_the_manual_shows_exists() {
    let mut helps = Helps::default();
    let (count, problems) = problems(&manual_files(), &mut helps);
    // The manual shows dozens; a handful would mean the scan broke.
    assert!(count >= 30, "only {count} `tether ...` command lines found");
    assert!(
        problems.is_empty(),
        "the manual shows commands or flags tether does not have:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_command_or_flag_the_cli_lacks_is_reported() {
    let doc = "Drain it with `tether -c FILE drain shop/n1 --wait\n--no-such-flag`, or\n\
               `tether -c FILE drain shop/n1 --wait --then stop` (`tether -x`).\n\n\
               ```sh\ntether -t -c a.yaml   # then --not-checked\n\
               tether import mod_jk w.properties \\\n    --jkmount-from x.conf > t.yaml\n\
               $ tether frobnicate --now\n```\n\n\
               ```\ntether a   tether b\n```\n\n```yaml\ntether --nor-this\n```\n";
    let files = vec![("doc.md".to_string(), doc.to_string())];
    let (count, problems) = problems(&files, &mut Helps::default());
    assert_eq!(count, 6, "{problems:?}");
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].starts_with("doc.md:1: ") && problems[0].contains("`--no-such-flag`"));
    assert!(problems[1].starts_with("doc.md:3: ") && problems[1].contains("`-x`"));
    assert!(problems[2].starts_with("doc.md:9: ") && problems[2].contains("`frobnicate`"));
}

#[test]
fn every_subcommand_and_flag_has_a_help_line() {
    let mut helps = Helps::default();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        seen += 1;
        let help = helps.get(&path);
        let command = format!("tether {}", path.join(" "));
        for flag in &help.flags {
            assert!(
                !flag.help.is_empty(),
                "`{command}`: {flag:?} has no help line"
            );
        }
        for (name, about) in &help.commands {
            assert!(!about.is_empty(), "`{command} {name}` has no description");
            if name != "help" {
                let mut sub = path.clone();
                sub.push(name.clone());
                todo.push(sub);
            }
        }
    }
    // tether, demo, upgrade, drain, explain, import (mod_jk, websphere), man.
    assert!(seen >= 9, "only {seen} commands found");
}

#[test]
fn version_and_manual_pages() {
    let out = Command::new(TETHER).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("tether {}", env!("CARGO_PKG_VERSION"))
    );

    let page = |args: &[&str]| {
        let out = Command::new(TETHER).arg("man").args(args).output().unwrap();
        assert!(out.status.success(), "tether man {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let root = page(&[]);
    assert!(root.contains("\n.TH tether 1 "), "{root}");
    for name in ["demo", "upgrade", "drain", "explain", "import", "man"] {
        assert!(
            root.contains(&format!("tether\\-{name}(1)")),
            "{name}: {root}"
        );
    }
    let drain = page(&["drain"]);
    assert!(drain.contains("\n.TH tether-drain 1 "), "{drain}");
    assert!(drain.contains("\\-\\-wait"), "{drain}");
    assert!(page(&["import", "mod_jk"]).contains("\\-\\-jkmount\\-from"));

    let bad = Command::new(TETHER)
        .args(["man", "no-such-command"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_help_man");
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(TETHER)
        .args(["man", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for file in ["tether.1", "tether-drain.1", "tether-import-mod_jk.1"] {
        let text = std::fs::read_to_string(dir.join(file)).expect(file);
        assert!(text.contains("\n.TH "), "{file}");
    }
    assert_eq!(std::fs::read_to_string(dir.join("tether.1")).unwrap(), root);
}

/// A printing command whose reader has gone (`tether man | head`) ends by SIGPIPE, as
/// other Unix tools do, not with a panic on the failed write.
#[test]
fn a_closed_pipe_ends_a_printing_command_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe` returns.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just made and are owned here alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    let out = Command::new(TETHER)
        .arg("man")
        .stdout(write)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}
