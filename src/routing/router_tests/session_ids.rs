//! Where the session id comes from (path parameter, cookies, header), which wins, and how
//! its route is read.

use super::*;

#[test]
fn where_the_session_id_comes_from() {
    use Outcome::*;
    run(&[
        Case {
            what: "path parameter beats the cookie",
            path: "/app;jsessionid=A.n2",
            headers: &[("cookie", "JSESSIONID=B.n1")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "path parameter ends at ?",
            path: "/app;jsessionid=A.n2?jsessionid=B.n1",
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "path parameter in the query string does not count",
            path: "/app?x=1;jsessionid=A.n2",
            headers: &[("cookie", "JSESSIONID=B.n3")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "empty path parameter falls through to the cookie",
            path: "/app;jsessionid=",
            headers: &[("cookie", "JSESSIONID=B.n3")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "cookie JSESSIONID",
            headers: &[("cookie", "a=1; JSESSIONID=A.n3; b=2")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "XJSESSIONID is another cookie",
            headers: &[("cookie", "XJSESSIONID=A.n3")],
            want: Want::NotIn(&[], NewSession),
            ..BASE
        },
        Case {
            what: "JSESSIONIDX is another cookie",
            headers: &[("cookie", "JSESSIONIDX=A.n3")],
            want: Want::NotIn(&[], NewSession),
            ..BASE
        },
        Case {
            what: "cookie names are case-sensitive",
            headers: &[("cookie", "jsessionid=A.n3")],
            want: Want::NotIn(&[], NewSession),
            ..BASE
        },
        Case {
            what: "look-alikes skipped, the exact name found after them",
            headers: &[(
                "cookie",
                "XJSESSIONID=A.n1; JSESSIONIDX=B.n2; jsessionid=C.n3; JSESSIONID=D.n4",
            )],
            want: Want::Route("n4", RouteHit),
            ..BASE
        },
        Case {
            what: "several Cookie headers: unknown routes skipped, first known route wins",
            headers: &[
                ("cookie", "a=1; JSESSIONID=A.gone"),
                ("cookie", "JSESSIONID=B.n3; JSESSIONID=C.n1"),
            ],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "only unknown routes: hash of the first one",
            headers: &[
                ("cookie", "JSESSIONID=A.gone"),
                ("cookie", "JSESSIONID=B.gone2"),
            ],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "surrounding quotes removed",
            headers: &[("cookie", "JSESSIONID=\"A.n4\"")],
            want: Want::Route("n4", RouteHit),
            ..BASE
        },
        Case {
            what: "route is the text after the first dot",
            headers: &[("cookie", "JSESSIONID=ABC.n1")],
            want: Want::Route("n1", RouteHit),
            ..BASE
        },
        Case {
            what: "two dots: not a route, and no such domain",
            headers: &[("cookie", "JSESSIONID=ABC.n2.n1")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "two dots: the first part is tried as a domain",
            setup: |c| {
                c.srv("n3").domain = Some("rack1".into());
                c.srv("n4").domain = Some("rack1".into());
            },
            headers: &[("cookie", "JSESSIONID=ABC.rack1.n1")],
            want: Want::OneOf(&["n3", "n4"], DomainHit),
            ..BASE
        },
        Case {
            what: "no dot: no route, hash fallback",
            headers: &[("cookie", "JSESSIONID=ABCDEF")],
            want: Want::NotIn(&[], HashFallback),
            ..BASE
        },
        Case {
            what: "configured cookie name",
            setup: |c| c.session_cookie = "SID".into(),
            headers: &[("cookie", "JSESSIONID=B.n1; SID=A.n2")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "configured path parameter name",
            setup: |c| c.session_path = "sid".into(),
            path: "/x;jsessionid=B.n1;sid=A.n2",
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "session header when configured",
            setup: |c| c.session_header = Some("X-Session".into()),
            headers: &[("x-session", "A.n2")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "session header after the cookies",
            setup: |c| c.session_header = Some("X-Session".into()),
            headers: &[("x-session", "A.n2"), ("cookie", "JSESSIONID=B.n3")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "session header used when cookies name no server",
            setup: |c| c.session_header = Some("X-Session".into()),
            headers: &[("x-session", "A.n2"), ("cookie", "JSESSIONID=B.gone")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "session header ignored when not configured",
            headers: &[("x-session", "A.n2")],
            want: Want::NotIn(&[], NewSession),
            ..BASE
        },
    ]);
}

#[test]
fn merged_cookie_headers_split_at_commas() {
    // A proxy or client in front may merge two `Cookie` headers into one with `, `; mod_jk
    // ends a cookie value at `,` as at `;`.
    use Outcome::*;
    run(&[
        Case {
            what: "the session cookie's value ends at ','",
            headers: &[("cookie", "JSESSIONID=abc.n1, other=1")],
            want: Want::Route("n1", RouteHit),
            ..BASE
        },
        Case {
            what: "the session cookie after a ','",
            headers: &[("cookie", "other=1, JSESSIONID=abc.n2")],
            want: Want::Route("n2", RouteHit),
            ..BASE
        },
        Case {
            what: "two merged session cookies: the first usable one wins",
            headers: &[("cookie", "JSESSIONID=A.gone, JSESSIONID=B.n3")],
            want: Want::Route("n3", RouteHit),
            ..BASE
        },
        Case {
            what: "a quoted value then ','",
            headers: &[("cookie", "JSESSIONID=\"A.n4\", other=1")],
            want: Want::Route("n4", RouteHit),
            ..BASE
        },
    ]);
}
