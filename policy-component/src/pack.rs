//! Packing a rule set into pages of its own, for a prepared snapshot (#17).
//!
//! A load allocates far more than it keeps, and what it keeps ends up
//! scattered between what it freed: at 1 000 tools the 4.1 MB a prepared
//! snapshot carries are spread over 17 MB of memory (4 351 pages of 4 KiB
//! touched). Every instance of a prepared module copies those pages in, and
//! V8's instantiation costs by the page touched, not by the byte: the same
//! bytes moved onto half the pages instantiated in two thirds of the time
//! (docs/performance.md).
//!
//! A load is a pure function of its two texts, so it allocates the same
//! blocks each time it runs on the same texts, in the same order. [`packing`]
//! runs it twice:
//!
//! 1. *Recording*: every block the load allocates is numbered in order, and
//!    the numbers of the blocks still allocated when it returns (the rules)
//!    are kept. Those rules are then dropped.
//! 2. *Replaying*: one block as large as those blocks need is taken from the
//!    allocator (the arena), and the load runs again; a block whose number was kept is cut
//!    from the arena, one after the other, every other block comes from the
//!    allocator as ever. Measured at 1 000 tools: all 67 919 kept blocks
//!    placed, 3.9 MB.
//!
//! The arena is never handed back: a block freed inside it is zeroed and
//! left (a prepared instance keeps its rules for its life). Should the
//! second run allocate differently from the first, blocks land in the wrong
//! place, which costs pages, never correctness: the arena only decides
//! where a block lives. At most one arena per instance.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

/// The arena's own alignment; a block that needs more is aligned inside it.
const ARENA_ALIGN: usize = 16;

const IDLE: u8 = 0;
const RECORDING: u8 = 1;
const REPLAYING: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(IDLE);
/// Set while this module's own maps allocate or free: those blocks are not
/// part of the load and go straight to the allocator.
static BOOKKEEPING: AtomicBool = AtomicBool::new(false);
/// The arena, `[ARENA_START, ARENA_END)`, cut from `ARENA_NEXT` on; all
/// zero when there is none.
static ARENA_START: AtomicUsize = AtomicUsize::new(0);
static ARENA_END: AtomicUsize = AtomicUsize::new(0);
static ARENA_NEXT: AtomicUsize = AtomicUsize::new(0);

