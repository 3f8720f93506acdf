//! The web server's document root → a listener's `serve:`: what the connector declined (no
//! mount or URI matched, an exclusion turned it away) is answered from the same files the
//! web server answered it from. Apache's other file directives (`Alias`, `DirectoryIndex`)
//! become notes with the YAML that does their job.

use super::doc::{quoted, scalar_str, Listener, Serve};
use super::ImportError;
use std::path::Path;

/// The command line's option, as errors and notes name it.
pub const FLAG: &str = "--document-root";

/// A document root and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentRoot {
    /// An absolute path.
    pub path: String,
    /// `--document-root`, or the directive with its file and line.
    pub said: String,
}

impl DocumentRoot {
    /// `--document-root DIR`: an absolute path, in UTF-8 (a YAML config holds nothing else).
    pub fn flag(dir: &Path) -> Result<DocumentRoot, ImportError> {
        let Some(text) = dir.to_str() else {
            return Err(ImportError::file(
                FLAG,
                format!(
                    "`{}` is not UTF-8 text, which a YAML config cannot hold",
                    dir.display()
                ),
            ));
        };
        if !dir.is_absolute() {
            return Err(ImportError::file(
                FLAG,
                format!(
                    "`{text}` is a relative path: give the web server's document root as an absolute one (such as /var/www/html)"
                ),
            ));
        }
        Ok(DocumentRoot {
            path: text.to_string(),
            said: FLAG.to_string(),
        })
    }
}

/// The web server the connector ran in, as the notes name it.
pub struct WebServer {
    /// Who answered the requests the connector declined.
    pub before: &'static str,
    /// The directory an example `serve:` names: the product's usual document root.
    pub example: &'static str,
}

pub const APACHE: WebServer = WebServer {
    before: "Apache answered them from its DocumentRoot",
    example: "/var/www/html",
};

pub const IHS: WebServer = WebServer {
    before: "the plug-in left them to the web server, which answered them from its DocumentRoot",
    example: "/opt/IBM/HTTPServer/htdocs",
};

/// `l` (which has routes and no default cluster) answers what no route takes, and what an
/// exclusion turns away, with files from `root`; without a root, a `REVIEW` comment says
/// that those requests get 404 and what to add.
pub fn serve(l: &mut Listener, root: Option<&DocumentRoot>, server: &WebServer) {
    let declined = if l.routes.iter().any(|r| r.exclude) {
        "requests no route takes, and those an exclusion turns away,"
    } else {
        "requests no route takes"
    };
    let Some(root) = root else {
        l.notes.push(format!(
            "REVIEW: {declined} get 404 ({}). To answer them with its files, add to this listener `serve: {{ root: {} }}` naming that directory (or import again with {FLAG} DIR); to send them to a cluster, `cluster: NAME`",
            server.before, server.example
        ));
        return;
    };
    // tether -t refuses a root that is not a directory; the import may run on another
    // machine than the one that holds the web server's files.
    let here = Path::new(&root.path).is_dir();
    if here {
        l.notes.push(format!(
            "{declined} are answered with files from {} (`serve:`), as {}",
            root.path, server.before
        ));
    } else {
        l.notes.push(format!(
            "REVIEW: {declined} get 404 until `serve:` is uncommented: {} is not a directory on this machine, and tether -t refuses a root it cannot read; uncomment it where the web server's files are ({})",
            root.path, server.before
        ));
    }
    l.serve = Some(Serve {
        root: root.path.clone(),
        note: root.said.clone(),
        commented: !here,
    });
}

/// `l`'s `cluster:` takes every request, so a `serve:` would answer none: `root` is said,
/// with how to answer them with files instead.
pub fn unused(l: &mut Listener, root: Option<&DocumentRoot>) {
    if let Some(root) = root {
        l.notes.push(format!(
            "the document root {} ({}) is not written: `cluster:` takes every request here; to answer requests with its files instead, as the web server did where nothing was mounted, replace `cluster: NAME` with `serve: {{ root: {} }}`",
            root.path,
            root.said,
            scalar_str(&root.path)
        ));
    }
}

/// The note for Apache's `Alias` family (`args` as written): a directory served under a
/// path, which a route with `serve:` does.
pub fn alias(source: &str, directive: &str, args: &[String]) -> String {
    let said = format!("{source}: {directive} {}", args.join(" "));
    match (directive.to_ascii_lowercase().as_str(), args) {
        ("alias", [url, dir]) if url.starts_with('/') && url.len() > 1 => {
            let prefix = url.trim_end_matches('/');
            format!(
                "REVIEW: {said}: Apache answered {prefix}/... from {dir}; a route does that here: `- {{ path: {}, serve: {{ root: {}, strip_prefix: {} }} }}`",
                quoted(&format!("{prefix}/*")),
                scalar_str(dir.trim_end_matches('/')),
                scalar_str(prefix)
            )
        }
        ("scriptalias" | "scriptaliasmatch", _) => {
            format!("{said}: CGI programs, which tether does not run; not imported")
        }
        ("aliasmatch", _) => {
            format!("{said}: a regular expression has no tether route; not imported")
        }
        _ => format!("{said}: not imported"),
    }
}

