//! Real Apache Tomcat (Debian's `tomcat10` package) for the integration tests: one JVM per
//! instance, each with its own `CATALINA_BASE`, HTTP connector and `jvmRoute`, serving a
//! tiny JSP. Started as child processes of the test and killed (by PID) when dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `CATALINA_HOME` of Debian's `tomcat10` package.
pub const CATALINA_HOME: &str = "/usr/share/tomcat10";

/// How long one instance may take to start and answer its first JSP request (3 JVMs
/// starting at once on 2 cores take about 5–10 s; the rest is margin).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The page every instance serves at `/` (and `/index.jsp`), as `key=value` lines:
/// the instance's `jvmRoute` (a context parameter, not derived from the session), the
/// connector port that took the request, the session id, whether Tomcat created the
/// session with this request, a per-session request counter kept in the session, the
/// client address and scheme Tomcat sees (through `RemoteIpValve`), and a link rewritten
/// by `encodeURL` (`;jsessionid=` when the session did not come from a cookie).
const INDEX_JSP: &str = r#"<%@ page contentType="text/plain; charset=UTF-8" session="true" trimDirectiveWhitespaces="true" %>
<%
  Integer count = (Integer) session.getAttribute("count");
  count = (count == null) ? 1 : count + 1;
  session.setAttribute("count", count);
%>
jvmRoute=<%= application.getInitParameter("jvmRoute") %>
port=<%= request.getLocalPort() %>
session=<%= session.getId() %>
new=<%= session.isNew() %>
count=<%= count %>
remote=<%= request.getRemoteAddr() %>
scheme=<%= request.getScheme() %>
link=<%= response.encodeURL("/index.jsp") %>
"#;

/// Tomcat's own count of the sessions it holds (its session manager's `activeSessions`,
/// read through JMX), without making one.
const SESSIONS_JSP: &str = r#"<%@ page contentType="text/plain; charset=UTF-8" session="false" trimDirectiveWhitespaces="true" import="java.lang.management.ManagementFactory,javax.management.ObjectName" %>
jvmRoute=<%= application.getInitParameter("jvmRoute") %>
active=<%= ManagementFactory.getPlatformMBeanServer().getAttribute(new ObjectName("Catalina:type=Manager,host=localhost,context=/"), "activeSessions") %>
"#;

/// What the servlet API tells of a request, as `key=value` lines (for the AJP tests: what
/// Tomcat sees of the client through the connector), and the body's length and sum.
const ECHO_JSP: &str = r#"<%@ page contentType="text/plain; charset=UTF-8" session="false" trimDirectiveWhitespaces="true" %>
<%
  java.io.InputStream in = request.getInputStream();
  long n = 0, sum = 0;
  int b;
  while ((b = in.read()) >= 0) { n++; sum += b; }
  java.security.cert.X509Certificate[] chain = (java.security.cert.X509Certificate[])
      request.getAttribute("jakarta.servlet.request.X509Certificate");
%>
method=<%= request.getMethod() %>
protocol=<%= request.getProtocol() %>
uri=<%= request.getRequestURI() %>
query=<%= request.getQueryString() %>
server=<%= request.getServerName() %>:<%= request.getServerPort() %>
remote=<%= request.getRemoteAddr() %>
remote_port=<%= request.getRemotePort() %>
scheme=<%= request.getScheme() %>
secure=<%= request.isSecure() %>
cipher=<%= request.getAttribute("jakarta.servlet.request.cipher_suite") %>
keysize=<%= request.getAttribute("jakarta.servlet.request.key_size") %>
cert=<%= chain == null ? "none" : chain[0].getSubjectX500Principal().getName() %>
chain=<%= chain == null ? 0 : chain.length %>
header=<%= request.getHeader("X-Test") %>
ghost=<%= request.getAttribute("ghost") %>
body=<%= n %>/<%= sum %>
"#;

/// `?mib=N` MiB of text, written as it is made (no length: the connector frames it).
const BIG_JSP: &str = r#"<%@ page contentType="application/octet-stream" session="false" trimDirectiveWhitespaces="true" %><%
  int mib = Integer.parseInt(request.getParameter("mib"));
  char[] block = new char[65536];
  for (int i = 0; i < block.length; i++) block[i] = (char) ('a' + i % 26);
  for (int i = 0; i < mib * 16; i++) out.write(block);
