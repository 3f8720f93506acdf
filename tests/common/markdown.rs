//! Markdown as the manual's tests read it: the targets of its links, and the anchors of its
//! headings.

use std::collections::BTreeSet;

/// The targets of the Markdown links `[text](target)` and images `![alt](target)` in
/// `text`, outside code spans and fenced blocks, without a title (`(target "title")`) or
/// angle brackets (`(<target>)`).
pub fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans are not links: take the parts between backquote pairs out.
        let plain: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, p)| p)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                let inside = rest[..end].trim();
                let target = match inside.strip_prefix('<') {
                    Some(bracketed) => bracketed.split('>').next().unwrap_or(""),
                    None => inside.split_whitespace().next().unwrap_or(""),
                };
                out.push(target.to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}

/// The anchors a file's headings get (GitHub's and mdBook's rule: lower case, spaces to
/// `-`, other punctuation dropped).
pub fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        out.insert(slug);
    }
    out
}