/// The note for Apache's `DirectoryIndex` (`args` as written): `serve:` tries
/// `index.html` unless told otherwise.
pub fn index(source: &str, args: &[String]) -> String {
    let said = format!("{source}: DirectoryIndex {}", args.join(" "));
    // A URL (`/cgi-bin/index.pl`) or `disabled` is nothing `index:` can name.
    let names: Vec<String> = args
        .iter()
        .filter(|a| !a.contains('/') && !a.eq_ignore_ascii_case("disabled"))
        .map(|a| scalar_str(a))
        .collect();
    if names.is_empty() || names == ["index.html"] {
        return format!("{said}: `serve:` tries index.html for a directory");
    }
    format!(
        "{said}: `serve:` tries index.html for a directory; add `index: [{}]` to it to try these",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::import::doc::Route;

    fn listener(exclusion: bool) -> Listener {
        let route = |exclude| Route {
            host: None,
            path: "/app/*".into(),
            cluster: "app".into(),
            exclude,
            disabled: false,
            note: None,
            max_request_body: None,
        };
        let mut l = Listener::default();
        l.routes.push(route(false));
        if exclusion {
            l.routes.push(route(true));
        }
        l
    }

    #[test]
    fn the_flag_is_an_absolute_path() {
        let root = DocumentRoot::flag(Path::new("/var/www/html")).unwrap();
        assert_eq!(root.path, "/var/www/html");
        assert_eq!(root.said, FLAG);
        for relative in ["htdocs", "./www", ""] {
            let err = DocumentRoot::flag(Path::new(relative)).unwrap_err();
            assert_eq!(err.file, FLAG);
            assert!(err.message.contains("relative path"), "{err}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let bytes = std::ffi::OsStr::from_bytes(b"/var/www/\xff");
            let err = DocumentRoot::flag(Path::new(bytes)).unwrap_err();
            assert!(err.to_string().contains("not UTF-8"), "{err}");
        }
    }

    #[test]
    fn without_a_root_the_listener_says_what_gets_404_and_what_to_add() {
        let mut l = listener(true);
        serve(&mut l, None, &APACHE);
        assert_eq!(l.serve, None);
        let note = &l.notes[0];
        assert!(note.starts_with("REVIEW: requests no route takes, and those an exclusion turns away, get 404 (Apache answered them from its DocumentRoot)"), "{note}");
        assert!(
            note.contains("add to this listener `serve: { root: /var/www/html }`"),
            "{note}"
        );
        assert!(note.contains("--document-root DIR"), "{note}");
        let mut l = listener(false);
        serve(&mut l, None, &IHS);
        assert!(
            l.notes[0].starts_with("REVIEW: requests no route takes get 404"),
            "{:?}",
            l.notes
        );
        assert!(l.notes[0].contains("/opt/IBM/HTTPServer/htdocs"));
    }

    #[test]
    fn a_root_here_is_served_and_one_elsewhere_commented_out() {
        let dir = std::env::temp_dir();
        let here = DocumentRoot {
            path: dir.to_str().unwrap().to_string(),
            said: "httpd.conf:3: DocumentRoot".into(),
        };
        let mut l = listener(true);
        serve(&mut l, Some(&here), &APACHE);
        let s = l.serve.as_ref().unwrap();
        assert_eq!((s.root.as_str(), s.commented), (here.path.as_str(), false));
        assert_eq!(s.note, "httpd.conf:3: DocumentRoot");
        assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
        assert!(!l.notes[0].contains("REVIEW"), "{:?}", l.notes);

        let elsewhere = DocumentRoot {
            path: "/nonexistent/tether-import/htdocs".into(),
            said: FLAG.into(),
        };
        let mut l = listener(false);
        serve(&mut l, Some(&elsewhere), &APACHE);
        assert!(l.serve.as_ref().unwrap().commented);
        assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
        assert!(
            l.notes[0].starts_with(
                "REVIEW: requests no route takes get 404 until `serve:` is uncommented: /nonexistent/tether-import/htdocs is not a directory on this machine"
            ),
            "{:?}",
            l.notes
        );
    }

    #[test]
    fn a_listener_whose_cluster_takes_everything_only_says_the_root() {
        let mut l = Listener::default();
        unused(&mut l, None);
        assert!(l.notes.is_empty());
        let root = DocumentRoot::flag(Path::new("/srv/www")).unwrap();
        unused(&mut l, Some(&root));
        assert_eq!(l.serve, None);
        assert!(
            l.notes[0].contains("replace `cluster: NAME` with `serve: { root: /srv/www }`"),
            "{:?}",
            l.notes
        );
    }

    #[test]
    fn aliases_and_directory_index_are_said_with_what_to_write() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let note = alias(
            "h:4",
            "Alias",
            &args(&["/icons/", "/usr/share/apache2/icons/"]),
        );
        assert!(
            note.contains("`- { path: \"/icons/*\", serve: { root: /usr/share/apache2/icons, strip_prefix: /icons } }`"),
            "{note}"
        );
        assert!(note.starts_with("REVIEW: h:4: Alias /icons/"), "{note}");
        let note = alias(
            "h:5",
            "ScriptAlias",
            &args(&["/cgi-bin/", "/usr/lib/cgi-bin/"]),
        );
        assert!(note.contains("CGI"), "{note}");
        let note = alias("h:6", "AliasMatch", &args(&["^/x(.*)", "/srv$1"]));
        assert!(note.contains("regular expression"), "{note}");
        assert!(alias("h:7", "Alias", &args(&["/only"])).ends_with("not imported"));
        let note = index("h:8", &args(&["index.html", "index.php", "/cgi-bin/i.pl"]));
        assert!(
            note.ends_with("add `index: [index.html, index.php]` to it to try these"),
            "{note}"
        );
        assert!(index("h:9", &args(&["index.html"])).ends_with("tries index.html for a directory"));
    }
}
