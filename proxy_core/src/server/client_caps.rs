//! Open connections per client address, so that one address cannot take every connection
//! permit of the gateway (`max_connections`) and lock everyone else out.
//!
//! IPv6 clients are counted by their /64: one host usually owns a whole /64 and could otherwise
//! rotate through addresses. The counts sit in a few mutex-guarded maps, sharded by address;
//! they are touched once when a connection opens and once when it closes, never per request.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

const SHARDS: usize = 16;

/// The unit a cap applies to: an IPv4 address or an IPv6 /64 (IPv4-mapped addresses count as
/// their IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    V4(u32),
    V6Prefix(u64),
}

impl From<IpAddr> for Client {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Client::V4(u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Client::V4(u32::from(v4)),
                None => Client::V6Prefix((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

pub struct ClientCaps {
    /// Connections one client may hold open; 0 = no cap.
    cap: u32,
    hasher: RandomState,
    shards: [Mutex<HashMap<Client, u32>>; SHARDS],
}

/// A held place of one client; given back on drop.
pub struct ClientPlace {
    caps: Arc<ClientCaps>,
    client: Client,
}

impl ClientCaps {
    pub fn new(cap: u32) -> Arc<Self> {
        Arc::new(Self { cap, hasher: RandomState::new(), shards: std::array::from_fn(|_| Mutex::default()) })
    }

    fn shard(&self, client: &Client) -> &Mutex<HashMap<Client, u32>> {
        &self.shards[(self.hasher.hash_one(client) as usize) % SHARDS]
    }

    /// A place for one more connection of `ip`, or `None` when it holds its cap already.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<ClientPlace> {
        let client = Client::from(ip);
        if self.cap > 0 {
            let mut counts = self.shard(&client).lock().unwrap_or_else(PoisonError::into_inner);
            let count = counts.entry(client).or_insert(0);
            if *count >= self.cap {
                return None;
            }
            *count += 1;
        }
        Some(ClientPlace { caps: self.clone(), client })
    }

    #[cfg(test)]
    fn held(&self, ip: IpAddr) -> u32 {
        let client = Client::from(ip);
        self.shard(&client).lock().unwrap_or_else(PoisonError::into_inner).get(&client).copied().unwrap_or(0)
    }
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        if self.caps.cap == 0 {
            return;
        }
        let mut counts = self.caps.shard(&self.client).lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_is_capped_and_others_are_not_affected() {
        let caps = ClientCaps::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = caps.admit(a).unwrap();
        let _second = caps.admit(a).unwrap();
        assert!(caps.admit(a).is_none());
        assert!(caps.admit(b).is_some());
        drop(first);
        assert!(caps.admit(a).is_some());
    }

    #[test]
    fn ipv6_counts_by_slash_64_and_mapped_ipv4_as_ipv4() {
        let caps = ClientCaps::new(1);
        let _held = caps.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        assert!(caps.admit("2001:db8:1:2:ffff::9".parse().unwrap()).is_none());
        assert!(caps.admit("2001:db8:1:3::1".parse().unwrap()).is_some());
        let _v4 = caps.admit("192.0.2.7".parse().unwrap()).unwrap();
        assert!(caps.admit("::ffff:192.0.2.7".parse().unwrap()).is_none());
    }

    #[test]
    fn places_are_given_back_and_zero_means_no_cap() {
        let caps = ClientCaps::new(3);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let places: Vec<_> = (0..3).filter_map(|_| caps.admit(ip)).collect();
        assert_eq!(caps.held(ip), 3);
        drop(places);
        assert_eq!(caps.held(ip), 0);
        let open = ClientCaps::new(0);
        let many: Vec<_> = (0..10_000).filter_map(|_| open.admit(ip)).collect();
        assert_eq!(many.len(), 10_000);
    }
}
