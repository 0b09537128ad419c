//! What the codec's tests share: an allocator that remembers the largest
//! allocation each thread made, and well-formed requests to start from.

pub mod largest_allocation;
pub mod samples;
