//! Each open connection's standing, and which connections may be closed to
//! make room — the defence against slow clients (slowloris, slow bodies)
//! and unauthenticated peers holding every slot.
//!
//! A connection is *evictable* while it
//! - has not sent a complete request head (a *newcomer*),
//! - is receiving a request body, or
//! - has made no authenticated request (under `auth = "tokens"`: only the
//!   open routes, `/health`, `/ready` and the console, so far; under
//!   `auth = "none"` any routed request counts).
//!
//! Invariants: an address holds at most `per_ip` newcomers (a new one
//! beyond that closes the address's oldest newcomer); when the server is at
//! its connection limit, the oldest evictable connection of any address is
//! closed to make room, and if there is none, the oldest *idle* one (kept
//! alive between requests: no request or answer under way)
//! ([`Standings::evict_oldest`]). A connection that has made an
//! authenticated request and is serving one (a long-poll, a change feed)
//! without receiving a body is never closed for room. So peers that
//! connect and never finish a request, drip a body, or never authenticate
//! cannot keep other clients out.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// One connection's standing.
#[derive(Debug)]
pub struct Standing {
    id: u64,
    ip: IpAddr,
    head_seen: AtomicBool,
    authenticated: AtomicBool,
    bodies: AtomicUsize,
    requests: AtomicUsize,
    regular: AtomicBool,
    evicted: AtomicBool,
    eviction: Notify,
}

impl Standing {
    /// Whether the connection may be closed to make room.
    pub fn evictable(&self) -> bool {
        !self.head_seen.load(Ordering::SeqCst)
            || !self.authenticated.load(Ordering::SeqCst)
            || self.bodies.load(Ordering::SeqCst) > 0
    }

    /// Whether it is kept alive between requests: no request or answer
    /// under way.
    pub fn idle(&self) -> bool {
        self.head_seen() && self.requests.load(Ordering::SeqCst) == 0
    }

    /// Whether it has sent a complete request head.
    pub fn head_seen(&self) -> bool {
        self.head_seen.load(Ordering::SeqCst)
    }

