//! `tether import websphere`: WebSphere plug-in configs (`plugin-cfg.xml` fixtures written
//! after IBM's documentation) become tether YAML that `tether -t` accepts, with every setting
//! that has no equivalent named in a comment.

mod common;

use common::import::*;
use serde_yaml::Value;

fn websphere_full() -> String {
    import(&["websphere", fixture("plugin-cfg.xml").to_str().unwrap()])
}

#[test]
fn websphere_plugin_cfg_becomes_websphere_clusters_and_routes() {
    let yaml = websphere_full();
    let doc = parse(&yaml);
    assert_eq!(doc["watch_config"].as_str(), Some("1m"), "RefreshInterval");
    let clusters = &doc["clusters"];
    let shop = named(clusters, "ShopCluster");
    assert_eq!(shop["session_style"].as_str(), Some("websphere"));
    assert_eq!(shop["balance"].as_str(), Some("weighted"));
    assert_eq!(shop["recover_after"].as_str(), Some("30s"));
    assert_eq!(shop["connect_timeout"].as_str(), Some("5s"));
    assert_eq!(shop["read_timeout"].as_str(), Some("15m"));
    assert_eq!(shop["tls"]["verify"], Value::Bool(true));
    assert!(
        shop["tls"]["sni"].as_str().is_some(),
        "servers addressed by IP need a name"
    );
    let n1 = named(&shop["servers"], "node1_shop1");
    assert_eq!(
        n1["address"].as_str(),
        Some("10.0.3.11:9443"),
        "the https transport"
    );
    assert_eq!(n1["clone_id"].as_str(), Some("1a2b3c4d"));
    assert_eq!(n1["weight"].as_u64(), Some(2));
    assert!(n1["backup"].is_null());
    assert_eq!(
        named(&shop["servers"], "node3_shop1")["backup"],
        Value::Bool(true)
    );

    let intra = named(clusters, "Intranet_Cluster");
    assert_eq!(intra["session_style"].as_str(), Some("websphere"));
    assert_eq!(intra["session_cookie"].as_str(), Some("INTRASESSION"));
    assert_eq!(intra["session_path"].as_str(), Some("intrasession"));
    assert_eq!(intra["websphere"]["clone_separator"].as_str(), Some("+"));
    assert_eq!(intra["recover_after"].as_str(), Some("1m"));
    assert_eq!(intra["read_timeout"].as_str(), Some("2m"));
    assert!(intra["tls"].is_null());
    let i1 = named(&intra["servers"], "node1_intra1");
    assert_eq!(i1["address"].as_str(), Some("10.0.4.21:9081"));
    assert_eq!(
        i1["state"].as_str(),
        Some("draining"),
        "LoadBalanceWeight 0"
    );
    let i2 = named(&intra["servers"], "node2_intra1");
    assert_eq!(i2["weight"].as_u64(), Some(30));
    assert_eq!(i2["max_inflight"].as_u64(), Some(200), "MaxConnections");
    assert!(i1["max_inflight"].is_null(), "MaxConnections -1: no bound");
    assert!(
        yaml.contains("negative: the plug-in marked the server down after a timeout"),
        "ServerIOTimeout's sign as IBM documents it"
    );
    assert!(yaml.contains("named `Intranet Cluster` in the source"));

    let listeners = doc["listeners"].as_sequence().unwrap();
    assert_eq!(listeners.len(), 1);
    let r = routes(&listeners[0]);
    assert_eq!(r.len(), 12, "{r:?}");
    for want in [
        route("www.example.com:80", "/shop/*", "ShopCluster"),
        route("*.shop.example.com", "/shop", "ShopCluster"),
        route("www.example.com:80", "*.jsp", "ShopCluster"),
        route("*:80", "/intranet/*", "Intranet_Cluster"),
        route("*:9080", "/snoop", "Intranet_Cluster"),
    ] {
        assert!(r.contains(&want), "missing {want:?} in {r:?}");
    }
    assert!(
        !r.iter().any(|x| x.0.ends_with(":443")),
        "port 443 hosts go to the https listener"
    );
    for line in [
        "#   - name: https",
        "#       - { host: \"www.example.com:443\", path: \"/shop/*\", cluster: ShopCluster }",
        "#       - { host: \"*:443\", path: \"/snoop\", cluster: Intranet_Cluster }",
    ] {
        assert!(yaml.contains(line), "no `{line}` in\n{yaml}");
    }
    let warnings = check(&yaml, "ws-full");
    assert!(!warnings.contains("warning"), "{warnings}");
}

