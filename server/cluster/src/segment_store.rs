//! [`ObjectSegmentStore`]: the log's tiered storage
//! ([`kappa_log::SegmentStore`]) in object storage — S3 or a local
//! directory, through the `object_store` crate, under a URL's prefix.
//!
//! The log calls the store from any thread, async tasks' included, and
//! waits for the answer: each call runs on the store's own runtime (two
//! worker threads) and the caller blocks on a channel, never on a nested
//! runtime.

use std::path::Path as FsPath;
use std::sync::mpsc;

use object_store::path::Path;
use object_store::ObjectStore;

use crate::checkpoint::{open_store, upload_file};

/// Bytes of one ranged read of a download.
const DOWNLOAD_RANGE: u64 = 8 << 20;

/// Tiered segments in object storage.
pub struct ObjectSegmentStore {
    url: String,
    store: std::sync::Arc<dyn ObjectStore>,
    prefix: Path,
    /// Taken by `drop` (shut down without waiting: it may be dropped
    /// inside another runtime).
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for ObjectSegmentStore {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for ObjectSegmentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectSegmentStore")
            .field("url", &self.url)
            .finish()
    }
}

impl ObjectSegmentStore {
    /// Opens `s3://bucket/prefix` (credentials, region and endpoint from
    /// the `AWS_*` environment variables, `AWS_ENDPOINT_URL` and
    /// `AWS_ALLOW_HTTP=true` included) or `file:///abs/dir`.
    pub fn open(url: &str) -> Result<ObjectSegmentStore, String> {
        // A read waits for a download: a store that is down must fail it
        // within seconds, not after the client's minutes of retries.
        let retry = object_store::RetryConfig {
            max_retries: 2,
            retry_timeout: std::time::Duration::from_secs(10),
            ..Default::default()
        };
        let (store, prefix) = open_store(url, &[], "tiered storage", Some(retry))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kappa-tiered")
            .enable_all()
            .build()
            .map_err(|e| format!("tiered storage {url:?}: starting its runtime: {e}"))?;
        Ok(ObjectSegmentStore {
            url: url.to_string(),
            store: store.into(),
            prefix,
            runtime: Some(runtime),
        })
    }

    /// The object path of `key` under the prefix.
    fn location(&self, key: &str) -> Path {
        key.split('/')
            .fold(self.prefix.clone(), |path, part| path.child(part))
    }

    /// Runs `call` on the store's runtime and waits for it.
    fn run<T: Send + 'static>(
        &self,
        call: impl std::future::Future<Output = Result<T, String>> + Send + 'static,
    ) -> Result<T, String> {
        let (tx, rx) = mpsc::channel();
        let runtime = self.runtime.as_ref().expect("the runtime lives until drop");
        runtime.spawn(async move {
            let _ = tx.send(call.await);
        });
        rx.recv()
            .map_err(|_| format!("tiered storage {}: the call was dropped", self.url))?
    }
}

impl kappa_log::SegmentStore for ObjectSegmentStore {
    fn put(&self, key: &str, from: &FsPath) -> Result<(), String> {
        let (store, location, from) = (self.store.clone(), self.location(key), from.to_owned());
        self.run(async move { upload_file(&*store, &location, &from).await.map(|_| ()) })
    }

    fn get(&self, key: &str, to: &FsPath) -> Result<(), String> {
        let (store, location, to) = (self.store.clone(), self.location(key), to.to_owned());
        self.run(async move {
            // In ranges of DOWNLOAD_RANGE bytes: one request each (S3's
            // ranged GET), at most one range in memory. Not synced: a
            // download is a cache, deleted at every start.
            let write_error = |e: std::io::Error| format!("writing {}: {e}", to.display());
            let size = store
                .head(&location)
                .await
                .map_err(|e| format!("reading {location}: {e}"))?
                .size;
            let mut out = std::fs::File::create(&to).map_err(write_error)?;
            let mut at = 0;
            while at < size {
                let end = (at + DOWNLOAD_RANGE).min(size);
                let bytes = store
                    .get_range(&location, at..end)
                    .await
                    .map_err(|e| format!("reading {location} bytes {at}..{end}: {e}"))?;
                std::io::Write::write_all(&mut out, &bytes).map_err(write_error)?;
                at = end;
            }
            Ok(())
        })
    }

    fn delete(&self, key: &str) -> Result<(), String> {
        let (store, location) = (self.store.clone(), self.location(key));
        self.run(async move {
            match store.delete(&location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(format!("deleting {location}: {e}")),
            }
        })
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}
