//! The system allocator, remembering the largest single allocation (or
//! growth) each thread asked for since it last looked. Install it in a test
//! binary with `#[global_allocator]`; a decoder that reserves what a peer
//! claims shows up here even when the kernel lets the reservation succeed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The recording allocator.
pub struct LargestAllocation;

fn note(size: usize) {
    // `try_with`: nothing to note while the thread is being torn down.
    let _ = LARGEST.try_with(|largest| {
        if size > largest.get() {
            largest.set(size);
        }
    });
}

unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns the largest allocation it made on this thread.
pub fn largest_during(f: impl FnOnce()) -> usize {
    LARGEST.with(|largest| largest.set(0));
    f();
    LARGEST.with(|largest| largest.get())
}

/// What decoding a frame of `len` bytes may allocate at once: the
/// decoders' fixed reservations, plus a bounded multiple of the frame.
pub fn bound_for(len: usize) -> usize {
    (1 << 20) + 512 * len
}