#[test]
fn websphere_settings_without_an_equivalent_are_named_in_comments() {
    let yaml = websphere_full();
    let notes = comments(&yaml);
    let xml = std::fs::read_to_string(fixture("plugin-cfg.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    for n in doc.descendants().filter(|n| {
        n.has_tag_name("Config") || n.has_tag_name("ServerCluster") || n.has_tag_name("Server")
    }) {
        for a in n.attributes() {
            if matches!(a.name(), "Name" | "CloneID") {
                continue;
            }
            let said = format!("{}=\"{}\"", a.name(), a.value());
            assert!(
                notes.contains(&said),
                "`{said}` is not named in a comment:\n{notes}"
            );
        }
    }
    for needle in [
        "<Log LogLevel=\"Error\"",
        "<Property Name=\"ESIEnable\" Value=\"true\">",
        "<RequestMetrics",
        "plugin-key.kdb",
        "REVIEW: the plug-in checked the servers' certificates with the keyring",
        "ca: /etc/tether/ShopCluster-ca.pem",
        "REVIEW: the servers are addressed by IP",
        "LoadBalance=\"Random\": tether balances new sessions by weight",
    ] {
        assert!(
            notes.contains(needle),
            "no `{needle}` in the comments:\n{notes}"
        );
    }
}

#[test]
fn websphere_mixed_transports_missing_clone_ids_and_only_https_hosts() {
    let dir = scratch("ws-edge");
    let file = dir.join("plugin-cfg.xml");
    // ISO-8859-1, as WebSphere writes it: the comment has a Latin-1 `é`.
    let mut xml =
        b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><!-- g\xe9n\xe9r\xe9 -->\n".to_vec();
    xml.extend_from_slice(
        br#"<Config RefreshInterval="0">
   <VirtualHostGroup Name="secure">
      <VirtualHost Name="*:443"/>
   </VirtualHostGroup>
   <ServerCluster Name="apps" LoadBalance="Round Robin">
      <Server Name="a1" CloneID="c1">
         <Transport Hostname="127.0.0.1" Port="9080" Protocol="http"/>
      </Server>
      <Server Name="a2" CloneID="c2">
         <Transport Hostname="localhost" Port="9443" Protocol="https"/>
      </Server>
   </ServerCluster>
   <ServerCluster Name="solo">
      <Server Name="server1">
         <Transport Hostname="localhost" Port="9444" Protocol="https"/>
      </Server>
   </ServerCluster>
   <UriGroup Name="u"><Uri Name="/apps/*"/><Uri Name="relative"/></UriGroup>
   <UriGroup Name="s"><Uri Name="/solo/*"/></UriGroup>
   <Route ServerCluster="apps" UriGroup="u" VirtualHostGroup="secure"/>
   <Route ServerCluster="solo" UriGroup="s"/>
</Config>
"#,
    );
    std::fs::write(&file, xml).unwrap();
    let yaml = import(&["websphere", file.to_str().unwrap()]);
    let doc = parse(&yaml);
    let apps = named(&doc["clusters"], "apps");
    assert_eq!(apps["session_style"].as_str(), Some("websphere"));
    assert!(apps["tls"].is_null(), "not every server has https: http");
    let a2 = named(&apps["servers"], "a2");
    assert_eq!(a2["address"].as_str(), Some("localhost:9443"));
    assert!(yaml.contains("REVIEW: only a https transport, but the cluster speaks http"));
    let solo = named(&doc["clusters"], "solo");
    assert!(solo["session_style"].is_null(), "a server without CloneID");
    assert_eq!(solo["tls"]["verify"], Value::Bool(true));
    assert!(
        solo["tls"]["sni"].is_null(),
        "addressed by name: its own name is checked"
    );
    assert!(yaml.contains("REVIEW: not every Server has a CloneID"));
    let web = &doc["listeners"][0];
    assert_eq!(
        routes(web),
        [route("", "/solo/*", "solo")],
        "no VirtualHostGroup: any host"
    );
    assert!(yaml.contains("#       - { host: \"*:443\", path: \"/apps/*\", cluster: apps }"));
    assert!(yaml.contains("Uri Name=\"relative\"") && yaml.contains("left out"));
    assert!(doc["watch_config"].is_null());
    assert!(yaml.contains("Config RefreshInterval=\"0\": no tether equivalent"));
    check(&yaml, "ws-edge");
}

