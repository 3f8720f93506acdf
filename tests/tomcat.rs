//! tether in front of three real Tomcats (Debian's `tomcat10`, one JVM per instance, each
//! with its own `CATALINA_BASE` and `jvmRoute`): the sessions are Tomcat's own, not a
//! simulation's. What a Tomcat user cares about: sessions stay on their instance (cookie
//! and `;jsessionid=` URL rewriting), a killed instance's sessions fail over, and drain and
//! stop through the admin API do what mod_jk's "disabled" and "stopped" do.
//!
//! The tests skip (print "skipped: tomcat10 not installed") only when the package is
//! missing; `./run test` (and so `.ci/run`) installs it.

mod common;

use common::real_tomcat::RealTomcat;
use common::{scratch_dir, Opts, Tether};
use std::collections::HashMap;
use tether::cli::sim::HttpClient;

/// Three JVMs at a time are enough for two cores: the tests take turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const ROUTES: [&str; 3] = ["tc1", "tc2", "tc3"];

/// Three running Tomcats and their scratch directory (removed after them, unless the test
/// failed: then their logs stay).
struct Tomcats {
    dir: std::path::PathBuf,
    all: Vec<RealTomcat>,
}

impl Drop for Tomcats {
    fn drop(&mut self) {
        self.all.clear();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Starts tc1..tc3 (in parallel), or `None` (the test returns) when `tomcat10` is not
/// installed.
fn start_tomcats(tag: &str) -> Option<Tomcats> {
    let dir = scratch_dir(tag);
    let started = std::time::Instant::now();
    let Some(all) = RealTomcat::start_all(&dir, &ROUTES) else {
        println!("skipped: tomcat10 not installed");
        let _ = std::fs::remove_dir_all(&dir);
        return None;
    };
    println!("3 Tomcats answered in {:?}", started.elapsed());
    Some(Tomcats { dir, all })
}

/// tether with cluster `shop` over the Tomcats (`route:` = their jvmRoute).
fn tether_in_front(tomcats: &[RealTomcat], admin: bool) -> Tether {
    let mut cluster = String::from("    recover_after: 60s\n    servers:\n");
    for tc in tomcats {
        cluster.push_str(&tc.server_line(""));
    }
    Tether::start_with(Opts {
        cluster,
        admin,
        ..Opts::default()
    })
}

/// The JSP's answer (see `common::real_tomcat`), with what the response said about cookies.
#[derive(Debug)]
struct Page {
    status: u16,
    /// The instance that answered: its `jvmRoute`, checked against its connector port.
    route: String,
    session: String,
    new: bool,
    count: u32,
    remote: String,
    scheme: String,
    link: String,
    set_cookie: Option<String>,
}

/// Maps connector ports to routes, to check that the page's route is the instance's.
struct Instances(HashMap<u16, String>);

impl Instances {
    fn of(tomcats: &[RealTomcat]) -> Instances {
        Instances(
            tomcats
                .iter()
                .map(|t| (t.addr().port(), t.route().to_string()))
                .collect(),
        )
    }

    fn parse(&self, resp: &tether::cli::sim::Response) -> Page {
        let body = resp.body_str();
        let field = |key: &str| {
            body.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no {key}= in the page (status {}): {body}", resp.status))
                .to_string()
        };
        let page = Page {
            status: resp.status,
            route: field("jvmRoute"),
            session: field("session"),
            new: field("new") == "true",
            count: field("count").parse().unwrap(),
            remote: field("remote"),
            scheme: field("scheme"),
            link: field("link"),
            set_cookie: resp.set_cookie("JSESSIONID"),
        };
        let port: u16 = field("port").parse().unwrap();
        assert_eq!(
            self.0.get(&port),
            Some(&page.route),
            "the page's jvmRoute is the instance whose connector answered"
        );
        page
    }
}

/// A client of the shop: a keep-alive connection to tether and its session, kept either
/// in a cookie (a browser) or only in the URL Tomcat rewrote (cookies disabled).
struct Visitor {
    http: HttpClient,
    cookies: bool,
    /// The JSESSIONID cookie (cookie visitors).
    cookie: Option<String>,
    /// The next URL: `/`, then the `encodeURL` link of the last page (URL visitors).
    next: String,
    /// Where its session lives, and how many requests the session has seen.
    home: String,
    count: u32,
}

impl Visitor {
    fn new(t: &Tether, cookies: bool) -> Visitor {
        Visitor {
            http: t.client(),
            cookies,
            cookie: None,
            next: "/".to_string(),
            home: String::new(),
            count: 0,
        }
    }

    async fn visit(&mut self, at: &Instances) -> Page {
        self.visit_with(at, &[]).await
    }

    async fn visit_with(&mut self, at: &Instances, extra: &[(&str, &str)]) -> Page {
        let cookie = self.cookie.as_ref().map(|c| format!("JSESSIONID={c}"));
        let mut headers: Vec<(&str, &str)> = extra.to_vec();
        if let Some(c) = &cookie {
            headers.push(("Cookie", c));
        }
        let path = if self.cookies { "/" } else { &self.next };
        let resp = self.http.get(path, &headers).await.expect("request");
        let page = at.parse(&resp);
        assert_eq!(page.status, 200, "{page:?}");
        if self.cookies {
            if let Some(c) = &page.set_cookie {
                self.cookie = Some(c.clone());
            }
        } else {
            self.next = page.link.clone();
        }
        page
    }

    /// The first request: Tomcat creates the session on the instance tether picked, and the
    /// session id carries that instance's jvmRoute.
    async fn start_session(&mut self, at: &Instances) {
        let page = self.visit(at).await;
        assert!(page.new, "{page:?}");
        assert_eq!(page.count, 1);
        assert!(
            page.session.ends_with(&format!(".{}", page.route)),
            "Tomcat tags the id with its jvmRoute: {page:?}"
        );
        assert_eq!(page.set_cookie.as_deref(), Some(page.session.as_str()));
        assert_eq!(
            page.link,
            format!("/index.jsp;jsessionid={}", page.session),
            "a new session's URLs are rewritten (Tomcat cannot know yet if cookies work)"
        );
        self.home = page.route;
        self.count = 1;
    }

    /// A request in the same session: same instance, same session, the counter goes on.
    async fn stays(&mut self, at: &Instances) {
        let page = self.visit(at).await;
        self.count += 1;
        assert_eq!(page.route, self.home, "the session stays on its instance");
        assert!(!page.new, "{page:?}");
        assert_eq!(page.count, self.count, "Tomcat's session counter: {page:?}");
        if self.cookies {
            assert_eq!(page.set_cookie, None, "no new cookie inside a session");
            assert_eq!(Some(&page.session), self.cookie.as_ref());
        } else {
            assert_eq!(
                page.link,
                format!("/index.jsp;jsessionid={}", page.session),
                "without cookies Tomcat keeps rewriting URLs"
            );
        }
    }

    /// A request whose session's instance is gone (dead or stopped): it is answered, by
    /// another instance, which starts a new session there (Tomcat does not replicate).
    async fn fails_over(&mut self, at: &Instances, gone: &str) {
        let old = self.home.clone();
        let page = self.visit(at).await;
        assert_ne!(page.route, gone, "{page:?}");
        assert_ne!(page.route, old, "{page:?}");
        assert!(page.new, "a new session on the failover instance: {page:?}");
        assert_eq!(page.count, 1);
        assert!(page.session.ends_with(&format!(".{}", page.route)));
        if self.cookies {
            assert_eq!(page.set_cookie.as_deref(), Some(page.session.as_str()));
        } else {
            assert!(page
                .link
                .ends_with(&format!(";jsessionid={}", page.session)));
        }
        self.home = page.route;
        self.count = 1;
    }
}

/// The requests tether has sent to one server (`GET /status`).
async fn requests_to(t: &Tether, server: &str) -> u64 {
    let (status, json) = t.admin("GET", "/status", None, b"").await;
    assert_eq!(status, 200, "{json}");
    json["clusters"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server)
        .unwrap_or_else(|| panic!("no {server} in {json}"))["requests"]
        .as_u64()
        .unwrap()
}

fn tally(visitors: &[Visitor]) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for v in visitors {
        *seen.entry(v.home.clone()).or_default() += 1;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_tomcat_sessions_stay_on_their_instance_and_fail_over() {
    let _turn = SERIAL.lock().await;
    let Some(mut shop) = start_tomcats("tomcat-sticky") else {
        return;
    };
    let tomcats = &mut shop.all;
    let at = Instances::of(tomcats);
    let t = tether_in_front(tomcats, false);

    // (a) 20 browsers with cookies: new sessions spread over the three instances, then
    // every request of a session goes to the instance named in its id.
    let mut browsers: Vec<Visitor> = (0..20).map(|_| Visitor::new(&t, true)).collect();
    for b in &mut browsers {
        b.start_session(&at).await;
    }
    let spread = tally(&browsers);
    for route in ROUTES {
        assert!(
            spread.get(route).copied().unwrap_or(0) >= 5,
            "new sessions by weight (equal): {spread:?}"
        );
    }
    for _ in 0..4 {
        for b in &mut browsers {
            b.stays(&at).await;
        }
    }

    // RemoteIpValve sees the client from tether's X-Forwarded-For and -Proto.
    let page = browsers[0]
        .visit_with(&at, &[("X-Forwarded-For", "203.0.113.7")])
        .await;
    browsers[0].count += 1;
    assert_eq!(page.count, browsers[0].count);
    assert_eq!(
        (page.remote.as_str(), page.scheme.as_str()),
        ("203.0.113.7", "http")
    );

    // (b) cookies disabled: the client follows the `;jsessionid=` links Tomcat rewrites.
    let mut no_cookies: Vec<Visitor> = (0..6).map(|_| Visitor::new(&t, false)).collect();
    for v in &mut no_cookies {
        v.start_session(&at).await;
    }
    assert_eq!(
        tally(&no_cookies).len(),
        3,
        "URL sessions on every instance"
    );
    for _ in 0..4 {
        for v in &mut no_cookies {
            v.stays(&at).await;
        }
    }

    // (c) tc3's JVM is killed: its sessions fail over with no client error, to a new
    // session on another instance, and stay there; the other sessions are untouched.
    tomcats[2].kill();
    let mut victims = 0;
    for v in browsers.iter_mut().chain(no_cookies.iter_mut()) {
        if v.home == "tc3" {
            victims += 1;
            v.fails_over(&at, "tc3").await;
        } else {
            v.stays(&at).await;
        }
    }
    assert!(victims >= 7, "tc3 had sessions of both kinds: {victims}");
    for _ in 0..3 {
        for v in browsers.iter_mut().chain(no_cookies.iter_mut()) {
            v.stays(&at).await;
        }
    }
    // New sessions go to the live instances only.
    let mut late: Vec<Visitor> = (0..6).map(|_| Visitor::new(&t, true)).collect();
    for b in &mut late {
        b.start_session(&at).await;
        assert_ne!(b.home, "tc3");
    }
    assert!(tomcats[0].alive() && tomcats[1].alive() && !tomcats[2].alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_and_stop_a_real_tomcat_through_the_admin_api() {
    let _turn = SERIAL.lock().await;
    let Some(shop) = start_tomcats("tomcat-admin") else {
        return;
    };
    let tomcats = &shop.all;
    let at = Instances::of(tomcats);
    let t = tether_in_front(tomcats, true);
    let mut browsers: Vec<Visitor> = (0..12).map(|_| Visitor::new(&t, true)).collect();
    for b in &mut browsers {
        b.start_session(&at).await;
    }
    assert_eq!(tally(&browsers).len(), 3, "{:?}", tally(&browsers));
    // tether's live sessions per server are Tomcat's own count.
    let (_, status) = t.admin("GET", "/status", None, b"").await;
    for tc in tomcats.iter() {
        let tomcat = tc.active_sessions().await;
        let row = status["clusters"][0]["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == tc.route())
            .unwrap()
            .clone();
        assert_eq!(
            row["sessions"]["live"],
            tomcat,
            "{}: tether {row}, Tomcat {tomcat}",
            tc.route()
        );
        assert!(tomcat > 0);
    }

    // Drain tc2: its sessions stay, new sessions avoid it.
    let (status, json) = t
        .admin("POST", "/clusters/shop/servers/tc2/drain", None, b"")
        .await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(t.server_status(None, "tc2").await.0, "draining");
    for _ in 0..3 {
        for b in &mut browsers {
            b.stays(&at).await;
        }
    }
    let mut newcomers: Vec<Visitor> = (0..12).map(|_| Visitor::new(&t, true)).collect();
    for b in &mut newcomers {
        b.start_session(&at).await;
        assert_ne!(b.home, "tc2", "a draining instance takes no new session");
    }
    assert_eq!(tally(&newcomers).len(), 2, "{:?}", tally(&newcomers));

    // Stop tc2: nothing goes to it; its sessions move to a new session elsewhere.
    let (status, json) = t
        .admin("POST", "/clusters/shop/servers/tc2/stop", None, b"")
        .await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(t.server_status(None, "tc2").await.0, "stopped");
    let before = requests_to(&t, "tc2").await;
    // Where tc2's sessions were, to look at them on tc2 directly afterwards.
    let on_tc2: Vec<(String, u32)> = browsers
        .iter()
        .filter(|b| b.home == "tc2")
        .map(|b| (b.cookie.clone().unwrap(), b.count))
        .collect();
    assert!(!on_tc2.is_empty());
    for b in &mut browsers {
        if b.home == "tc2" {
            b.fails_over(&at, "tc2").await;
        } else {
            b.stays(&at).await;
        }
    }
    for _ in 0..2 {
        for b in browsers.iter_mut().chain(newcomers.iter_mut()) {
            b.stays(&at).await;
        }
    }
    let mut after_stop: Vec<Visitor> = (0..6).map(|_| Visitor::new(&t, true)).collect();
    for b in &mut after_stop {
        b.start_session(&at).await;
        assert_ne!(b.home, "tc2");
    }
    assert_eq!(
        requests_to(&t, "tc2").await,
        before,
        "tether sent nothing to a stopped server"
    );
    // Asked directly, tc2 still has the moved sessions, untouched since the stop.
    let mut direct = HttpClient::new(tomcats[1].addr());
    for (cookie, count) in &on_tc2 {
        let resp = direct
            .get("/", &[("Cookie", &format!("JSESSIONID={cookie}"))])
            .await
            .unwrap();
        let page = at.parse(&resp);
        assert_eq!((page.route.as_str(), &page.session), ("tc2", cookie));
        assert_eq!(
            page.count,
            count + 1,
            "no request of this session reached tc2"
        );
    }

    // Activate: tc2 takes new sessions again.
    let (status, json) = t
        .admin("POST", "/clusters/shop/servers/tc2/activate", None, b"")
        .await;
    assert_eq!(status, 200, "{json}");
    let mut back: Vec<Visitor> = (0..6).map(|_| Visitor::new(&t, true)).collect();
    for b in &mut back {
        b.start_session(&at).await;
    }
    assert!(tally(&back).contains_key("tc2"), "{:?}", tally(&back));
}
