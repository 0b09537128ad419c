//! The LRU of open sealed segments. Mapping a sealed segment costs a file
//! handle and address space, so at most `max_open_segments` segments and
//! `max_mapped_bytes` bytes are mapped at once; the least recently used are
//! closed first. A reader still holding an evicted segment's `Bytes` keeps
//! that mapping alive until it drops them (the limit bounds the cache, not
//! in-flight reads).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{LogError, Result};
use crate::segment::{Segment, Source};

/// Shared by every partition of a log.
#[derive(Debug)]
pub struct SegmentCache {
    max_open: usize,
    max_mapped_bytes: u64,
    tick: AtomicU64,
    open: Mutex<OpenSet>,
}

#[derive(Debug, Default)]
struct OpenSet {
    segments: Vec<Arc<Segment>>,
    mapped_bytes: u64,
}

impl SegmentCache {
    /// A cache with the given limits.
    pub fn new(max_open: usize, max_mapped_bytes: u64) -> Self {
        SegmentCache {
            max_open,
            max_mapped_bytes,
            tick: AtomicU64::new(0),
            open: Mutex::new(OpenSet::default()),
        }
    }

    /// The read source of `segment`, opening (and caching) a sealed one.
    pub fn source(&self, segment: &Arc<Segment>) -> Result<Source> {
        segment
            .last_used
            .store(self.tick.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        if let Some(source) = segment.source() {
            return Ok(source);
        }
        let size = segment.readable_bytes();
        if size > self.max_mapped_bytes {
            return Err(LogError::LimitExceeded(format!(
                "segment {} is {size} bytes, more than max_mapped_bytes ({})",
                segment.paths.log.display(),
                self.max_mapped_bytes
            )));
        }
        let files = segment.open_sealed()?;
        let mut open = self.open.lock().expect("cache");
        if open.segments.iter().any(|s| Arc::ptr_eq(s, segment)) {
            // Another reader opened it concurrently; it is counted once.
            return Ok(Source::Sealed(files));
        }
        open.mapped_bytes += files.log.len() as u64;
        open.segments.push(segment.clone());
        while open.segments.len() > self.max_open || open.mapped_bytes > self.max_mapped_bytes {
            let oldest = open
                .segments
                .iter()
                .enumerate()
                .filter(|(_, s)| !Arc::ptr_eq(s, segment))
                .min_by_key(|(_, s)| s.last_used.load(Ordering::Relaxed))
                .map(|(i, _)| i);
            let Some(i) = oldest else { break };
            let evicted = open.segments.swap_remove(i);
            open.mapped_bytes -= evicted.close_files();
        }
        Ok(Source::Sealed(files))
    }

    /// Forgets a segment (deleted or its partition closed).
    pub fn remove(&self, segment: &Arc<Segment>) {
        let mut open = self.open.lock().expect("cache");
        if let Some(i) = open.segments.iter().position(|s| Arc::ptr_eq(s, segment)) {
            let removed = open.segments.swap_remove(i);
            open.mapped_bytes -= removed.close_files();
        }
    }

    /// Number of segments currently open.
    pub fn open_segments(&self) -> usize {
        self.open.lock().expect("cache").segments.len()
    }
}