%>"#;

/// `first;`, flushed, then (once the file `?gate=` exists, within 10 s) `second`.
const FLUSH_JSP: &str = r#"<%@ page contentType="text/plain" session="false" trimDirectiveWhitespaces="true" %><%
  out.print("first;");
  out.flush();
  java.io.File gate = new java.io.File(request.getParameter("gate"));
  for (int i = 0; i < 200 && !gate.exists(); i++) Thread.sleep(50);
  out.print(gate.exists() ? "second" : "timeout");
%>"#;

/// The AJP connector's `secret` on every instance (`secretRequired="true"`).
pub const AJP_SECRET: &str = "tether-test-secret";

/// A running Tomcat JVM; killed when dropped.
pub struct RealTomcat {
    route: String,
    addr: SocketAddr,
    ajp: SocketAddr,
    base: PathBuf,
    child: Option<Child>,
}

/// Is Debian's `tomcat10` installed?
pub fn installed() -> bool {
    Path::new(CATALINA_HOME).is_dir()
}

impl RealTomcat {
    /// Creates a `CATALINA_BASE` under `dir` and starts Tomcat with `jvm_route`; returns
    /// once it answers the JSP. `None` only when `tomcat10` is not installed; panics when
    /// Tomcat is installed but does not start (with its console output).
    pub fn start(dir: &Path, jvm_route: &str) -> Option<RealTomcat> {
        let mut all = RealTomcat::start_all(dir, &[jvm_route])?;
        all.pop()
    }

    /// Starts one instance per route, all JVMs at once, and waits until every one answers.
    pub fn start_all(dir: &Path, routes: &[&str]) -> Option<Vec<RealTomcat>> {
        if !installed() {
            return None;
        }
        let mut all: Vec<RealTomcat> = routes
            .iter()
            .map(|route| RealTomcat::spawn(dir, route))
            .collect();
        let deadline = Instant::now() + START_TIMEOUT;
        for t in &mut all {
            t.wait_ready(deadline);
        }
        Some(all)
    }

