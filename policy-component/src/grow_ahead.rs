//! The guest's allocator: std's own (dlmalloc), growing the linear memory
//! ahead of need.
//!
//! dlmalloc asks the host for what one allocation needs, a few pages at a
//! time, so a large load grows the memory thousands of times. Each
//! `memory.grow` hands V8 a new `ArrayBuffer` over the whole memory, and past
//! a size V8 answers every one with a full garbage collection: 861 of them
//! during two 10 000-tool loads in Node, which took 2.9 s against wasmtime's
//! 1.2 s (#17). Here, whenever an allocation has grown the memory, a block of
//! a quarter of the memory (at most [`MAX_STEP`]) is allocated and freed at
//! once: it joins the allocator's free top, and the allocations that follow
//! are carved from it. Growth becomes geometric, a few dozen steps for any
//! load, for at most a quarter more memory than the guest uses.
//!
//! A step the host refuses (a memory cap) is no error: the allocation that
//! needed memory already has it, and later ones grow as before.
//!
//! While a rule set loads ([`zeroing_freed`]), freed blocks are zeroed first.
//! A load leaves behind far more than it keeps (the parsed catalog, texts
//! written to be hashed, buffers outgrown), and dlmalloc leaves freed bytes
//! as they were: a prepared engine's snapshot of the memory carried all of it
//! (16 KB per tool), and every instance of it copies the snapshot again
//! (#17). Zero pages are not part of a snapshot. Outside a load nothing is
//! zeroed, so decisions pay nothing for it.
//!
//! Small blocks (up to [`SMALL_MAX`] bytes, alignment up to [`SIZE_STEP`])
//! are taken from dlmalloc rounded up to the chunk sizes it uses anyway, and,
//! outside a load, kept once freed on a list per size and handed out again
//! from it: a decision allocates and frees a few dozen blocks of the same
//! few sizes (the call's keys and strings, map nodes), and dlmalloc's
//! search, split and merge for each was a tenth of a decision in the
//! component (#17). The lists only hold memory a decision has used before.

use std::alloc::{GlobalAlloc, Layout, System};
use std::arch::wasm32::memory_size;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::pack;

const PAGE_BYTES: usize = 65_536;
/// The largest step, so a guest near a host's memory cap overshoots it by at
/// most this much.
const MAX_STEP: usize = 64 << 20;

struct GrowAhead;

/// Set while [`zeroing_freed`] runs (the component is single-threaded).
static ZERO_FREED: AtomicBool = AtomicBool::new(false);

/// Runs `f` with every block freed meanwhile zeroed first.
pub fn zeroing_freed<T>(f: impl FnOnce() -> T) -> T {
    let outer = ZERO_FREED.swap(true, Ordering::Relaxed);
    let out = f();
    ZERO_FREED.store(outer, Ordering::Relaxed);
    out
}

fn zeroing() -> bool {
    ZERO_FREED.load(Ordering::Relaxed)
}

#[global_allocator]
static ALLOCATOR: GrowAhead = GrowAhead;

/// The largest block kept on a free list.
const SMALL_MAX: usize = 1024;
/// dlmalloc's step between chunk sizes, and the largest alignment a small
/// block is taken with.
const SIZE_STEP: usize = 8;
/// The word dlmalloc keeps before each chunk on wasm32: a chunk of
/// `8 n` bytes holds a request of up to `8 n - 4`, so the size classes are
/// `8 n + 4` bytes and rounding a request up to its class wastes nothing.
const CHUNK_OVERHEAD: usize = 4;
const SIZE_CLASSES: usize = (SMALL_MAX + CHUNK_OVERHEAD - 1) / SIZE_STEP + 1;
// The smallest class holds the list's link.
const _: () = assert!(CHUNK_OVERHEAD >= std::mem::size_of::<usize>());

/// The first free block of each size class (0: none); each free block's
/// first word holds the next one's address.
static FREE_LISTS: [AtomicUsize; SIZE_CLASSES] = [const { AtomicUsize::new(0) }; SIZE_CLASSES];
/// Bytes waiting on the lists, and their bound: a decision needs a few
/// kilobytes of them; past the bound a freed block goes back to dlmalloc,
/// so calls that free a great many blocks of one size after another cannot
/// hold memory on list after list that no other size may use.
static LISTED_BYTES: AtomicUsize = AtomicUsize::new(0);
const MAX_LISTED_BYTES: usize = 1 << 20;

/// A small block's size class: every block of a class is taken from
/// dlmalloc with the class's size, so any block of it fits any request of it.
fn size_class(layout: Layout) -> Option<usize> {
    if layout.size() > SMALL_MAX || layout.align() > SIZE_STEP {
        return None;
    }
    Some((layout.size() + CHUNK_OVERHEAD - 1) / SIZE_STEP)
}

fn class_bytes(class: usize) -> usize {
    class * SIZE_STEP + CHUNK_OVERHEAD
}

