//! The token store: named tokens with their grants, kept hashed in the data
//! directory, shared by the server and the offline `kappa token` CLI.
//!
//! **On disk** — `<data_dir>/auth/tokens.json`:
//!
//! ```json
//! {"version": 1, "tokens": [
//!   {"name": "orders-writer", "sha256": "<64 hex>", "grants": ["produce:orders.*"],
//!    "created_at_ms": 1764633600000}
//! ]}
//! ```
//!
//! A token's secret is `kp_` + 64 hex digits (32 bytes from the OS's random
//! source); only its SHA-256 is stored (a secret of 256 random bits needs
//! no salt or slow hash: the digest cannot be reversed or guessed). The
//! file is replaced atomically (temporary file, fsync, rename, fsync of the
//! directory) under an exclusive `flock` on `auth/tokens.lock`, so a server
//! and an offline CLI never lose each other's changes.
//!
//! **In the server** the tokens live in memory; every authentication first
//! compares the file's identity (inode, size, mtime) with the one loaded
//! and reloads it when it changed, so a token created or revoked offline
//! takes effect on the next request. A file that cannot be parsed at
//! start is quarantined (renamed `tokens.json.damaged-<ms>`, named in the
//! log) and the server starts with no stored tokens — nobody gets in with a
//! token from a damaged file; a damaged file met later keeps the tokens
//! already loaded. A file of a newer format version refuses the start and
//! stays as it is.
//!
//! **Bootstrap**: `KAPPA_BOOTSTRAP_TOKEN` (at least 16 characters) is an
//! admin token named `bootstrap` while the variable is set; it is never
//! written to the file.
//!
//! Comparison is constant-time: the presented secret's digest is compared
//! with every stored digest ([`subtle`]), without an early exit.
//!
//! **Revocation ends what a token opened.** A [`Principal`] remembers the
//! credential it was authenticated with; [`TokenStore::is_current`] says
//! whether that credential still stands (not revoked, not replaced by a
//! token of the same name with another secret, grants unchanged). Every
//! time a loaded token goes away or changes — a revoke through this store,
//! or a change of the file seen by a reload — the generation of
//! [`TokenStore::revocations`] goes up, so long-lived work (change feeds,
//! long-polls, Kafka connections) waits on it instead of polling and
//! re-checks its principal when it moves ([`TokenStore::revoked`]).

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::watch;

use super::grants::Grant;

/// The file's format version.
const VERSION: u32 = 1;
/// The shortest bootstrap secret accepted.
pub const MIN_BOOTSTRAP_CHARS: usize = 16;
/// The bootstrap token's name.
pub const BOOTSTRAP_NAME: &str = "bootstrap";
/// The environment variable holding the bootstrap secret.
pub const BOOTSTRAP_ENV: &str = "KAPPA_BOOTSTRAP_TOKEN";
/// Most tokens in one store.
pub const MAX_TOKENS: usize = 10_000;
/// Most grants on one token.
pub const MAX_GRANTS: usize = 100;

/// One stored token (no secret: its digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredToken {
    /// Unique name, shown in logs and audit lines.
    pub name: String,
    /// SHA-256 of the secret, lowercase hex.
    pub sha256: String,
    /// Grants, in their string form.
    pub grants: Vec<String>,
    /// When it was created (ms since the epoch).
    pub created_at_ms: u64,
    /// Most records per second it may produce (absent: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produce_records_per_second: Option<u64>,
}

/// A token file written by a newer Kappa (a format version above
/// [`VERSION`]): the start is refused, the file left as it is, rather
/// than misreading it or moving it aside (which would lock out every
/// token after a downgrade).
#[derive(Debug, thiserror::Error)]
#[error(
    "{path} has format version {found}, written by a newer Kappa; this one reads version \
     {VERSION}: start the newer Kappa on this data directory"
)]
struct NewerVersion {
    path: String,
    found: u32,
}

/// Just the version of a token file, read before the rest.
#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    version: u32,
    tokens: Vec<StoredToken>,
}

