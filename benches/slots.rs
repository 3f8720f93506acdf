//! What `max_inflight` costs a request: taking and handing back a slot of a server with
//! room (one atomic operation each way), the same on a server without a bound, and a slot
//! handed over to a request waiting in the queue.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::time::Duration;
use tether::routing::Slots;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("slots");
    let bounded = Slots::new(200);
    g.bench_function("take_and_give_back_with_room", |b| {
        b.iter(|| drop(black_box(bounded.try_take())))
    });
    let unbounded = Slots::new(0);
    g.bench_function("take_and_give_back_unbounded", |b| {
        b.iter(|| drop(black_box(unbounded.try_take())))
    });
    // A waiter parked on the server's only slot, woken by its hand-back.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let one = Slots::new(1);
    g.bench_function("hand_over_to_a_waiter", |b| {
        b.iter(|| {
            rt.block_on(async {
                let held = one.try_take().expect("free");
                let waiter = {
                    let one = one.clone();
                    tokio::spawn(async move { one.take(10, Duration::from_secs(5)).await })
                };
                tokio::task::yield_now().await;
                drop(held);
                black_box(waiter.await.unwrap().is_ok())
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