    /// Resolves once the connection is closed to make room.
    pub async fn evicted(&self) {
        loop {
            let notified = self.eviction.notified();
            if self.evicted.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        self.eviction.notify_waiters();
    }
}

/// The standings of every open connection.
#[derive(Debug)]
pub struct Standings {
    per_ip: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    /// Open connections, oldest first.
    by_age: BTreeMap<u64, Arc<Standing>>,
    /// Each address's newcomers, oldest first.
    newcomers_by_ip: HashMap<IpAddr, VecDeque<u64>>,
}

impl Inner {
    fn forget_newcomer(&mut self, ip: IpAddr, id: u64) {
        if let Some(ids) = self.newcomers_by_ip.get_mut(&ip) {
            ids.retain(|&i| i != id);
            if ids.is_empty() {
                self.newcomers_by_ip.remove(&ip);
            }
        }
    }
}

impl Standings {
    /// A registry allowing `per_ip` newcomers per address.
    pub fn new(per_ip: usize) -> Standings {
        Standings {
            per_ip: per_ip.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Registers a new connection from `ip` (a newcomer) on a regular slot
    /// or a reserved one; closes `ip`'s oldest newcomer if `ip` now holds
    /// more than `per_ip`.
    pub fn open(&self, ip: IpAddr, regular: bool) -> Arc<Standing> {
        let mut inner = self.inner.lock().expect("standings");
        let id = inner.next_id;
        inner.next_id += 1;
        let standing = Arc::new(Standing {
            id,
            ip,
            head_seen: AtomicBool::new(false),
            authenticated: AtomicBool::new(false),
            bodies: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            regular: AtomicBool::new(regular),
            evicted: AtomicBool::new(false),
            eviction: Notify::new(),
        });
        inner.by_age.insert(id, standing.clone());
        let ids = inner.newcomers_by_ip.entry(ip).or_default();
        ids.push_back(id);
        let oldest = (ids.len() > self.per_ip).then(|| ids[0]);
        if let Some(oldest) = oldest {
            inner.forget_newcomer(ip, oldest);
            if let Some(old) = inner.by_age.get(&oldest) {
                crate::metrics::count_connection_closed("per_ip_newcomer_limit");
                old.evict();
            }
        }
        standing
    }

    /// The connection sent a complete request head.
    pub fn head_arrived(&self, standing: &Standing) {
        if !standing.head_seen.swap(true, Ordering::SeqCst) {
            let mut inner = self.inner.lock().expect("standings");
            inner.forget_newcomer(standing.ip, standing.id);
        }
    }

    /// The connection moved from a reserved slot to a regular one.
    pub fn now_regular(&self, standing: &Standing) {
        standing.regular.store(true, Ordering::SeqCst);
    }

    /// The connection made an authenticated request.
    pub fn authenticated(&self, standing: &Standing) {
        standing.authenticated.store(true, Ordering::SeqCst);
    }

    /// A request body of the connection started (`true`) or ended.
    pub fn body(&self, standing: &Standing, started: bool) {
        if started {
            standing.bodies.fetch_add(1, Ordering::SeqCst);
        } else {
            standing.bodies.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A request of the connection started (`true`), or its answer ended
    /// (sent whole, or dropped).
    pub fn request(&self, standing: &Standing, started: bool) {
        if started {
            standing.requests.fetch_add(1, Ordering::SeqCst);
        } else {
            standing.requests.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The connection ended.
    pub fn close(&self, standing: &Standing) {
        let mut inner = self.inner.lock().expect("standings");
        inner.by_age.remove(&standing.id);
        inner.forget_newcomer(standing.ip, standing.id);
    }

    /// Closes the oldest evictable connection of any address on a regular
    /// slot (`regular`) or a reserved one, or if there is none the oldest
    /// idle one; false if there is neither. Connections on reserved slots
    /// wait for regular ones in order: they are not closed to make room
    /// for regular slots.
    pub fn evict_oldest(&self, regular: bool) -> bool {
        let mut inner = self.inner.lock().expect("standings");
        let open = || {
            inner.by_age.values().filter(|s| {
                !s.evicted.load(Ordering::SeqCst) && s.regular.load(Ordering::SeqCst) == regular
            })
        };
        let Some(oldest) = open()
            .find(|s| s.evictable())
            .or_else(|| open().find(|s| s.idle()))
            .cloned()
        else {
            return false;
        };
        inner.forget_newcomer(oldest.ip, oldest.id);
        let reason = if !oldest.head_seen() {
            "connection_limit"
        } else if oldest.bodies.load(Ordering::SeqCst) > 0 {
            "connection_limit_slow_body"
        } else if !oldest.authenticated.load(Ordering::SeqCst) {
            "connection_limit_unauthenticated"
        } else {
            "connection_limit_idle"
        };
        crate::metrics::count_connection_closed(reason);
        oldest.evict();
        true
    }

    /// Number of newcomers now.
    #[cfg(test)]
    fn newcomers(&self) -> usize {
        self.inner
            .lock()
            .expect("standings")
            .newcomers_by_ip
            .values()
            .map(VecDeque::len)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    impl Standings {
        fn open_regular(&self, ip: IpAddr) -> Arc<Standing> {
            self.open(ip, true)
        }
    }

    fn is_evicted(s: &Standing) -> bool {
        s.evicted.load(Ordering::SeqCst)
    }

    #[test]
    fn an_address_over_its_limit_loses_its_oldest_newcomer() {
        let n = Standings::new(2);
        let a = n.open_regular(ip(1));
        let b = n.open_regular(ip(1));
        let other = n.open_regular(ip(2));
        assert!(!is_evicted(&a) && !is_evicted(&b));
        let _c = n.open_regular(ip(1));
        assert!(is_evicted(&a), "the oldest of 127.0.0.1 is closed");
        assert!(!is_evicted(&b));
        assert!(!is_evicted(&other), "other addresses are untouched");
        assert_eq!(n.newcomers(), 3);
        n.close(&a);
        assert_eq!(n.newcomers(), 3, "closing an evicted one is harmless");
    }

    #[test]
    fn authenticated_connections_serving_a_request_are_never_evicted() {
        let n = Standings::new(1);
        let a = n.open_regular(ip(1));
        n.head_arrived(&a);
        n.authenticated(&a);
        n.request(&a, true);
        let _b = n.open_regular(ip(1));
        let _c = n.open_regular(ip(1));
        assert!(!is_evicted(&a));
        assert!(n.evict_oldest(true), "b is a newcomer");
        assert!(!is_evicted(&a));
    }

    #[test]
    fn at_the_limit_the_oldest_evictable_connection_of_any_address_goes() {
        let n = Standings::new(10);
        // a: authenticated, idle — closed only when nothing else can be.
        let a = n.open_regular(ip(3));
        n.head_arrived(&a);
        n.authenticated(&a);
        // b: authenticated, dripping a body.
        let b = n.open_regular(ip(1));
        n.head_arrived(&b);
        n.authenticated(&b);
        n.body(&b, true);
        // c: sent a head but never authenticated (a tokenless peer).
        let c = n.open_regular(ip(2));
        n.head_arrived(&c);
        // d: a newcomer.
        let d = n.open_regular(ip(4));
        // e: authenticated, a long-poll under way.
        let e = n.open_regular(ip(5));
        n.head_arrived(&e);
        n.authenticated(&e);
        n.request(&e, true);
        for expected in [&b, &c, &d, &a] {
            assert!(n.evict_oldest(true));
            assert!(is_evicted(expected));
        }
        assert!(!n.evict_oldest(true), "only e is left, and it stays");
        assert!(!is_evicted(&e));
        // Connections on reserved slots are closed only for reserved room.
        let f = n.open(ip(6), false);
        assert!(!n.evict_oldest(true));
        assert!(n.evict_oldest(false));
        assert!(is_evicted(&f));
        // A body that ended makes b unevictable again (were it still open).
        n.body(&b, false);
        assert!(!b.evictable());
    }
}