/// A token as authentication resolved it: its name and parsed grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's name (`anonymous` when the server runs without auth).
    pub name: String,
    /// What it may do.
    pub grants: Vec<Grant>,
    /// Most records per second it may produce (absent: no limit).
    pub produce_records_per_second: Option<u64>,
    /// What it was authenticated with, for [`TokenStore::is_current`].
    credential: Credential,
}

/// What a [`Principal`] was authenticated with.
#[derive(Clone, PartialEq, Eq)]
enum Credential {
    /// Nothing: the server runs with `auth = "none"`.
    Anonymous,
    /// `KAPPA_BOOTSTRAP_TOKEN`, which stands while the process runs.
    Bootstrap,
    /// A stored token, by the digest of its secret.
    Stored([u8; 32]),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not even the digest goes to logs.
        f.write_str(match self {
            Credential::Anonymous => "anonymous",
            Credential::Bootstrap => "bootstrap",
            Credential::Stored(_) => "stored",
        })
    }
}

impl Principal {
    /// Who calls a server running with `auth = "none"`: allowed everything.
    pub fn anonymous() -> Principal {
        Principal {
            name: "anonymous".into(),
            grants: vec![Grant::Admin],
            produce_records_per_second: None,
            credential: Credential::Anonymous,
        }
    }
}

/// A token listed by [`TokenStore::list`]: the wire type `GET /v1/tokens`
/// answers with.
pub use kappa_wire::admin::TokenInfo;

/// A token just created, its secret shown this once: the wire type
/// `POST /v1/tokens` answers with.
pub use kappa_wire::admin::NewToken;

/// Why a store change was refused.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The name or a grant is malformed, or limits are exceeded.
    #[error("{0}")]
    Invalid(String),
    /// A token of that name exists.
    #[error("a token named {0:?} exists; revoke it first or pick another name")]
    Exists(String),
    /// No token of that name.
    #[error("no token named {0:?}")]
    Unknown(String),
    /// The bootstrap token cannot be changed through the store.
    #[error("the bootstrap token comes from KAPPA_BOOTSTRAP_TOKEN: unset it and restart the server to remove it")]
    Bootstrap,
    /// Reading or writing the file failed.
    #[error("token store: {0:#}")]
    Io(anyhow::Error),
}

/// A file's identity when it was read: (inode, size, mtime in ns).
type Stamp = (u64, u64, i128);

/// A stored token as held in memory: its record, parsed grants and digest.
struct LoadedToken {
    stored: StoredToken,
    grants: Vec<Grant>,
    digest: [u8; 32],
}

impl LoadedToken {
    /// Whether `principal` is this token as it was when authenticated
    /// (same name, grants and rate limit).
    fn is(&self, principal: &Principal) -> bool {
        self.stored.name == principal.name
            && self.grants == principal.grants
            && self.stored.produce_records_per_second == principal.produce_records_per_second
    }

    /// Whether `other` (a token of a newer load) is this one unchanged.
    fn same_as(&self, other: &LoadedToken) -> bool {
        self.digest == other.digest
            && self.stored.name == other.stored.name
            && self.grants == other.grants
            && self.stored.produce_records_per_second == other.stored.produce_records_per_second
    }
}

/// What the server holds in memory.
struct Loaded {
    tokens: Vec<LoadedToken>,
    /// Index into `tokens` by digest, for [`TokenStore::is_current`] (not
    /// for authentication, which compares every digest in constant time).
    by_digest: HashMap<[u8; 32], usize>,
    /// The file's (inode, size, mtime ns) when loaded; `None` = no file.
    stamp: Option<Stamp>,
}

/// The token store of one data directory.
pub struct TokenStore {
    dir: PathBuf,
    loaded: RwLock<Loaded>,
    /// Digest of the bootstrap secret, if `KAPPA_BOOTSTRAP_TOKEN` was set.
    bootstrap: Option<[u8; 32]>,
    /// The revocation generation: +1 whenever a loaded token goes away or
    /// changes ([`TokenStore::revocations`]).
    revocations: watch::Sender<u64>,
}

/// SHA-256 of a secret.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, chunk) in text.as_bytes().chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
    }
    Some(out)
}

/// A new secret: `kp_` + 32 random bytes in hex.
pub fn new_secret() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no random bytes from the OS: {e}"))?;
    Ok(format!("kp_{}", hex(&bytes)))
}