fn class_layout(class: usize) -> Option<Layout> {
    Layout::from_size_align(class_bytes(class), SIZE_STEP).ok()
}

/// The layout a block of `layout` is taken from `System` with: its class's
/// for a small one (any block of a class fits any request of it).
fn taken_with(class: Option<usize>, layout: Layout) -> Layout {
    class.and_then(class_layout).unwrap_or(layout)
}

/// A listed block for `layout` (`Ok`), or the layout to take one from
/// `System` with (`Err`).
fn listed_or_taken(layout: Layout) -> Result<*mut u8, Layout> {
    let class = size_class(layout);
    if let Some(class) = class
        && keeping_free_blocks()
        && let Some(block) = pop_free(class)
    {
        return Ok(block);
    }
    Err(taken_with(class, layout))
}

/// Whether freed small blocks are kept: not while a load zeroes what it
/// frees, and not while a load is packed (its blocks are counted in order).
/// Kept during a load, they were measured: 6 % off a seed load, and a
/// prepared snapshot touched 509 pages instead of ~300 (each listed block
/// holds a link, and one given back late is a hole among kept blocks).
fn keeping_free_blocks() -> bool {
    !zeroing() && !pack::active() && !pack::is_bookkeeping()
}

fn pop_free(class: usize) -> Option<*mut u8> {
    let head = FREE_LISTS.get(class)?;
    let block = head.load(Ordering::Relaxed) as *mut u8;
    if block.is_null() {
        return None;
    }
    // SAFETY: a listed block is a free small block of this class (room for
    // a word, aligned to `SIZE_STEP`) whose first word `push_free` wrote.
    let next = unsafe { block.cast::<usize>().read() };
    head.store(next, Ordering::Relaxed);
    LISTED_BYTES.fetch_sub(class_bytes(class), Ordering::Relaxed);
    Some(block)
}

/// Lists `block`, a freed block of `class` that nothing else refers to,
/// unless the lists are full.
fn push_free(class: usize, block: *mut u8) -> bool {
    let Some(head) = FREE_LISTS.get(class) else {
        return false;
    };
    let listed = LISTED_BYTES.load(Ordering::Relaxed) + class_bytes(class);
    if listed > MAX_LISTED_BYTES {
        return false;
    }
    LISTED_BYTES.store(listed, Ordering::Relaxed);
    // SAFETY: the block is free, of its class's size (at least a word) and
    // aligned to `SIZE_STEP`.
    unsafe { block.cast::<usize>().write(head.load(Ordering::Relaxed)) };
    head.store(block as usize, Ordering::Relaxed);
    true
}

/// Gives every listed block back to dlmalloc, zeroed (before a snapshot).
fn return_free_blocks() {
    for class in 0..SIZE_CLASSES {
        let Some(layout) = class_layout(class) else {
            continue;
        };
        while let Some(block) = pop_free(class) {
            // SAFETY: a listed block was taken from `System` with its
            // class's layout and is referred to by nothing else.
            unsafe {
                block.write_bytes(0, layout.size());
                System.dealloc(block, layout);
            }
        }
    }
}

fn pages() -> usize {
    memory_size::<0>()
}

/// After an allocation that grew the memory: one step ahead.
fn step_ahead() {
    let bytes = (pages().saturating_mul(PAGE_BYTES) / 4).min(MAX_STEP);
    let Ok(layout) = Layout::from_size_align(bytes, 1) else {
        return;
    };
    // SAFETY: `layout` has a non-zero size (the memory is never empty), and
    // the block is freed with the layout it was allocated with.
    unsafe {
        let block = System.alloc(layout);
        if !block.is_null() {
            System.dealloc(block, layout);
        }
    }
}

