//! `tether import mod_jk`: the settings of Apache and mod_jk that change what tether
//! answers, carried over: the main server's `LimitRequestBody`, a mount's
//! `use_server_errors`. Each imported config is checked by `tether -t`.

mod common;

use common::import::*;

#[test]
fn the_main_servers_limit_request_body_bounds_the_listeners_bodies() {
    let dir = scratch("jk-body-limit");
    let workers = dir.join("workers.properties");
    std::fs::write(
        &workers,
        "worker.list=tc\nworker.tc.host=10.0.0.5\nworker.tc.port=8009\n",
    )
    .unwrap();
    let httpd = dir.join("httpd.conf");
    std::fs::write(
        &httpd,
        "LimitRequestBody 2097152\nJkMount /app/* tc\n<Location /upload>\n  LimitRequestBody 0\n</Location>\n",
    )
    .unwrap();
    let yaml = import(&[
        "mod_jk",
        workers.to_str().unwrap(),
        "--jkmount-from",
        httpd.to_str().unwrap(),
    ]);
    check(&yaml, "jk-body-limit");
    let web = &parse(&yaml)["listeners"][0];
    assert_eq!(
        web["limits"]["max_request_body"].as_u64(),
        Some(2_097_152),
        "{yaml}"
    );
    assert!(
        yaml.contains("only the main server's LimitRequestBody is imported"),
        "{yaml}"
    );
}

#[test]
fn use_server_errors_on_a_mount_replaces_the_clusters_error_answers() {
    let dir = scratch("jk-server-errors");
    let workers = dir.join("workers.properties");
    std::fs::write(
        &workers,
        "worker.list=tc\nworker.tc.host=10.0.0.5\nworker.tc.port=8009\n",
    )
    .unwrap();
    let map = dir.join("uriworkermap.properties");
    std::fs::write(
        &map,
        "/app/*=tc;use_server_errors=500;reply_timeout=60000\n",
    )
    .unwrap();
    let yaml = import(&["mod_jk", workers.to_str().unwrap(), map.to_str().unwrap()]);
    check(&yaml, "jk-server-errors");
    let cluster = &parse(&yaml)["clusters"][0];
    assert_eq!(
        cluster["replace_server_errors"].as_u64(),
        Some(500),
        "{yaml}"
    );
    assert!(
        yaml.contains("rule extensions `reply_timeout=60000`: no tether equivalent"),
        "the other extension is still said: {yaml}"
    );
}