/// Checks a token name: 1..=64 of `[A-Za-z0-9._-]`.
pub fn validate_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "token name {name:?} must be 1 to 64 characters of letters, digits, '.', '_' or '-'"
        )))
    }
}

/// Parses grant strings, naming the first bad one.
pub fn parse_grants(grants: &[String]) -> Result<Vec<Grant>, StoreError> {
    if grants.is_empty() {
        return Err(StoreError::Invalid(
            "a token needs at least one grant (e.g. admin, produce:orders.*, read-view:*)".into(),
        ));
    }
    if grants.len() > MAX_GRANTS {
        return Err(StoreError::Invalid(format!(
            "a token has at most {MAX_GRANTS} grants"
        )));
    }
    grants
        .iter()
        .map(|g| Grant::parse(g).map_err(StoreError::Invalid))
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl TokenStore {
    /// Opens the store of `data_dir` (creating `auth/`), quarantining a
    /// damaged file. `bootstrap` is the `KAPPA_BOOTSTRAP_TOKEN` secret, if set.
    pub fn open(data_dir: &Path, bootstrap: Option<&str>) -> anyhow::Result<TokenStore> {
        let dir = data_dir.join("auth");
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let bootstrap = match bootstrap {
            None => None,
            Some(secret) if secret.trim().chars().count() < MIN_BOOTSTRAP_CHARS => bail!(
                "{BOOTSTRAP_ENV} must be at least {MIN_BOOTSTRAP_CHARS} characters \
                 (e.g. the output of `openssl rand -hex 32`)"
            ),
            Some(secret) => Some(digest(secret.trim())),
        };
        let store = TokenStore {
            dir,
            loaded: RwLock::new(Loaded {
                tokens: Vec::new(),
                by_digest: HashMap::new(),
                stamp: None,
            }),
            bootstrap,
            revocations: watch::channel(0).0,
        };
        let _lock = store.lock()?;
        match store.read_file() {
            Ok((file, stamp)) => store.install(file, stamp),
            Err(e) if e.downcast_ref::<NewerVersion>().is_some() => return Err(e),
            Err(e) => {
                let path = store.file();
                let quarantined = store.dir.join(format!("tokens.json.damaged-{}", now_ms()));
                fs::rename(&path, &quarantined).with_context(|| {
                    format!("quarantining the damaged token file {}", path.display())
                })?;
                tracing::error!(
                    file = %path.display(),
                    quarantined = %quarantined.display(),
                    error = %format!("{e:#}"),
                    "the token file is damaged: moved aside; starting with no stored tokens \
                     (create new ones with `kappa token create --data-dir`)"
                );
            }
        }
        Ok(store)
    }

    fn file(&self) -> PathBuf {
        self.dir.join("tokens.json")
    }

    /// An exclusive lock on the store, across processes, until dropped.
    fn lock(&self) -> anyhow::Result<File> {
        let path = self.dir.join("tokens.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("locking {}", path.display()));
        }
        Ok(file)
    }

    fn stamp(path: &Path) -> Option<Stamp> {
        let meta = fs::metadata(path).ok()?;
        let mtime = meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128;
        Some((meta.ino(), meta.size(), mtime))
    }

    /// Reads and checks the file; a missing file is an empty store.
    fn read_file(&self) -> anyhow::Result<(TokenFile, Option<Stamp>)> {
        let path = self.file();
        let stamp = Self::stamp(&path);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((
                    TokenFile {
                        version: VERSION,
                        tokens: Vec::new(),
                    },
                    None,
                ))
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        if let Ok(VersionOnly { version }) = serde_json::from_str::<VersionOnly>(&text) {
            if version > VERSION {
                return Err(NewerVersion {
                    path: path.display().to_string(),
                    found: version,
                }
                .into());
            }
        }
        let file: TokenFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        if file.version != VERSION {
            bail!(
                "{} has version {}, expected {VERSION}",
                path.display(),
                file.version
            );
        }
        for token in &file.tokens {
            validate_name(&token.name).map_err(|e| anyhow::anyhow!("{e}"))?;
            unhex(&token.sha256)
                .with_context(|| format!("token {:?} has a malformed sha256", token.name))?;
            parse_grants(&token.grants)
                .map_err(|e| anyhow::anyhow!("token {:?}: {e}", token.name))?;
        }
        Ok((file, stamp))
    }

    /// Makes `file` the tokens in memory; bumps the revocation generation
    /// if a token loaded before is gone or changed.
    fn install(&self, file: TokenFile, stamp: Option<Stamp>) {
        let tokens: Vec<LoadedToken> = file
            .tokens
            .into_iter()
            .filter_map(|t| {
                let grants = parse_grants(&t.grants).ok()?;
                let digest = unhex(&t.sha256)?;
                Some(LoadedToken {
                    stored: t,
                    grants,
                    digest,
                })
            })
            .collect();
        let by_digest: HashMap<[u8; 32], usize> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.digest, i))
            .collect();
        let mut loaded = self.loaded.write().expect("token store lock");
        let revoked = loaded.tokens.iter().any(|old| {
            !by_digest
                .get(&old.digest)
                .is_some_and(|&i| old.same_as(&tokens[i]))
        });
        *loaded = Loaded {
            tokens,
            by_digest,
            stamp,
        };
        drop(loaded);
        // After the new tokens are in place: whoever wakes sees them.
        if revoked {
            self.revocations.send_modify(|generation| *generation += 1);
        }
    }

    /// Writes `file` atomically and installs it.
    fn write_file(&self, file: TokenFile) -> anyhow::Result<()> {
        let path = self.file();
        let temp = self.dir.join("tokens.json.tmp");
        let text = serde_json::to_string_pretty(&file)?;
        {
            let mut out =
                File::create(&temp).with_context(|| format!("creating {}", temp.display()))?;
            out.write_all(text.as_bytes())?;
            out.sync_all()
                .with_context(|| format!("syncing {}", temp.display()))?;
        }
        fs::rename(&temp, &path).with_context(|| format!("replacing {}", path.display()))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", self.dir.display()))?;
        let stamp = Self::stamp(&path);
        self.install(file, stamp);
        Ok(())
    }

    /// Reloads the file if it changed since it was loaded (another process
    /// created or revoked a token). A damaged file keeps what is loaded.
    fn refresh(&self) {
        let now = Self::stamp(&self.file());
        if now == self.loaded.read().expect("token store lock").stamp {
            return;
        }
        match self.read_file() {
            Ok((file, stamp)) => {
                tracing::info!("the token file changed on disk: reloaded");
                self.install(file, stamp);
            }
            Err(e) => tracing::error!(
                error = %format!("{e:#}"),
                "the token file changed on disk but cannot be read: keeping the tokens loaded before"
            ),
        }
    }

    /// The token whose secret is `secret`, if any (constant-time over all
    /// stored digests).
    pub fn authenticate(&self, secret: &str) -> Option<Principal> {
        self.refresh();
        let presented = digest(secret);
        if let Some(bootstrap) = &self.bootstrap {
            if bool::from(presented.ct_eq(bootstrap)) {
                return Some(Principal {
                    name: BOOTSTRAP_NAME.into(),
                    grants: vec![Grant::Admin],
                    produce_records_per_second: None,
                    credential: Credential::Bootstrap,
                });
            }
        }
        let loaded = self.loaded.read().expect("token store lock");
        let mut found = None;
        for (i, token) in loaded.tokens.iter().enumerate() {
            // No early exit: every digest is compared.
            if bool::from(presented.ct_eq(&token.digest)) {
                found = Some(i);
            }
        }
        found.map(|i| {
            let token = &loaded.tokens[i];
            Principal {
                name: token.stored.name.clone(),
                grants: token.grants.clone(),
                produce_records_per_second: token.stored.produce_records_per_second,
                credential: Credential::Stored(token.digest),
            }
        })
    }

    /// Whether `principal` still stands: true for the anonymous principal
    /// (`auth = "none"`) and the bootstrap token; for a stored token, true
    /// while the token it was authenticated with is stored unchanged —
    /// false once it is revoked, re-created under its name with a new
    /// secret, or its grants or rate limit changed in the file.
    ///
    /// Cheap enough to call before every answer of a long-lived
    /// connection (HTTP long-polls and change feeds, each request of a
    /// Kafka connection that logged in over SASL): one `stat` of the token
    /// file, to see changes another process made (the file is re-read only
    /// when it changed), and a hash lookup under a read lock.
    pub fn is_current(&self, principal: &Principal) -> bool {
        let digest = match &principal.credential {
            Credential::Anonymous => return true,
            Credential::Bootstrap => return self.bootstrap.is_some(),
            Credential::Stored(digest) => digest,
        };
        self.refresh();
        let loaded = self.loaded.read().expect("token store lock");
        loaded
            .by_digest
            .get(digest)
            .is_some_and(|&i| loaded.tokens[i].is(principal))
    }

    /// The revocation generation, which goes up whenever a loaded token
    /// goes away or changes (revoked here, or a change of the token file
    /// seen by a reload — a reload happens at the next authentication or
    /// [`TokenStore::is_current`] of any token). Wait on it with
    /// `changed()`, then ask [`TokenStore::is_current`]: most changes
    /// concern other tokens.
    pub fn revocations(&self) -> watch::Receiver<u64> {
        self.revocations.subscribe()
    }

    /// Completes once `principal` is no longer current (at once if it is
    /// not now); never for principals that cannot be revoked (anonymous,
    /// bootstrap). For `select!` beside a long wait.
    pub async fn revoked(&self, principal: &Principal) {
        if !matches!(principal.credential, Credential::Stored(_)) {
            return std::future::pending().await;
        }
        // Subscribed before the check: a revocation after it wakes us.
        let mut revocations = self.revocations();
        while self.is_current(principal) {
            if revocations.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Every token, without secrets; the bootstrap token first if set.
    pub fn list(&self) -> Vec<TokenInfo> {
        self.refresh();
        let mut out = Vec::new();
        if self.bootstrap.is_some() {
            out.push(TokenInfo {
                name: BOOTSTRAP_NAME.into(),
                grants: vec!["admin".into()],
                created_at_ms: None,
                source: "environment".into(),
                produce_records_per_second: None,
            });
        }
        let loaded = self.loaded.read().expect("token store lock");
        out.extend(
            loaded
                .tokens
                .iter()
                .map(|LoadedToken { stored: t, .. }| TokenInfo {
                    name: t.name.clone(),
                    grants: t.grants.clone(),
                    created_at_ms: Some(t.created_at_ms),
                    source: "store".into(),
                    produce_records_per_second: t.produce_records_per_second,
                }),
        );
        out
    }

    /// Creates a token named `name` with `grants` (and a produce rate
    /// limit, if given); the secret is returned once and stored only as its
    /// digest.
    pub fn create(
        &self,
        name: &str,
        grants: &[String],
        produce_records_per_second: Option<u64>,
    ) -> Result<NewToken, StoreError> {
        validate_name(name)?;
        if produce_records_per_second == Some(0) {
            return Err(StoreError::Invalid(
                "produce_records_per_second must be at least 1 (omit it for no limit)".into(),
            ));
        }
        let parsed = parse_grants(grants)?;
        let grants: Vec<String> = parsed.iter().map(Grant::to_string).collect();
        if name == BOOTSTRAP_NAME && self.bootstrap.is_some() {
            return Err(StoreError::Exists(name.into()));
        }
        let _lock = self.lock().map_err(StoreError::Io)?;
        let (mut file, _) = self.read_file().map_err(StoreError::Io)?;
        if file.tokens.iter().any(|t| t.name == name) {
            return Err(StoreError::Exists(name.into()));
        }
        if file.tokens.len() >= MAX_TOKENS {
            return Err(StoreError::Invalid(format!(
                "the store holds {MAX_TOKENS} tokens, the most it may; revoke some first"
            )));
        }
        let secret = new_secret().map_err(StoreError::Io)?;
        let created_at_ms = now_ms();
        file.tokens.push(StoredToken {
            name: name.into(),
            sha256: hex(&digest(&secret)),
            grants: grants.clone(),
            created_at_ms,
            produce_records_per_second,
        });
        self.write_file(file).map_err(StoreError::Io)?;
        Ok(NewToken {
            name: name.into(),
            token: secret,
            grants,
            created_at_ms,
            produce_records_per_second,
        })
    }

    /// Revokes the token named `name`: it stops working at once.
    pub fn revoke(&self, name: &str) -> Result<(), StoreError> {
        if name == BOOTSTRAP_NAME && self.bootstrap.is_some() {
            return Err(StoreError::Bootstrap);
        }
        let _lock = self.lock().map_err(StoreError::Io)?;
        let (mut file, _) = self.read_file().map_err(StoreError::Io)?;
        let before = file.tokens.len();
        file.tokens.retain(|t| t.name != name);
        if file.tokens.len() == before {
            return Err(StoreError::Unknown(name.into()));
        }
        self.write_file(file).map_err(StoreError::Io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_token_authenticates_with_its_grants_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path(), None).unwrap();
        let new = store
            .create("writer", &["produce:orders.*".to_string()], None)
            .unwrap();
        assert!(new.token.starts_with("kp_") && new.token.len() == 67);
        let who = store.authenticate(&new.token).unwrap();
        assert_eq!(who.name, "writer");
        assert_eq!(who.grants, vec![Grant::parse("produce:orders.*").unwrap()]);
        assert!(store.authenticate("kp_wrong").is_none());
        // The secret is not in the file; its digest is.
        let text = fs::read_to_string(dir.path().join("auth/tokens.json")).unwrap();
        assert!(!text.contains(&new.token));
        assert!(text.contains(&hex(&digest(&new.token))));
        assert!(matches!(
            store.create("writer", &["admin".into()], None),
            Err(StoreError::Exists(_))
        ));
        store.revoke("writer").unwrap();
        assert!(store.authenticate(&new.token).is_none());
        assert!(matches!(
            store.revoke("writer"),
            Err(StoreError::Unknown(_))
        ));
    }

    #[test]
    fn another_process_changes_are_seen_on_the_next_authentication() {
        let dir = tempfile::tempdir().unwrap();
        let server = TokenStore::open(dir.path(), None).unwrap();
        let offline = TokenStore::open(dir.path(), None).unwrap();
        let new = offline.create("ops", &["admin".to_string()], None).unwrap();
        assert_eq!(server.authenticate(&new.token).unwrap().name, "ops");
        offline.revoke("ops").unwrap();
        assert!(server.authenticate(&new.token).is_none());
    }

    #[test]
    fn tokens_survive_a_reopen_and_a_damaged_file_is_quarantined() {
        let dir = tempfile::tempdir().unwrap();
        let new = TokenStore::open(dir.path(), None)
            .unwrap()
            .create("ops", &["admin".to_string()], None)
            .unwrap();
        let reopened = TokenStore::open(dir.path(), None).unwrap();
        assert!(reopened.authenticate(&new.token).is_some());
        fs::write(dir.path().join("auth/tokens.json"), b"{not json").unwrap();
        let store = TokenStore::open(dir.path(), None).unwrap();
        assert!(store.authenticate(&new.token).is_none());
        let names: Vec<String> = fs::read_dir(dir.path().join("auth"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("tokens.json.damaged-")),
            "{names:?}"
        );
    }

    #[test]
    fn a_token_file_of_a_newer_version_refuses_the_start_and_stays() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("auth")).unwrap();
        let newer = r#"{"version": 2, "tokens": [], "realms": {}}"#;
        fs::write(dir.path().join("auth/tokens.json"), newer).unwrap();
        let Err(e) = TokenStore::open(dir.path(), None) else {
            panic!("a newer token file opened");
        };
        let e = format!("{e:#}");
        assert!(
            e.contains("format version 2") && e.contains("newer Kappa"),
            "{e}"
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("auth/tokens.json")).unwrap(),
            newer
        );
    }

    #[test]
    fn the_bootstrap_token_is_admin_and_cannot_be_revoked_or_be_short() {
        let dir = tempfile::tempdir().unwrap();
        assert!(TokenStore::open(dir.path(), Some("short")).is_err());
        let secret = "a-bootstrap-secret-long-enough";
        let store = TokenStore::open(dir.path(), Some(secret)).unwrap();
        let who = store.authenticate(secret).unwrap();
        assert_eq!(
            (who.name.as_str(), who.grants),
            ("bootstrap", vec![Grant::Admin])
        );
        assert!(matches!(
            store.revoke("bootstrap"),
            Err(StoreError::Bootstrap)
        ));
        assert_eq!(store.list()[0].source, "environment");
        let text = fs::read_to_string(dir.path().join("auth/tokens.json")).unwrap_or_default();
        assert!(!text.contains(secret));
    }

    #[test]
    fn a_principal_is_current_until_its_token_is_revoked_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path(), None).unwrap();
        let mut revocations = store.revocations();
        let old = store.create("reader", &["read:*".into()], None).unwrap();
        let other = store.create("other", &["read:*".into()], None).unwrap();
        let who = store.authenticate(&old.token).unwrap();
        let bystander = store.authenticate(&other.token).unwrap();
        assert!(store.is_current(&who));
        // Creating tokens revokes nothing.
        assert!(!revocations.has_changed().unwrap());
        store.revoke("reader").unwrap();
        assert!(revocations.has_changed().unwrap());
        assert_eq!(*revocations.borrow_and_update(), 1);
        assert!(!store.is_current(&who));
        assert!(store.is_current(&bystander));
        // A new token under the old name does not bring the old one back.
        let new = store.create("reader", &["read:*".into()], None).unwrap();
        assert!(!store.is_current(&who));
        assert!(store.is_current(&store.authenticate(&new.token).unwrap()));
        assert!(store.is_current(&Principal::anonymous()));
    }

    #[test]
    fn a_revocation_by_another_process_is_seen_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let server = TokenStore::open(dir.path(), None).unwrap();
        let offline = TokenStore::open(dir.path(), None).unwrap();
        let new = server.create("ops", &["admin".into()], None).unwrap();
        let who = server.authenticate(&new.token).unwrap();
        let mut revocations = server.revocations();
        offline.revoke("ops").unwrap();
        // The server sees it at its next look at the file.
        assert!(!server.is_current(&who));
        assert!(revocations.has_changed().unwrap());
        revocations.borrow_and_update();
        // A grant changed in the file also ends the old principal.
        let kept = server.create("kept", &["read:a".into()], None).unwrap();
        let kept_who = server.authenticate(&kept.token).unwrap();
        let path = dir.path().join("auth/tokens.json");
        let text = fs::read_to_string(&path)
            .unwrap()
            .replace("read:a", "read:*");
        fs::write(&path, text).unwrap();
        assert!(!server.is_current(&kept_who));
        assert!(revocations.has_changed().unwrap());
    }

    #[test]
    fn the_revoked_future_completes_only_for_the_revoked_principal() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path(), Some("a-bootstrap-secret-long-enough")).unwrap();
        let a = store.create("a", &["read:*".into()], None).unwrap();
        let b = store.create("b", &["read:*".into()], None).unwrap();
        let (a, b) = (
            store.authenticate(&a.token).unwrap(),
            store.authenticate(&b.token).unwrap(),
        );
        let bootstrap = store
            .authenticate("a-bootstrap-secret-long-enough")
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            use futures_util::FutureExt;
            let mut a_revoked = Box::pin(store.revoked(&a));
            let mut b_revoked = Box::pin(store.revoked(&b));
            let mut boot_revoked = Box::pin(store.revoked(&bootstrap));
            assert!((&mut a_revoked).now_or_never().is_none());
            store.revoke("b").unwrap();
            assert!((&mut a_revoked).now_or_never().is_none());
            assert!((&mut b_revoked).now_or_never().is_some());
            store.revoke("a").unwrap();
            assert!((&mut a_revoked).now_or_never().is_some());
            assert!((&mut boot_revoked).now_or_never().is_none());
            assert!(store.is_current(&bootstrap));
        });
    }

    #[test]
    fn names_and_grants_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path(), None).unwrap();
        for bad in ["", "a b", "x/y", &"n".repeat(65)] {
            assert!(store.create(bad, &["admin".into()], None).is_err(), "{bad}");
        }
        assert!(store.create("ok", &[], None).is_err());
        assert!(store.create("ok", &["write:x".into()], None).is_err());
    }
}
