//! Waiting on the log's async calls from a version's own thread: one
//! current-thread runtime per thread (versions run on threads of their
//! own), made at first use.

use std::future::Future;

use crate::error::{ProcessorError, Result};

thread_local! {
    static IO: Option<tokio::runtime::Runtime> = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok();
}

/// Runs `future` to its end on this thread's runtime.
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output> {
    IO.with(|io| match io {
        Some(io) => Ok(io.block_on(future)),
        None => Err(ProcessorError::Stopped(
            "cannot start the processor's I/O runtime".into(),
        )),
    })
}
