//! New connections that have not yet sent a complete request head
//! ("newcomers"), per client address and oldest first — the slowloris
//! defence. A newcomer becomes *proven* when its first request head is
//! parsed and is then never closed by this module.
//!
//! Invariants: an address holds at most `per_ip` newcomers (a new one
//! beyond that closes the address's oldest); when the server is at its
//! connection limit, the oldest newcomer of any address can be closed to make
//! room. So one client that opens connections and never finishes a request
//! holds at most `per_ip` sockets and cannot keep other clients (or its own
//! well-behaved requests) out.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;

use tokio::sync::oneshot;

/// Resolves when the connection is closed to make room (an `Err` only means
/// the connection was proven or finished first).
pub type Eviction = oneshot::Receiver<()>;

/// The registry of newcomers.
#[derive(Debug)]
pub struct Newcomers {
    per_ip: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    /// Newcomers oldest first: id -> (address, how to close it).
    by_age: BTreeMap<u64, (IpAddr, oneshot::Sender<()>)>,
    /// Each address's newcomers, oldest first.
    by_ip: HashMap<IpAddr, VecDeque<u64>>,
}

impl Inner {
    fn remove(&mut self, id: u64) -> Option<oneshot::Sender<()>> {
        let (ip, evict) = self.by_age.remove(&id)?;
        if let Some(ids) = self.by_ip.get_mut(&ip) {
            ids.retain(|&i| i != id);
            if ids.is_empty() {
                self.by_ip.remove(&ip);
            }
        }
        Some(evict)
    }
}

impl Newcomers {
    /// A registry allowing `per_ip` newcomers per address.
    pub fn new(per_ip: usize) -> Newcomers {
        Newcomers {
            per_ip: per_ip.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Registers a new connection from `ip`; closes `ip`'s oldest newcomer
    /// if `ip` now holds more than `per_ip`. Returns its id and eviction.
    pub fn add(&self, ip: IpAddr) -> (u64, Eviction) {
        let mut inner = self.inner.lock().expect("newcomers");
        let id = inner.next_id;
        inner.next_id += 1;
        let (tx, rx) = oneshot::channel();
        inner.by_age.insert(id, (ip, tx));
        let ids = inner.by_ip.entry(ip).or_default();
        ids.push_back(id);
        let oldest = (ids.len() > self.per_ip).then(|| ids[0]);
        if let Some(oldest) = oldest {
            if let Some(evict) = inner.remove(oldest) {
                crate::metrics::count_connection_closed("per_ip_newcomer_limit");
                let _ = evict.send(());
            }
        }
        (id, rx)
    }

    /// The connection sent a request head (or ended): it is no longer a
    /// newcomer.
    pub fn remove(&self, id: u64) {
        self.inner.lock().expect("newcomers").remove(id);
    }

    /// Closes the oldest newcomer of any address; false if there is none.
    pub fn evict_oldest(&self) -> bool {
        let mut inner = self.inner.lock().expect("newcomers");
        let Some(&oldest) = inner.by_age.keys().next() else {
            return false;
        };
        if let Some(evict) = inner.remove(oldest) {
            crate::metrics::count_connection_closed("connection_limit");
            let _ = evict.send(());
        }
        true
    }

    /// Number of newcomers now.
    pub fn len(&self) -> usize {
        self.inner.lock().expect("newcomers").by_age.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn an_address_over_its_limit_loses_its_oldest_newcomer() {
        let n = Newcomers::new(2);
        let (a, mut ea) = n.add(ip(1));
        let (_b, mut eb) = n.add(ip(1));
        let (_other, mut eo) = n.add(ip(2));
        assert!(ea.try_recv().is_err() && eb.try_recv().is_err());
        let (_c, _ec) = n.add(ip(1));
        assert_eq!(ea.try_recv(), Ok(()), "the oldest of 127.0.0.1 is closed");
        assert!(eb.try_recv().is_err());
        assert!(eo.try_recv().is_err(), "other addresses are untouched");
        assert_eq!(n.len(), 3);
        n.remove(a);
        assert_eq!(n.len(), 3, "removing an evicted one is harmless");
    }

    #[test]
    fn proven_connections_are_never_evicted() {
        let n = Newcomers::new(1);
        let (a, mut ea) = n.add(ip(1));
        n.remove(a);
        let (_b, _eb) = n.add(ip(1));
        let (_c, _ec) = n.add(ip(1));
        assert!(matches!(
            ea.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
    }

    #[test]
    fn at_the_connection_limit_the_oldest_newcomer_of_any_address_goes() {
        let n = Newcomers::new(10);
        let (_a, mut ea) = n.add(ip(3));
        let (_b, mut eb) = n.add(ip(1));
        assert!(n.evict_oldest());
        assert_eq!(ea.try_recv(), Ok(()));
        assert!(eb.try_recv().is_err());
        assert!(n.evict_oldest());
        assert!(!n.evict_oldest());
        assert!(n.is_empty());
    }
}
