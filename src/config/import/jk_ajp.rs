//! A mod_jk cluster whose workers are `ajp13` → the cluster's `ajp:` section: the packet
//! size kept, and the secret said (tether reads it from a file the import cannot write: a
//! secret does not belong in the YAML).

use super::doc::{Item, Value};
use super::jk_props::{said, Worker};

/// The `ajp:` section of a cluster over `members` (name, worker when defined, type), or
/// `None` when none speaks AJP; a cluster of AJP and other workers is said in `notes`.
pub fn section(
    members: &[(&str, Option<&Worker>, String)],
    notes: &mut Vec<String>,
) -> Option<Item> {
    let ajp: Vec<_> = members.iter().filter(|m| m.2.starts_with("ajp")).collect();
    if ajp.is_empty() {
        return None;
    }
    if ajp.len() < members.len() {
        notes.push(
            "REVIEW: some members speak AJP and some do not; the cluster speaks AJP to all (`ajp:`)"
                .to_string(),
        );
    }
    let mut item = Item::default();
    item.note("the workers are ajp13: tether speaks AJP/1.3 to them (the servers' addresses are AJP ports)");
    let first = |directive: &str| {
        ajp.iter()
            .find_map(|(name, w, _)| w.and_then(|w| w.get(directive)).map(|p| (*name, p)))
    };
    if let Some((name, p)) = first("max_packet_size") {
        let size = p.value.trim().parse::<i64>().unwrap_or(8192);
        let (lo, hi) = (8192, 65536);
        let bounded = size.clamp(lo, hi);
        let mut note = said(name, p);
        if bounded != size {
            note = format!("{note}: tether's packet_size is {lo}-{hi}, so {bounded}");
        }
        item.set("packet_size", Value::Num(bounded), Some(note));
    }
    if let Some((name, _)) = first("secret") {
        item.note(format!(
            "REVIEW: worker.{name}.secret is set: write it to a file tether can read (mode 0640) \
             and set `secret_file:` to it; until then Tomcat refuses every request (403). \
             The secret is not copied here"
        ));
    }
    Some(item)
}
