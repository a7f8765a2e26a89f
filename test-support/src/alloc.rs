//! A counting global allocator for test binaries: bytes live, peak and allocation count per
//! thread (so parallel tests do not disturb each other), and, on request, a registry of live
//! blocks whose contents a test can scan (secrets left in freed or cleared buffers).
//!
//! A test binary installs it with `#[global_allocator] static A: Counting = Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::contains;

pub struct Counting;

thread_local! {
    static CUR: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}

/// Live blocks allocated by the tracking thread: (address, size) pairs, 0 = free slot.
const SLOTS: usize = 1 << 16;
static BLOCKS: [AtomicUsize; 2 * SLOTS] = [const { AtomicUsize::new(0) }; 2 * SLOTS];
static BLOCKS_LOCK: AtomicBool = AtomicBool::new(false);
static BLOCKS_OVERFLOW: AtomicBool = AtomicBool::new(false);

fn with_blocks(f: impl FnOnce()) {
    while BLOCKS_LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    f();
    BLOCKS_LOCK.store(false, Ordering::Release);
}

fn track_add(p: usize, size: usize) {
    with_blocks(|| {
        for i in 0..SLOTS {
            if BLOCKS[2 * i].load(Ordering::Relaxed) == 0 {
                BLOCKS[2 * i].store(p, Ordering::Relaxed);
                BLOCKS[2 * i + 1].store(size, Ordering::Relaxed);
                return;
            }
        }
        BLOCKS_OVERFLOW.store(true, Ordering::Relaxed);
    });
}

fn track_remove(p: usize) {
    with_blocks(|| {
        for i in 0..SLOTS {
            if BLOCKS[2 * i].load(Ordering::Relaxed) == p {
                BLOCKS[2 * i].store(0, Ordering::Relaxed);
                return;
            }
        }
    });
}

fn on_alloc(p: *mut u8, size: usize) {
    let _ = CUR.try_with(|c| {
        let v = c.get() + size as isize;
        c.set(v);
        let _ = PEAK.try_with(|pk| pk.set(pk.get().max(v)));
    });
    let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    if TRACKED.try_with(|t| t.get()).unwrap_or(false) {
        track_add(p as usize, size);
    }
}

fn on_dealloc(p: *mut u8, size: usize) {
    let _ = CUR.try_with(|c| c.set(c.get() - size as isize));
    if TRACKED.try_with(|t| t.get()).unwrap_or(false) {
        track_remove(p as usize);
    }
}

// SAFETY: delegates to the system allocator; the bookkeeping never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            on_alloc(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            on_alloc(p, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        on_dealloc(p, layout.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(p, layout) }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            on_dealloc(p, layout.size());
            on_alloc(q, new_size);
        }
        q
    }
}

/// Bytes this thread has allocated and not freed.
pub fn live_bytes() -> isize {
    CUR.with(|c| c.get())
}

/// Allocations this thread has made.
pub fn allocations() -> u64 {
    ALLOCS.with(|a| a.get())
}

/// Runs `f` and reports the peak of this thread's live heap above its level at the start, and
/// the number of allocations `f` made.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize, u64) {
    let start = live_bytes();
    PEAK.with(|p| p.set(start));
    let a0 = allocations();
    let r = f();
    let peak = PEAK.with(|p| p.get()) - start;
    (r, peak.max(0) as usize, allocations() - a0)
}

/// Records every block this thread allocates from now on (one thread at a time per binary).
pub fn start_tracking() {
    with_blocks(|| {
        for b in BLOCKS.iter() {
            b.store(0, Ordering::Relaxed);
        }
    });
    BLOCKS_OVERFLOW.store(false, Ordering::Relaxed);
    TRACKED.with(|t| t.set(true));
}

pub fn stop_tracking() {
    TRACKED.with(|t| t.set(false));
}

/// Whether any live block allocated since `start_tracking` contains `needle` anywhere in its
/// whole allocated size (stale bytes of cleared buffers included). Returns the number of blocks
/// scanned, or the size of the block that holds it.
pub fn heap_contains(needle: &[u8]) -> Result<usize, usize> {
    assert!(
        !BLOCKS_OVERFLOW.load(Ordering::Relaxed),
        "more live blocks than the registry holds"
    );
    let mut blocks = Vec::new();
    let was = TRACKED.with(|t| t.replace(false));
    with_blocks(|| {
        for i in 0..SLOTS {
            let p = BLOCKS[2 * i].load(Ordering::Relaxed);
            if p != 0 {
                blocks.push((p, BLOCKS[2 * i + 1].load(Ordering::Relaxed)));
            }
        }
    });
    let mut copy = Vec::new();
    for &(p, size) in &blocks {
        if size < needle.len() {
            continue;
        }
        copy.clear();
        // SAFETY: a live block of `size` bytes this thread allocated; volatile byte reads (it may
        // hold bytes never written, or stale bytes of a cleared buffer — exactly what we look for).
        copy.extend((0..size).map(|k| unsafe { std::ptr::read_volatile((p + k) as *const u8) }));
        if contains(&copy, needle) {
            TRACKED.with(|t| t.set(was));
            return Err(size);
        }
    }
    TRACKED.with(|t| t.set(was));
    Ok(blocks.len())
}
