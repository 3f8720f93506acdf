//! The operator console: a page, its script and its style sheet, built into the
//! binary from `ui/` and served by the admin listener without a token (they hold no data:
//! the page reads the admin API with the token the operator types).
//!
//! Every answer carries a strict Content-Security-Policy: scripts and styles from this
//! listener only (no inline code, no `eval`), calls to this listener only, no frames, no
//! forms posted anywhere. The page renders every value as text.

use http::{Response, StatusCode};

const PAGE: &str = include_str!("../../../ui/console.html");
const SCRIPT: &str = include_str!("../../../ui/console.js");
const STYLE: &str = include_str!("../../../ui/console.css");

pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// The console's answer to `GET path`, when `path` is one of its own.
pub fn serve(path: &str) -> Option<Response<Vec<u8>>> {
    let (body, kind) = match path {
        "/" => return Some(redirect()),
        "/ui" | "/ui/" => (PAGE, "text/html; charset=utf-8"),
        "/ui/console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "/ui/console.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return None,
    };
    Some(
        secured(Response::builder().status(StatusCode::OK))
            .header("Content-Type", kind)
            .header("Content-Length", body.len())
            .header("Cache-Control", "no-cache")
            .body(body.as_bytes().to_vec())
            .unwrap_or_default(),
    )
}

fn redirect() -> Response<Vec<u8>> {
    secured(Response::builder().status(StatusCode::FOUND))
        .header("Location", "/ui")
        .header("Content-Length", 0)
        .body(Vec::new())
        .unwrap_or_default()
}

fn secured(b: http::response::Builder) -> http::response::Builder {
    b.header("Content-Security-Policy", CSP)
        .header("X-Content-Type-Options", "nosniff")
        .header("Referrer-Policy", "no-referrer")
        .header("X-Frame-Options", "DENY")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_parts_are_served_with_the_policy() {
        for path in ["/ui", "/ui/console.js", "/ui/console.css"] {
            let r = serve(path).expect(path);
            assert_eq!(r.status(), 200);
            assert_eq!(r.headers()["Content-Security-Policy"], CSP);
            assert!(!r.body().is_empty());
        }
        let r = serve("/").unwrap();
        assert_eq!(
            (r.status(), &r.headers()["Location"]),
            (StatusCode::FOUND, &"/ui".parse().unwrap())
        );
        assert!(serve("/status").is_none());
        assert!(serve("/ui/../status").is_none());
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere_and_runs_no_inline_code() {
        for text in [PAGE, SCRIPT, STYLE] {
            assert!(!text.contains("http://") && !text.contains("https://"));
            assert!(!text.contains("innerHTML") && !text.contains("eval("));
        }
        assert!(!PAGE.contains("<script>") && !PAGE.contains(" style="));
        assert!(!PAGE.contains("onclick=") && !PAGE.contains("onload="));
    }
}