#[test]
fn trusted_proxies_are_the_listeners_when_the_plugin_trusted_them() {
    let dir = scratch("ws-trusted");
    let config = |enable: &str| {
        format!(
            r#"<?xml version="1.0" encoding="ISO-8859-1"?>
<Config TrustedProxyEnable="{enable}">
   <TrustedProxyGroup>
      <TrustedProxy Name="10.0.0.5"/>
      <TrustedProxy Name="2001:db8::7"/>
      <TrustedProxy Name="lb.example.com"/>
   </TrustedProxyGroup>
   <ServerCluster Name="C">
      <Server CloneID="c1" Name="s1"><Transport Hostname="10.0.3.1" Port="9080" Protocol="http"/></Server>
   </ServerCluster>
</Config>
"#
        )
    };
    let on = dir.join("on.xml");
    std::fs::write(&on, config("true")).unwrap();
    let yaml = import(&["websphere", on.to_str().unwrap()]);
    let doc = parse(&yaml);
    let web = &doc["listeners"][0];
    assert_eq!(
        web["trusted_proxies"],
        parse(r#"["10.0.0.5", "2001:db8::7"]"#),
        "{yaml}"
    );
    assert!(
        yaml.contains("trusted proxies by name (lb.example.com)"),
        "{yaml}"
    );
    check(&yaml, "ws-trusted");
    let off = dir.join("off.xml");
    std::fs::write(&off, config("false")).unwrap();
    let yaml = import(&["websphere", off.to_str().unwrap()]);
    assert!(
        parse(&yaml)["listeners"][0]["trusted_proxies"].is_null(),
        "{yaml}"
    );
    assert!(
        yaml.contains("not trusted (TrustedProxyEnable is not true)"),
        "{yaml}"
    );
}

#[test]
fn server_io_timeouts_carry_over_as_the_plugin_meant_them() {
    let dir = scratch("ws-timeouts");
    let config = |cluster_attrs: &str, server_attrs: &str| {
        format!(
            r#"<?xml version="1.0" encoding="ISO-8859-1"?>
<Config>
   <ServerCluster Name="C" {cluster_attrs}>
      <Server CloneID="c1" Name="s1" {server_attrs}><Transport Hostname="10.0.3.1" Port="9080" Protocol="http"/></Server>
      <Server CloneID="c2" Name="s2" {server_attrs}><Transport Hostname="10.0.3.2" Port="9080" Protocol="http"/></Server>
   </ServerCluster>
</Config>
"#
        )
    };
    let cluster = |name: &str, cluster_attrs: &str, server_attrs: &str| {
        let file = dir.join(name);
        std::fs::write(&file, config(cluster_attrs, server_attrs)).unwrap();
        let yaml = import(&["websphere", file.to_str().unwrap()]);
        check(&yaml, name);
        (parse(&yaml)["clusters"][0].clone(), yaml)
    };
    // No ServerIOTimeout: the plug-in blocked, as long as the server took.
    let (c, yaml) = cluster("blocking.xml", "", "");
    assert_eq!(c["read_timeout"].as_str(), Some("24h"), "{yaml}");
    assert!(c["retry_on"].is_null(), "nothing timed out: {yaml}");
    // A timeout, and ServerIOTimeoutRetry's default (-1): the request went elsewhere.
    let (c, yaml) = cluster("retry.xml", "", r#"ServerIOTimeout="120""#);
    assert_eq!(c["read_timeout"].as_str(), Some("2m"));
    assert_eq!(
        c["retry_on"],
        parse("[connect_failure, empty_response, response_timeout]"),
        "{yaml}"
    );
    // A bounded number of resends, and none.
    let (c, _) = cluster(
        "two.xml",
        r#"ServerIOTimeoutRetry="2""#,
        r#"ServerIOTimeout="-60""#,
    );
    assert_eq!(
        c["max_attempts"].as_u64(),
        Some(3),
        "the first try and 2 resends"
    );
    let (c, yaml) = cluster(
        "none.xml",
        r#"ServerIOTimeoutRetry="0""#,
        r#"ServerIOTimeout="60""#,
    );
    assert!(c["retry_on"].is_null(), "{yaml}");
    assert!(
        yaml.contains("a timed-out request is not sent again"),
        "{yaml}"
    );
}

#[test]
fn post_size_limit_bounds_the_bodies_of_the_clusters_routes() {
    let dir = scratch("ws-post-size");
    let file = dir.join("plugin-cfg.xml");
    std::fs::write(
        &file,
        r#"<?xml version="1.0" encoding="ISO-8859-1"?>
<Config>
   <VirtualHostGroup Name="vh"><VirtualHost Name="*:80"/></VirtualHostGroup>
   <UriGroup Name="u"><Uri Name="/shop/*"/></UriGroup>
   <ServerCluster Name="C" PostSizeLimit="1048576">
      <Server CloneID="c1" Name="s1"><Transport Hostname="10.0.3.1" Port="9080" Protocol="http"/></Server>
   </ServerCluster>
   <Route ServerCluster="C" UriGroup="u" VirtualHostGroup="vh"/>
</Config>
"#,
    )
    .unwrap();
    let yaml = import(&["websphere", file.to_str().unwrap()]);
    check(&yaml, "ws-post-size");
    let route = &parse(&yaml)["listeners"][0]["routes"][0];
    assert_eq!(
        route["max_request_body"].as_u64(),
        Some(1_048_576),
        "{yaml}"
    );
}
