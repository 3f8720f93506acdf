//! A counting global allocator for the tests that prove "no allocation": it wraps the
//! system allocator and counts the allocations of the current thread only, so the test
//! harness's other threads (and a test's own client and server threads) cannot disturb a
//! measurement. It also keeps the bytes the current thread allocated and freed, for what
//! a thread's work holds on to. Each test binary declares it: `#[global_allocator] static GLOBAL:
//! counting::Counting = counting::Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

pub struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn bump() {
    // `try_with`: a thread being torn down may still allocate; don't count it, don't panic.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

fn add(bytes: i64) {
    let _ = LIVE.try_with(|n| n.set(n.get() + bytes));
}

/// Bytes this thread allocated less those it freed so far (a block freed by another
/// thread stays counted here).
#[allow(dead_code)] // each test binary includes this file; not all of them read the bytes
pub fn live() -> i64 {
    LIVE.with(Cell::get)
}

/// Allocations this thread made so far.
pub fn so_far() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        add(layout.size() as i64);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        add(layout.size() as i64);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        add(new_size as i64 - layout.size() as i64);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-(layout.size() as i64));
        System.dealloc(ptr, layout)
    }
}
