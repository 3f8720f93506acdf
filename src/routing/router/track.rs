//! A cluster's live sessions, kept by the router: the key of the session a
//! request went by, found by the decision's own walk, and what the server's response says
//! (its `Set-Cookie` of the session cookie), recorded against the server that answered.

use super::ClusterRouter;
use crate::config::SessionStyle;
use crate::routing::decision::Decision;
use crate::routing::fields::Fields;
use crate::routing::live_sessions::LiveSessions;
use crate::routing::tried::Tried;
use std::sync::Arc;

impl ClusterRouter {
    /// The cluster's live sessions, when it counts them.
    pub fn live_sessions(&self) -> Option<&Arc<LiveSessions>> {
        self.sessions.as_ref()
    }

    /// [`Self::decide_with`], and the key of the session id it went by (the one that
    /// decided, else the first one seen) when the cluster counts live sessions.
    pub fn decide_keyed(
        &self,
        path: &[u8],
        headers: &impl Fields,
        tried: &Tried,
        now: u64,
        preferred: Option<usize>,
    ) -> (Decision, Option<u64>) {
        let Some(table) = &self.sessions else {
            return (self.decide_with(path, headers, tried, now, preferred), None);
        };
        let pick = self.pick(tried, now, preferred, false);
        let mut key = None;
        let decision = self.walk(&pick, path, headers, |sid, decided| {
            if decided || key.is_none() {
                key = Some(table.key(self.base_id(sid)));
            }
        });
        (decision, key)
    }

    /// A session id without its routing suffix (Tomcat's `.jvmRoute`, WebSphere's clone
    /// list): what stays the same when the session fails over and the suffix changes.
    pub fn base_id<'a>(&self, sid: &'a [u8]) -> &'a [u8] {
        let sep = match self.style {
            SessionStyle::Tomcat => b'.',
            SessionStyle::Websphere => self.clone_separator,
        };
        match sid.iter().position(|&b| b == sep) {
            Some(at) => &sid[..at],
            None => sid,
        }
    }

    /// Server `server` answered a request (arrived at `now_ms`, [`crate::routing::now_ms`])
    /// whose session had `key`, with these `Set-Cookie` values: a session cookie it sets is
    /// a session created (or renewed) there, else the request's session was served there.
    pub fn track<'a>(
        &self,
        key: Option<u64>,
        set_cookies: impl Iterator<Item = &'a [u8]>,
        server: usize,
        now_ms: u64,
    ) {
        let Some(table) = &self.sessions else { return };
        let now = LiveSessions::at(now_ms);
        let mut set = false;
        for header in set_cookies {
            if let Some(id) = session_cookie(header, &self.cookie) {
                let key = table.key(self.base_id(id));
                table.touch(key, server, now);
                table.seen_in_fleet(key, server, now_ms);
                set = true;
            }
        }
        if let (Some(key), false) = (key, set) {
            table.touch(key, server, now);
            table.seen_in_fleet(key, server, now_ms);
        }
    }
}

/// The value `Set-Cookie: NAME=value; ...` sets for cookie `name`; `None` for another
/// cookie, an empty value or one that deletes it (`Max-Age=0`).
fn session_cookie<'a>(header: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut parts = header.split(|&b| b == b';');
    let pair = parts.next()?;
    let eq = pair.iter().position(|&b| b == b'=')?;
    if pair[..eq].trim_ascii() != name {
        return None;
    }
    let value = pair[eq + 1..].trim_ascii();
    let value = value
        .strip_prefix(b"\"")
        .and_then(|v| v.strip_suffix(b"\""))
        .unwrap_or(value);
    let deletes = parts.any(|a| {
        let a = a.trim_ascii();
        a.len() >= 9
            && a[..8].eq_ignore_ascii_case(b"max-age=")
            && a[8..].iter().all(|&b| b == b'0' || b == b'-')
    });
    (!value.is_empty() && !deletes).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::session_cookie;

    #[test]
    fn the_session_cookie_a_response_sets() {
        let n = b"JSESSIONID";
        let got = |h: &str| session_cookie(h.as_bytes(), n).map(|v| v.to_vec());
        assert_eq!(
            got("JSESSIONID=ABC.tc1; Path=/; HttpOnly"),
            Some(b"ABC.tc1".to_vec())
        );
        assert_eq!(got("JSESSIONID=\"ABC\""), Some(b"ABC".to_vec()));
        assert_eq!(got("theme=dark; Path=/"), None);
        assert_eq!(got("JSESSIONIDX=1"), None);
        assert_eq!(got("JSESSIONID=; Max-Age=0"), None);
        assert_eq!(got("JSESSIONID=ABC; Path=/; max-age=0"), None);
        assert_eq!(got("JSESSIONID=ABC; Max-Age=1800"), Some(b"ABC".to_vec()));
    }
}
