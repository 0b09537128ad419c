//! Kafka request decoding (every API and version served, and Produce's
//! record batches) on arbitrary bytes; the body lives in
//! `kappa_kafka_codec::fuzzing::kafka_request`. The allocator aborts on any
//! single allocation over 64 MiB, far above what decoding an input of the
//! fuzzer's size may reserve, so a decoder trusting a claimed count is a
//! crash even where the kernel would have let the reservation succeed.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};

struct Bounded;

const ALLOCATION_MAX: usize = 64 << 20;

unsafe impl GlobalAlloc for Bounded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_MAX {
            std::process::abort();
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > ALLOCATION_MAX {
            std::process::abort();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Bounded = Bounded;

/// `KAPPA_FUZZ_API=Fetch` (an API's name as `ApiKey` spells it) pins the
/// target to that API: the input's first byte is replaced by its index, so
/// a run spends all its time on one API.
fn pinned_api() -> Option<u8> {
    static PINNED: std::sync::OnceLock<Option<u8>> = std::sync::OnceLock::new();
    *PINNED.get_or_init(|| {
        let name = std::env::var("KAPPA_FUZZ_API").ok()?;
        let at = kappa_kafka_codec::versions::SUPPORTED
            .iter()
            .position(|(api, _, _)| format!("{api:?}") == name)
            .unwrap_or_else(|| panic!("KAPPA_FUZZ_API={name} is not an API served"));
        Some(at as u8)
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    match (pinned_api(), data.split_first()) {
        (Some(api), Some((_, rest))) => {
            let mut pinned = Vec::with_capacity(data.len());
            pinned.push(api);
            pinned.extend_from_slice(rest);
            kappa_kafka_codec::fuzzing::kafka_request(&pinned);
        }
        _ => kappa_kafka_codec::fuzzing::kafka_request(data),
    }
});
