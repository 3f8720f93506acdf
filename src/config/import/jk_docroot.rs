//! Apache's `DocumentRoot` (httpd.conf, under its `ServerRoot` when relative) → the document
//! root of each listener the mod_jk import writes; `--document-root` wins over it.

use super::docroot::{DocumentRoot, FLAG};
use super::jk_mounts::{Mounts, Said};
use std::path::Path;

/// `DocumentRoot` as an absolute path: a relative one is under `ServerRoot`, as Apache
/// reads it; `Err`: the note saying why there is none.
fn absolute(root: &Said, server_root: Option<&Said>) -> Result<DocumentRoot, String> {
    let said = format!("{}: DocumentRoot {}", root.source, root.value);
    if Path::new(&root.value).is_absolute() {
        return Ok(DocumentRoot {
            path: root.value.clone(),
            said,
        });
    }
    match server_root.filter(|s| Path::new(&s.value).is_absolute()) {
        Some(s) => Ok(DocumentRoot {
            path: Path::new(&s.value)
                .join(&root.value)
                .to_string_lossy()
                .into_owned(),
            said: format!("{said}, under {}: ServerRoot {}", s.source, s.value),
        }),
        None => Err(format!(
            "REVIEW: {said} is relative to ServerRoot, which no file given says: import again with {FLAG} DIR"
        )),
    }
}

/// The document root of the listener of TLS virtual hosts (`tls`) or of the others:
/// `flag` when given, else the one Apache answered an unknown host from (the first virtual
/// host's, inherited from the main server when it has none; without virtual hosts, the main
/// server's). What it leaves out (another virtual host's own root) is said in `notes`.
pub fn root(
    mounts: &Mounts,
    tls: bool,
    flag: Option<&DocumentRoot>,
    notes: &mut Vec<String>,
) -> Option<DocumentRoot> {
    let main = mounts.document_root.as_ref();
    let mut candidates: Vec<(Option<&str>, &Said)> = mounts
        .vhosts
        .iter()
        .filter(|v| v.tls == tls)
        .filter_map(|v| {
            let root = v.document_root.as_ref().or(main)?;
            Some((Some(v.source.as_str()), root))
        })
        .collect();
    if candidates.is_empty() {
        candidates.extend(main.map(|m| (None, m)));
    }
    let mut seen: Vec<&str> = Vec::new();
    candidates.retain(|(_, r)| {
        let first = !seen.contains(&r.value.as_str());
        seen.push(&r.value);
        first
    });
    let server_root = mounts.server_root.as_ref();
    if let Some(flag) = flag {
        for (_, r) in &candidates {
            if r.value != flag.path {
                notes.push(format!(
                    "{}: DocumentRoot {}: {FLAG} {} is served instead",
                    r.source, r.value, flag.path
                ));
            }
        }
        return Some(flag.clone());
    }
    let (_, chosen) = candidates.first()?;
    let root = match absolute(chosen, server_root) {
        Ok(root) => root,
        Err(why) => {
            notes.push(why);
            return None;
        }
    };
    for (vhost, r) in &candidates[1..] {
        if let Some(vhost) = vhost {
            notes.push(format!(
                "REVIEW: the <VirtualHost> at {vhost} answered from DocumentRoot {} ({}): a listener's `serve:` has one root, {}, for every host",
                r.value, r.source, root.path
            ));
        }
    }
    Some(root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::import::jk_mounts::httpd;

    fn mounts(text: &str) -> Mounts {
        let mut m = Mounts::default();
        httpd(text, "httpd.conf", &mut m).unwrap();
        m
    }

    fn root_of(text: &str, tls: bool) -> (Option<DocumentRoot>, Vec<String>) {
        let mut notes = Vec::new();
        let root = root(&mounts(text), tls, None, &mut notes);
        (root, notes)
    }

    #[test]
    fn the_main_servers_root_quoted_or_not() {
        for text in [
            "DocumentRoot /var/www/html\n",
            "DocumentRoot \"/var/www/html\"\n",
        ] {
            let (root, notes) = root_of(text, false);
            let root = root.unwrap();
            assert_eq!(root.path, "/var/www/html", "{text}");
            assert_eq!(root.said, "httpd.conf:1: DocumentRoot /var/www/html");
            assert!(notes.is_empty(), "{notes:?}");
        }
        assert_eq!(root_of("JkMount /a/* tc\n", false).0, None);
        let m = mounts("DocumentRoot\n");
        assert!(m.notes[0].contains("no directory"), "{:?}", m.notes);
    }

    #[test]
    fn a_relative_root_is_under_server_root() {
        let (root, _) = root_of("ServerRoot \"/etc/httpd\"\nDocumentRoot htdocs\n", false);
        let root = root.unwrap();
        assert_eq!(root.path, "/etc/httpd/htdocs");
        assert!(root
            .said
            .contains("under httpd.conf:1: ServerRoot /etc/httpd"));
        let (root, notes) = root_of("DocumentRoot htdocs\n", false);
        assert_eq!(root, None);
        assert!(notes[0].starts_with("REVIEW: httpd.conf:1: DocumentRoot htdocs is relative"));
        assert!(notes[0].contains("--document-root DIR"), "{notes:?}");
    }

    #[test]
    fn each_listener_takes_its_first_virtual_hosts_root() {
        let text = "\
DocumentRoot /var/www/main
<VirtualHost *:80>
  ServerName a.example
  DocumentRoot /var/www/a
</VirtualHost>
<VirtualHost *:80>
  ServerName b.example
</VirtualHost>
<VirtualHost *:443>
  SSLEngine on
</VirtualHost>
";
        let (root, notes) = root_of(text, false);
        assert_eq!(root.unwrap().path, "/var/www/a");
        // b.example inherited the main server's root, which the listener does not serve.
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0]
                .contains("httpd.conf:6 answered from DocumentRoot /var/www/main (httpd.conf:1)"),
            "{notes:?}"
        );
        let (root, notes) = root_of(text, true);
        assert_eq!(root.unwrap().path, "/var/www/main", "inherited");
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn the_flag_wins_and_what_it_replaces_is_said() {
        let flag = DocumentRoot::flag(Path::new("/srv/www")).unwrap();
        let mut notes = Vec::new();
        let m = mounts("DocumentRoot /var/www/html\n");
        let root = root(&m, false, Some(&flag), &mut notes).unwrap();
        assert_eq!(root, flag);
        assert_eq!(
            notes,
            ["httpd.conf:1: DocumentRoot /var/www/html: --document-root /srv/www is served instead"]
        );
        let mut notes = Vec::new();
        assert_eq!(
            super::root(&Mounts::default(), false, Some(&flag), &mut notes),
            Some(flag)
        );
        assert!(notes.is_empty());
    }
}