    /// Writes the instance's `CATALINA_BASE` and launches its JVM (not yet ready).
    fn spawn(dir: &Path, route: &str) -> RealTomcat {
        let base = dir.join(format!("tomcat-{route}"));
        let _ = std::fs::remove_dir_all(&base);
        for sub in ["conf", "logs", "temp", "work", "webapps/ROOT/WEB-INF"] {
            std::fs::create_dir_all(base.join(sub)).unwrap();
        }
        // Tomcat's default descriptors (default and JSP servlets, MIME types), its class
        // loader settings and logging, from the package's pristine copies.
        for file in ["web.xml", "catalina.properties", "logging.properties"] {
            let from = [
                Path::new(CATALINA_HOME).join("etc").join(file),
                Path::new("/etc/tomcat10").join(file),
            ]
            .into_iter()
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("tomcat10 is installed but has no {file}"));
            std::fs::copy(&from, base.join("conf").join(file)).unwrap();
        }
        // No jar scanning (seconds per start on a small VM) and no session persistence
        // across restarts: a killed instance's sessions are really gone.
        std::fs::write(
            base.join("conf/context.xml"),
            r#"<?xml version="1.0" encoding="UTF-8"?>
<Context>
  <WatchedResource>WEB-INF/web.xml</WatchedResource>
  <JarScanner scanClassPath="false" scanManifest="false"/>
  <Manager pathname=""/>
</Context>
"#,
        )
        .unwrap();
        std::fs::write(
            base.join("webapps/ROOT/WEB-INF/web.xml"),
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="https://jakarta.ee/xml/ns/jakartaee" version="6.0" metadata-complete="true">
  <context-param><param-name>jvmRoute</param-name><param-value>{route}</param-value></context-param>
  <welcome-file-list><welcome-file>index.jsp</welcome-file></welcome-file-list>
</web-app>
"#
            ),
        )
        .unwrap();
        std::fs::write(base.join("webapps/ROOT/index.jsp"), INDEX_JSP).unwrap();
        std::fs::write(base.join("webapps/ROOT/sessions.jsp"), SESSIONS_JSP).unwrap();
        std::fs::write(base.join("webapps/ROOT/echo.jsp"), ECHO_JSP).unwrap();
        std::fs::write(base.join("webapps/ROOT/big.jsp"), BIG_JSP).unwrap();
        std::fs::write(base.join("webapps/ROOT/flush.jsp"), FLUSH_JSP).unwrap();
        let mut t = RealTomcat {
            route: route.to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ajp: SocketAddr::from(([127, 0, 0, 1], 0)),
            base,
            child: None,
        };
        t.launch();
        t
    }

    /// Writes `server.xml` for fresh free ports and starts the JVM.
    fn launch(&mut self) {
        self.addr = SocketAddr::from(([127, 0, 0, 1], super::free_port()));
        self.ajp = SocketAddr::from(([127, 0, 0, 1], super::free_port()));
        self.start_jvm();
    }

    /// Kills the JVM (SIGKILL) and starts it again on the same ports, as an operator's
    /// restart; returns once it answers.
    pub fn restart(&mut self) {
        self.kill();
        self.start_jvm();
        self.wait_ready(Instant::now() + START_TIMEOUT);
    }

    /// Writes `server.xml` for this instance's ports and starts the JVM.
    fn start_jvm(&mut self) {
        // Shutdown port -1: only a signal stops this Tomcat. An HTTP/1.1 connector and an
        // AJP one (with a secret) on loopback. RemoteIpValve: the client address and
        // scheme from tether's X-Forwarded-For / X-Forwarded-Proto; SSLValve: the client's
        // TLS from tether's `ssl_headers` (the HTTP way to what AJP carries).
        let server_xml = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector port="{port}" address="127.0.0.1" protocol="HTTP/1.1" connectionTimeout="20000"/>
    <Connector port="{ajp}" address="127.0.0.1" protocol="AJP/1.3" secret="{secret}" secretRequired="true"/>
    <Engine name="Catalina" defaultHost="localhost" jvmRoute="{route}">
      <Valve className="org.apache.catalina.valves.RemoteIpValve"
             remoteIpHeader="X-Forwarded-For" protocolHeader="X-Forwarded-Proto"/>
      <Valve className="org.apache.catalina.valves.SSLValve"/>
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false"/>
    </Engine>
  </Service>
</Server>
"#,
            port = self.addr.port(),
            ajp = self.ajp.port(),
            secret = AJP_SECRET,
            route = self.route,
        );
        std::fs::write(self.base.join("conf/server.xml"), server_xml).unwrap();
        let console = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.base.join("logs/console.log"))
            .unwrap();
        let home = Path::new(CATALINA_HOME);
        let classpath = format!(
            "{}:{}",
            home.join("bin/bootstrap.jar").display(),
            home.join("bin/tomcat-juli.jar").display()
        );
        let mut cmd = Command::new(java());
        cmd.args([
            // A small, quick-starting JVM: three of them share two cores with the tests.
            "-Xms32m",
            "-Xmx192m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
        ])
        .arg(format!("-Dcatalina.home={}", home.display()))
        .arg(format!("-Dcatalina.base={}", self.base.display()))
        .arg(format!(
            "-Djava.io.tmpdir={}",
            self.base.join("temp").display()
        ))
        .arg(format!(
            "-Djava.util.logging.config.file={}",
            self.base.join("conf/logging.properties").display()
        ))
        .arg("-Djava.util.logging.manager=org.apache.juli.ClassLoaderLogManager")
        // A connector that cannot bind (port taken meanwhile) ends the JVM: start again.
        .arg("-Dorg.apache.catalina.startup.EXIT_ON_INIT_FAILURE=true")
        .arg("-cp")
        .arg(classpath)
        .args(["org.apache.catalina.startup.Bootstrap", "start"])
        .current_dir(&self.base)
        .stdin(Stdio::null())
        .stdout(console.try_clone().unwrap())
        .stderr(console);
        // If the test process dies without dropping us (killed, aborted), the kernel kills
        // the JVM too. SAFETY: prctl is async-signal-safe; nothing else runs in the child.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        self.child = Some(cmd.spawn().expect("start java (is a JRE installed?)"));
    }

    /// Waits until the JSP answers with this instance's route (the first request compiles
    /// it). A JVM that exits early (its port was taken meanwhile) is started again on
    /// another port.
    fn wait_ready(&mut self, deadline: Instant) {
        let mut launches = 1;
        loop {
            if let Ok(Some(status)) = self.child.as_mut().unwrap().try_wait() {
                if launches < 3 && Instant::now() < deadline {
                    launches += 1;
                    self.launch();
                    continue;
                }
                panic!(
                    "Tomcat {} exited ({status}); console:\n{}",
                    self.route,
                    self.console()
                );
            }
            if let Some(page) = get_page(self.addr) {
                if page.contains(&format!("jvmRoute={}\n", self.route)) {
                    return;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "Tomcat {} did not answer on {} within {START_TIMEOUT:?}; console:\n{}",
                    self.route,
                    self.addr,
                    self.console()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The HTTP connector's address (what tether's server `address` is).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The AJP connector's address.
    pub fn ajp_addr(&self) -> SocketAddr {
        self.ajp
    }

    /// The `jvmRoute` of its `<Engine>`.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// Is the JVM still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Kills the JVM with SIGKILL (a crash: no shutdown, sessions lost) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The sessions Tomcat holds now, by its own count (`/sessions.jsp`, asked directly).
    pub async fn active_sessions(&self) -> u64 {
        let mut c = tether::cli::sim::HttpClient::new(self.addr);
        let resp = c.get("/sessions.jsp", &[]).await.expect("sessions.jsp");
        let text = String::from_utf8_lossy(&resp.body).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix("active="))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no count in {text:?}"))
    }

    /// What the JVM wrote to stdout and stderr (Tomcat logs to the console too).
    pub fn console(&self) -> String {
        std::fs::read_to_string(self.base.join("logs/console.log")).unwrap_or_default()
    }

    /// A line for a tether cluster's `servers:` (indented like `common::server_line`).
    pub fn server_line(&self, extra: &str) -> String {
        let sep = if extra.is_empty() { "" } else { ", " };
        format!(
            "      - {{ name: {r}, address: \"{a}\", route: {r}{sep}{extra} }}\n",
            r = self.route,
            a = self.addr
        )
    }
}

impl Drop for RealTomcat {
    fn drop(&mut self) {
        self.kill();
        // Keep the instance's files (logs, compiled JSP) when a test failed.
        if std::thread::panicking() {
            eprintln!("Tomcat {} kept at {}", self.route, self.base.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }
}

/// `$JAVA_HOME/bin/java` when set, else `java` on the PATH.
fn java() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("java"))
}

/// One plain HTTP/1.0 GET of `/` straight to Tomcat; the body when the status is 200.
fn get_page(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    // A page that makes no session: Tomcat's session count is then tether's to check.
    s.write_all(b"GET /sessions.jsp HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The page's `key=value` lines.
pub fn lines(body: &[u8]) -> std::collections::HashMap<String, String> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// tether in front of `tomcats` over AJP, with `secret` in its secret file and `listener`
/// (more YAML of its listener).
pub fn tether_over_ajp(
    tomcats: &[RealTomcat],
    dir: &std::path::Path,
    secret: &str,
    listener: &str,
) -> super::Tether {
    tether_over_ajp_with(tomcats, dir, (secret, ""), listener)
}

/// As `tether_over_ajp`, with `ajp_extra` in the cluster's `ajp:` mapping.
pub fn tether_over_ajp_with(
    tomcats: &[RealTomcat],
    dir: &std::path::Path,
    (secret, ajp_extra): (&str, &str),
    listener: &str,
) -> super::Tether {
    let file = dir.join(format!("ajp-{}.secret", secret.len()));
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    let mut cluster = format!(
        "    recover_after: 60s\n    read_timeout: 30s\n    ajp: {{ secret_file: {}{ajp_extra} }}\n    servers:\n",
        file.display()
    );
    for tc in tomcats {
        cluster.push_str(&format!(
            "      - {{ name: {r}, address: \"{a}\", route: {r} }}\n",
            r = tc.route(),
            a = tc.ajp_addr()
        ));
    }
    super::Tether::start_with(super::Opts {
        cluster,
        // AJP is served by tether's own front ends (the suite's second pass puts listeners
        // that do not say on Pingora's proxy).
        listener_extra: format!("    http1: engine\n{listener}"),
        ..super::Opts::default()
    })
}
