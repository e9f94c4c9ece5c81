//! Which addresses an upstream connection may reach, checked on the resolved address at connect
//! time (so a name whose DNS answer changes after the control plane's check cannot slip past).
//!
//! - Cloud metadata services (169.254.169.254, ECS's 169.254.170.2, Alibaba's 100.100.100.200,
//!   AWS's fd00:ec2::254) are never reachable, not even for `internal` members: they hand out the
//!   host's credentials.
//! - Link-local, unspecified and broadcast addresses are refused unless the member is `internal`
//!   (an operator's own upstream on such an address).
//! - The gateway's own listeners (its data port and admin port, on loopback, on an unspecified
//!   bind, or on one of this host's addresses) are never reachable: a route pointed at the
//!   gateway itself would call itself in a loop and reach the admin API from inside.
//! - IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are judged by
//!   that IPv4 address too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwap;

const METADATA_V4: [Ipv4Addr; 3] =
    [Ipv4Addr::new(169, 254, 169, 254), Ipv4Addr::new(169, 254, 170, 2), Ipv4Addr::new(100, 100, 100, 200)];
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// The IPv4 address an IPv6 address carries, in every form a resolver or a NAT might hand out.
pub fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low32 = Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32);
    if let Some(mapped) = v6.to_ipv4_mapped() {
        return Some(mapped);
    }
    // IPv4-compatible (::a.b.c.d, deprecated but still parsed): all zero above the low 32 bits,
    // excluding :: and ::1.
    if s[..6].iter().all(|x| *x == 0) && u32::from(low32) > 1 {
        return Some(low32);
    }
    // NAT64 well-known prefix 64:ff9b::/96, and the local-use prefix 64:ff9b:1::/48.
    if (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]) || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) {
        return Some(low32);
    }
    // 6to4: 2002:AABB:CCDD::/48.
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::from(((s[1] as u32) << 16) | s[2] as u32));
    }
    // Teredo: 2001:0::/32, the client's address stored inverted in the low 32 bits.
    if s[0] == 0x2001 && s[1] == 0 {
        return Some(Ipv4Addr::from(!u32::from(low32)));
    }
    None
}

/// Every address `ip` stands for: itself and the IPv4 address it embeds.
fn forms(ip: IpAddr) -> impl Iterator<Item = IpAddr> {
    let embedded = match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
        IpAddr::V4(_) => None,
    };
    std::iter::once(ip).chain(embedded)
}

/// A cloud metadata service: never reachable.
pub fn is_metadata(ip: IpAddr) -> bool {
    forms(ip).any(|ip| match ip {
        IpAddr::V4(v4) => METADATA_V4.contains(&v4),
        IpAddr::V6(v6) => v6 == METADATA_V6,
    })
}

/// An address only an `internal` member may reach: link-local, unspecified, broadcast (and the
/// metadata services, which nothing may reach).
pub fn forbidden_address(ip: IpAddr) -> bool {
    is_metadata(ip)
        || forms(ip).any(|ip| match ip {
            IpAddr::V4(v4) => v4.is_link_local() || v4.is_unspecified() || v4.is_broadcast(),
            IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80 || v6.is_unspecified(),
        })
}

/// The gateway's own listeners, told by whoever opens them (the core its data port, the control
/// plane its admin port), and this host's addresses.
#[derive(Default)]
pub struct AddressGuard {
    listeners: ArcSwap<Vec<SocketAddr>>,
}

impl AddressGuard {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Add listeners (already known ones are kept once).
    pub fn add_listeners(&self, added: &[SocketAddr]) {
        self.listeners.rcu(|current| {
            let mut next: Vec<SocketAddr> = current.as_ref().clone();
            for addr in added {
                if !next.contains(addr) {
                    next.push(*addr);
                }
            }
            next
        });
    }

    pub fn listeners(&self) -> Vec<SocketAddr> {
        self.listeners.load().as_ref().clone()
    }

    /// Whether connecting to `target` would reach one of the gateway's own listeners.
    pub fn is_own_listener(&self, target: SocketAddr) -> bool {
        let listeners = self.listeners.load();
        let candidates: Vec<IpAddr> = forms(target.ip()).collect();
        listeners.iter().filter(|l| l.port() == target.port()).any(|listener| {
            candidates
                .iter()
                .any(|ip| ip.is_loopback() || ip.is_unspecified() || *ip == listener.ip() || is_local_address(*ip))
        })
    }

    /// Why `target` may not be reached by a member (internal or not), if it may not.
    pub fn refusal(&self, target: SocketAddr, internal: bool) -> Option<&'static str> {
        if is_metadata(target.ip()) {
            return Some("a cloud metadata address");
        }
        if !internal && forbidden_address(target.ip()) {
            return Some("a link-local, unspecified or broadcast address");
        }
        if self.is_own_listener(target) {
            return Some("the gateway's own listener");
        }
        None
    }
}

/// One of this host's own addresses: binding to it succeeds only if an interface holds it.
fn is_local_address(ip: IpAddr) -> bool {
    if ip.is_loopback() || ip.is_unspecified() {
        return true;
    }
    std::net::TcpListener::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn metadata_in_every_ipv6_disguise_is_refused_even_for_internal_members() {
        let guard = AddressGuard::default();
        for bad in [
            "169.254.169.254",
            "100.100.100.200",
            "169.254.170.2",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            "::169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "2002:6464:64c8::",
            "2001:0:4136:e378:8000:63bf:5601:5601",
            "64:ff9b::100.100.100.200",
        ] {
            assert!(is_metadata(ip(bad)), "{bad}");
            assert!(guard.refusal(SocketAddr::new(ip(bad), 80), true).is_some(), "{bad}");
        }
    }

    #[test]
    fn link_local_is_for_internal_members_only() {
        let guard = AddressGuard::default();
        for addr in ["169.254.1.1", "fe80::1", "0.0.0.0", "255.255.255.255", "::ffff:169.254.1.1", "2002:a9fe:0101::"] {
            let target = SocketAddr::new(ip(addr), 80);
            assert!(guard.refusal(target, false).is_some(), "{addr}");
            assert!(guard.refusal(target, true).is_none(), "{addr}");
        }
        for good in ["127.0.0.1", "10.0.0.5", "8.8.8.8", "::1", "2001:db8::1"] {
            assert!(guard.refusal(SocketAddr::new(ip(good), 80), false).is_none(), "{good}");
        }
    }

    #[test]
    fn own_listeners_are_refused_by_any_local_name() {
        let guard = AddressGuard::default();
        guard.add_listeners(&["0.0.0.0:8080".parse().unwrap(), "127.0.0.1:8081".parse().unwrap()]);
        guard.add_listeners(&["127.0.0.1:8081".parse().unwrap()]);
        assert_eq!(guard.listeners().len(), 2);
        for own in ["127.0.0.1:8080", "127.0.0.2:8081", "[::1]:8080", "[::ffff:127.0.0.1]:8081", "0.0.0.0:8080"] {
            assert!(guard.refusal(own.parse().unwrap(), true).is_some(), "{own}");
        }
        // Another port on loopback is an upstream like any other.
        assert!(guard.refusal("127.0.0.1:9001".parse().unwrap(), false).is_none());
    }
}
