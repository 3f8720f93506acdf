//! Tests of the live-session table: liveness until the timeout, counts per server under churn, scans, eviction past capacity.

use super::*;

#[test]
fn sessions_are_live_until_their_timeout_and_counted_per_server() {
    let t = LiveSessions::new(1000, 3, 60);
    let now = t.now();
    let (a, b, c) = (t.key(b"A"), t.key(b"B"), t.key(b"C"));
    assert_eq!(t.touch(a, 0, now), Touch::New);
    assert_eq!(t.touch(a, 0, now + 5), Touch::Seen);
    assert_eq!(t.touch(b, 0, now), Touch::New);
    assert_eq!(t.touch(c, 1, now), Touch::New);
    assert_eq!(t.touch(b, 2, now + 10), Touch::Moved { from: 0 });
    assert!(t.is_live_on(a, 0, now + 64));
    assert!(!t.is_live_on(a, 0, now + 65), "60 s after its last request");
    assert!(!t.is_live_on(b, 0, now + 10), "it moved");
    assert!(t.is_live_on(b, 2, now + 10));
    assert_eq!(t.created_total(0), 2);
    assert_eq!(
        t.touch(a, 0, now + 70),
        Touch::New,
        "expired, then seen again"
    );
    assert_eq!(t.created_total(0), 3);
    assert_eq!(t.touch(a, MAX_SERVERS, now), Touch::Untracked);
    // The running counts: a on 0 again, b moved to 2, c on 1 (expired at now + 70,
    // taken out by a scan).
    assert_eq!(
        (t.live_count(0), t.live_count(1), t.live_count(2)),
        (1, 1, 1)
    );
}

#[test]
fn the_running_count_is_the_scans_under_concurrent_churn() {
    let t = std::sync::Arc::new(LiveSessions::new(50_000, 4, 60));
    let now = t.now();
    let threads: Vec<_> = (0..4u64)
        .map(|th| {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let key = t.key(&(i % 7_000).to_le_bytes());
                    t.touch(key, ((i + th) % 4) as usize, now);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|h| h.join().unwrap());
    let scanned = t.scan();
    for (i, s) in scanned.iter().enumerate() {
        assert_eq!(t.live_count(i), s.live, "server {i}: {scanned:?}");
    }
    assert_eq!(scanned.iter().map(|s| s.live).sum::<u64>(), 7_000);
}

#[test]
fn a_scan_counts_what_is_live_and_when_each_server_empties() {
    let t = LiveSessions::new(10_000, 2, 100);
    let now = t.now();
    for i in 0..1000u32 {
        t.touch(t.key(&i.to_le_bytes()), (i % 2) as usize, now);
    }
    let s = t.scan();
    assert_eq!((s[0].live, s[1].live), (500, 500));
    assert!((99..=100).contains(&s[0].empty_in_s), "{s:?}");
    assert_eq!(t.evicted_total(), 0);
}

#[test]
fn past_capacity_the_stalest_is_evicted_and_knowledge_is_incomplete() {
    let t = LiveSessions::new(16, 1, 3600);
    let now = t.now();
    for i in 0..1000u32 {
        t.touch(t.key(&i.to_le_bytes()), 0, now);
    }
    assert!(t.evicted_total() > 0);
    assert!(!t.knows_all(now));
    let live = t.scan()[0].live;
    assert!(live <= t.slots.len() as u64 && live > 16, "{live}");
}