/// The number the next block of the load gets.
static NEXT_BLOCK: AtomicUsize = AtomicUsize::new(0);
/// Recording: the load's blocks still allocated, by address: (number, size,
/// alignment).
static ALIVE: Mutex<BTreeMap<usize, (usize, usize, usize)>> = Mutex::new(BTreeMap::new());
/// Replaying: the numbers of the blocks that go to the arena, ascending, and
/// how many of them were placed.
static KEPT: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// `f` on what `slot` holds; nothing when it cannot be had (it never
/// happens: the component is single-threaded, and nothing `f` does reaches
/// this module again, see [`bookkeeping`]).
fn with<T, R: Default>(slot: &Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
    slot.lock().map(|mut value| f(&mut value)).unwrap_or_default()
}
static PLACED: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` as bookkeeping: what it allocates and frees is not the load's.
fn bookkeeping<T>(f: impl FnOnce() -> T) -> T {
    BOOKKEEPING.store(true, Ordering::Relaxed);
    let out = f();
    BOOKKEEPING.store(false, Ordering::Relaxed);
    out
}

#[inline(always)]
pub fn is_bookkeeping() -> bool {
    BOOKKEEPING.load(Ordering::Relaxed)
}

/// Recording or replaying: the allocator must see every block come and go
/// (no in-place `realloc`).
#[inline(always)]
pub fn active() -> bool {
    MODE.load(Ordering::Relaxed) != IDLE
}

/// Whether this instance can still pack a load (it has no arena yet).
pub fn available() -> bool {
    ARENA_END.load(Ordering::Relaxed) == 0
}

#[inline(always)]
pub fn in_arena(ptr: *mut u8) -> bool {
    let at = ptr as usize;
    at >= ARENA_START.load(Ordering::Relaxed) && at < ARENA_END.load(Ordering::Relaxed)
}

/// Before a block is allocated: while replaying, a kept block is cut from
/// the arena (`Some`); `None` lets the allocator serve it.
///
/// The hooks below are inlined down to their mode check, and the work is
/// out of line: outside a `toolgate prepare` they run on every allocation
/// of every decision and do nothing.
#[inline(always)]
pub fn place(layout: Layout) -> Option<*mut u8> {
    if MODE.load(Ordering::Relaxed) != REPLAYING {
        return None;
    }
    place_replaying(layout)
}

#[cold]
#[inline(never)]
fn place_replaying(layout: Layout) -> Option<*mut u8> {
    if is_bookkeeping() {
        return None;
    }
    let number = NEXT_BLOCK.fetch_add(1, Ordering::Relaxed);
    let placed = PLACED.load(Ordering::Relaxed);
    if !with(&KEPT, |kept| kept.get(placed) == Some(&number)) {
        return None;
    }
    PLACED.store(placed + 1, Ordering::Relaxed);
    let next = ARENA_NEXT.load(Ordering::Relaxed);
    let start = next.checked_add(layout.align() - 1)? & !(layout.align() - 1);
    let end = start.checked_add(layout.size())?;
    if end > ARENA_END.load(Ordering::Relaxed) {
        return None;
    }
    ARENA_NEXT.store(end, Ordering::Relaxed);
    // The arena was zeroed when it was taken (`reserve`) and no part of it
    // is handed out twice: zero, as `alloc_zeroed` promises.
    Some(start as *mut u8)
}

/// After the allocator served a block: while recording, number it.
#[inline(always)]
pub fn allocated(ptr: *mut u8, layout: Layout) {
    if MODE.load(Ordering::Relaxed) == RECORDING {
        allocated_recording(ptr, layout);
    }
}

#[cold]
#[inline(never)]
fn allocated_recording(ptr: *mut u8, layout: Layout) {
    if is_bookkeeping() || ptr.is_null() {
        return;
    }
    let number = NEXT_BLOCK.fetch_add(1, Ordering::Relaxed);
    bookkeeping(|| {
        with(&ALIVE, |alive| {
            alive.insert(ptr as usize, (number, layout.size(), layout.align()));
        })
    });
}

/// Before the allocator takes a block back: while recording, it is no
/// longer the load's.
#[inline(always)]
pub fn freed(ptr: *mut u8) {
    if MODE.load(Ordering::Relaxed) == RECORDING {
        freed_recording(ptr);
    }
}

#[cold]
#[inline(never)]
fn freed_recording(ptr: *mut u8) {
    if is_bookkeeping() {
        return;
    }
    bookkeeping(|| {
        with(&ALIVE, |alive| {
            alive.remove(&(ptr as usize));
        })
    });
}

/// Runs `load` twice as the module's documentation says and returns what
/// the second run returned. The first run's result is dropped in between;
/// when it is an error, it is returned at once.
///
/// The caller runs this inside [`crate::grow_ahead::zeroing_freed`], so
/// that nothing the runs free is left in memory.
pub fn packing<T, E>(load: impl Fn() -> Result<T, E>) -> Result<T, E> {
    NEXT_BLOCK.store(0, Ordering::Relaxed);
    MODE.store(RECORDING, Ordering::Relaxed);
    let first = load();
    MODE.store(IDLE, Ordering::Relaxed);
    let (kept, bytes) = bookkeeping(|| {
        let alive = with(&ALIVE, std::mem::take);
        let mut kept: Vec<usize> = alive.values().map(|&(number, _, _)| number).collect();
        kept.sort_unstable();
        let bytes = alive.values().fold(0usize, |sum, &(_, size, align)| {
            sum.saturating_add(size).saturating_add(align - 1)
        });
        drop(alive);
        (kept, bytes)
    });
    drop(first?);
    if let Some(start) = reserve(bytes) {
        ARENA_START.store(start, Ordering::Relaxed);
        ARENA_NEXT.store(start, Ordering::Relaxed);
        ARENA_END.store(start + bytes, Ordering::Relaxed);
    }
    bookkeeping(|| with(&KEPT, |slot| *slot = kept));
    NEXT_BLOCK.store(0, Ordering::Relaxed);
    PLACED.store(0, Ordering::Relaxed);
    MODE.store(REPLAYING, Ordering::Relaxed);
    let second = load();
    MODE.store(IDLE, Ordering::Relaxed);
    bookkeeping(|| with(&KEPT, |slot| *slot = Vec::new()));
    second
}

/// The arena: one block of `bytes` from the allocator, never freed. Taken
/// from the allocator rather than from new pages on top of the memory: the
/// load just dropped leaves most of the heap free, so the arena lands low,
/// next to the rest of what the snapshot holds, instead of above every page
/// the loads used (a snapshot spanning 41 MB instead of 37 at 1 000 tools).
fn reserve(bytes: usize) -> Option<usize> {
    let layout = Layout::from_size_align(bytes, ARENA_ALIGN).ok()?;
    if bytes == 0 {
        return None;
    }
    // Zeroed: a block the arena hands to `alloc_zeroed` must read zero, and
    // the heap the load just freed holds the allocator's own headers and
    // links (a lookup table the rules allocate zeroed found them there and
    // never reached an empty slot). Once per pack, only in `toolgate prepare`.
    // SAFETY: a non-zero size; the block is never freed, and nothing else
    // holds it: the arena hands its parts out.
    let block = unsafe { System.alloc_zeroed(layout) };
    (!block.is_null()).then_some(block as usize)
}

/// Zeroes a block freed inside the arena, which keeps it.
///
/// # Safety
///
/// `ptr` is a block of `size` bytes this allocator handed out.
pub unsafe fn forget(ptr: *mut u8, size: usize) {
    // SAFETY: the caller's block, no longer in use.
    unsafe { ptr.write_bytes(0, size) };
}