/// Runs one allocation and, if it grew the memory, steps ahead.
fn stepping_ahead(allocate: impl FnOnce() -> *mut u8) -> *mut u8 {
    let before = pages();
    let ptr = allocate();
    if pages() != before {
        step_ahead();
    }
    ptr
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees are this allocator's; `step_ahead` only
// allocates and frees a block of its own.
//
// While a load is packed (`crate::pack`), a block may instead come from the
// pack's arena, which `System` never saw: such a block is never handed to
// `System` (`pack::in_arena`), and is moved out of the arena to be resized.
//
// A small block (`size_class`) is taken from `System` with its class's
// layout, whatever the request's size within the class, and given back with
// it; a freed one may wait on its class's free list instead, and is handed
// out from there for a request of the same class.
unsafe impl GlobalAlloc for GrowAhead {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Some(placed) = pack::place(layout) {
            return placed;
        }
        let taken = match listed_or_taken(layout) {
            Ok(block) => return block,
            Err(taken) => taken,
        };
        // SAFETY: forwarded with the class's layout, no smaller than the
        // caller's and as aligned; the caller upholds `alloc`'s contract.
        let ptr = stepping_ahead(|| unsafe { System.alloc(taken) });
        pack::allocated(ptr, layout);
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if let Some(placed) = pack::place(layout) {
            return placed;
        }
        let taken = match listed_or_taken(layout) {
            Ok(block) => {
                // SAFETY: a free block of the class, at least
                // `layout.size()` bytes, now the caller's.
                unsafe { block.write_bytes(0, layout.size()) };
                return block;
            }
            Err(taken) => taken,
        };
        // SAFETY: as in `alloc`.
        let ptr = stepping_ahead(|| unsafe { System.alloc_zeroed(taken) });
        pack::allocated(ptr, layout);
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if pack::in_arena(ptr) {
            // SAFETY: the caller gives up this block of `layout.size()` bytes.
            unsafe { pack::forget(ptr, layout.size()) };
            return;
        }
        pack::freed(ptr);
        let class = size_class(layout);
        if let Some(class) = class
            && keeping_free_blocks()
            && push_free(class, ptr)
        {
            return;
        }
        let given = taken_with(class, layout);
        // SAFETY: forwarded with the layout the block was taken from `System`
        // with (its class's, for a small one); its `given.size()` bytes are the
        // caller's to give up, so writing them before handing them back is
        // sound.
        unsafe {
            if zeroing() || pack::is_bookkeeping() {
                ptr.write_bytes(0, given.size());
            }
            System.dealloc(ptr, given)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if keeping_free_blocks() && !pack::in_arena(ptr) {
            let grown = Layout::from_size_align(new_size, layout.align()).ok();
            match (size_class(layout), grown.and_then(size_class)) {
                // The block already has room.
                (Some(old), Some(new)) if old == new => return ptr,
                // SAFETY: forwarded; `ptr` came from `System` with `layout`
                // (a block larger than a small one has its own layout).
                (None, None) => return stepping_ahead(|| unsafe { System.realloc(ptr, layout, new_size) }),
                // Into another class, or between small and large: below.
                _ => {}
            }
        }
        // Zeroing: a block `System.realloc` moves would be freed unzeroed
        // inside it, so move it here (what `GlobalAlloc::realloc` does by
        // default) and free the old block through `dealloc`. Packing: the
        // pack sees the move as the load's own free and allocation. A block
        // in the arena: `System` does not know it.
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `new_layout` has the caller's non-zero size and alignment;
        // the old block is valid for `layout.size()` bytes, the new one for
        // `new_size`, they do not overlap, and the old one is freed once,
        // with its own layout.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

/// Zeroes what the allocator keeps in its free memory: the headers and
/// links it wrote into blocks as they were freed and merged. A load's
/// freed blocks are zeroed (`zeroing_freed`), but those few bytes per block
/// are written after, and once a packed load (`crate::pack`) has churned
/// through the heap they lie on nearly every page of it, which a snapshot
/// then carries (#17).
///
/// Only the allocator's public interface is used: the free memory is
/// allocated, largest blocks first, zeroed and freed again, so what remains
/// written is the headers of those few blocks. A block that needed the
/// memory to grow is given back at once (the memory may end up that much
/// larger, all of it zero).
pub fn scrub_free_memory() {
    return_free_blocks();
    // Larger free blocks are taken in pieces of this size: a header left
    // every MiB costs nothing. A level that has to grow the memory grows
    // it by at most its size, so the memory grows by at most twice this.
    const LARGEST: usize = 1 << 20;
    const SMALLEST: usize = 64;
    // Held blocks form a list through their first two words: next, size.
    let mut held: *mut u8 = std::ptr::null_mut();
    let mut size = LARGEST;
    while size >= SMALLEST {
        let Ok(layout) = Layout::from_size_align(size, 8) else {
            break;
        };
        let before = pages();
        // SAFETY: a non-zero size; every block is freed below with its layout.
        let block = unsafe { System.alloc(layout) };
        if block.is_null() || pages() != before {
            if !block.is_null() {
                // SAFETY: allocated just above with `layout`.
                unsafe { System.dealloc(block, layout) };
            }
            // Below a page, the memory grows by a whole page, which the
            // smaller levels would only cut into more pieces (more headers):
            // what is left free is smaller than this level.
            if size < PAGE_BYTES && pages() != before {
                break;
            }
            size /= 2;
            continue;
        }
        // SAFETY: the block is ours for `size` (at least 64) bytes, aligned
        // to 8: room for the two words of the list.
        unsafe {
            block.write_bytes(0, size);
            block.cast::<*mut u8>().write(held);
            block.add(std::mem::size_of::<usize>()).cast::<usize>().write(size);
        }
        held = block;
    }
    while !held.is_null() {
        // SAFETY: each held block starts with the list's two words, written
        // above; it is zeroed again and freed with the layout it was
        // allocated with.
        unsafe {
            let next = held.cast::<*mut u8>().read();
            let size = held.add(std::mem::size_of::<usize>()).cast::<usize>().read();
            held.write_bytes(0, 2 * std::mem::size_of::<usize>());
            if let Ok(layout) = Layout::from_size_align(size, 8) {
                System.dealloc(held, layout);
            }
            held = next;
        }
    }
}
