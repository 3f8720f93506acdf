//! "Why this server": `POST /explain` against a running tether (live
//! states and sessions) and `tether explain -c FILE` against a config file.

mod common;

use common::{cluster_yaml, tomcats, Browser, Opts, Tether};
use serde_json::{json, Value};

async fn explain(t: &Tether, ask: Value) -> (u16, Value) {
    t.admin("POST", "/explain", None, ask.to_string().as_bytes())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_says_where_a_request_goes_and_why() {
    let sims = tomcats(3).await;
    let t = Tether::start_with(Opts {
        cluster: cluster_yaml("", &sims),
        admin: true,
        listener_extra: "    routes:\n      - { name: old, path: \"/old/*\", redirect: { to: \"https://new.example/\" } }\n".into(),
        ..Opts::default()
    });
    // A real session on some server, then its cookie explained.
    let mut b = Browser::new(&t);
    let (_, home) = b.get("/").await;
    let cookie = format!("JSESSIONID={}", b.cookie.clone().unwrap());
    let (status, e) = explain(
        &t,
        json!({ "url": "/cart?x=1", "headers": [["Cookie", format!("theme=dark; {cookie}")]] }),
    )
    .await;
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["cluster"], "shop");
    assert_eq!(
        e["decision"],
        json!({ "server": home, "outcome": "route_hit" }),
        "{e}"
    );
    assert_eq!(e["session"]["found_in"], "cookie `JSESSIONID`");
    assert_eq!(e["session"]["token"], home.as_str());
    assert_eq!(
        e["session"]["names"][0],
        format!("server `{home}` (its route)")
    );
    let row = e["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == home.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["live_sessions"], 1, "{e}");
    assert_eq!(
        e["failover_chain"].as_array().unwrap().len(),
        3,
        "max_attempts servers in turn"
    );
    assert_eq!(e["failover_chain"][1]["outcome"], "failover");
    // The server is stopped: explain follows the live state, and claims nothing.
    let (status, _) = t
        .admin(
            "POST",
            &format!("/clusters/shop/servers/{home}/stop"),
            None,
            b"",
        )
        .await;
    assert_eq!(status, 200);
    let (_, e) = explain(
        &t,
        json!({ "url": format!("/a;jsessionid={}", b.cookie.clone().unwrap()) }),
    )
    .await;
    assert_eq!(e["decision"]["outcome"], "failover", "{e}");
    assert_ne!(e["decision"]["server"], home.as_str());
    assert_eq!(e["session"]["found_in"], "path parameter `;jsessionid=`");
    // No session: a new one; a route that answers; bad requests.
    let (_, e) = explain(&t, json!({ "method": "POST", "url": "/" })).await;
    assert_eq!(e["decision"]["outcome"], "new_session");
    assert_eq!(e["session"], Value::Null);
    let (_, e) = explain(&t, json!({ "url": "/old/page" })).await;
    assert_eq!(e["route"], "old");
    assert_eq!(
        e["answered_by_route"]["location"], "https://new.example/",
        "{e}"
    );
    for bad in [
        json!({ "url": "nope" }),
        json!({ "url": "/", "listener": "x" }),
        json!({ "uri": "/" }),
    ] {
        let (status, e) = explain(&t, bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {e}");
        assert!(e["error"].is_string());
    }
}

#[test]
fn tether_explain_reviews_a_config_file() {
    let dir = common::scratch_dir("explain-cli");
    let conf = dir.join("tether.yaml");
    std::fs::write(
        &conf,
        "listeners:\n  - { name: web, address: \"127.0.0.1:1\", cluster: was }\n\
         clusters:\n  - name: was\n    session_style: websphere\n    sticky_force: true\n    servers:\n\
         \x20     - { name: w1, address: \"127.0.0.1:2\", clone_id: c1 }\n\
         \x20     - { name: w2, address: \"127.0.0.1:3\", clone_id: c2 }\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(common::tether_bin())
            .arg("-c")
            .arg(&conf)
            .arg("explain")
            .args(args)
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (
            out.status.code(),
            json,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, e, _) = run(&["GET /app", "-H", "Cookie: JSESSIONID=0000ABC:c2:c1"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        e["decision"],
        json!({ "server": "w2", "outcome": "route_hit" }),
        "{e}"
    );
    assert_eq!(
        e["session"]["names"],
        json!(["clone `c2`: server `w2`", "clone `c1`: server `w1`"])
    );
    assert_eq!(
        e["failover_chain"][1],
        json!({ "server": "w1", "outcome": "failover" }),
        "the replica next"
    );
    // A token that is no clone and no partition the table knows: hashed, even with
    // sticky_force (partition ids are learned from responses: no lost session).
    let (_, e, _) = run(&["/app", "-H", "Cookie: JSESSIONID=0000ABC:zz"]);
    assert_eq!(e["decision"]["outcome"], "hash_fallback", "{e}");
    assert_eq!(
        e["session"]["names"][0],
        "`zz`: no clone, and no partition the table knows"
    );
    let (code, _, err) = run(&["/app", "-H", "no colon"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("Name: value"), "{err}");
}
