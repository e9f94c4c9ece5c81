//! What one member's connections may reach, checked on every resolved (or literal) address at
//! connect time, so a DNS answer that changes after the control plane's check cannot slip past.
//! Both upstream clients (`client` and `http1`) connect through it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::guard::AddressGuard;

/// The guard, and the member's port and flag.
#[derive(Clone)]
pub(super) struct Reach {
    pub guard: Arc<AddressGuard>,
    /// The port the member's URL names: a resolver sees only the host.
    pub port: u16,
    pub internal: bool,
}

impl Reach {
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        self.guard.refusal(SocketAddr::new(ip, self.port), self.internal)
    }
}

pub(super) fn not_allowed(why: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!("the upstream host resolves only to addresses it may not reach ({why})"),
    )
}

/// The resolved addresses the member may reach; an error naming why when the name resolved
/// only to refused ones (a name may resolve to the metadata address, internal member or not).
pub(super) fn reachable(reach: &Reach, addrs: impl Iterator<Item = SocketAddr>) -> std::io::Result<Vec<SocketAddr>> {
    let mut refused = None;
    let allowed: Vec<SocketAddr> = addrs
        .filter(|a| match reach.refusal(a.ip()) {
            Some(why) => {
                refused = Some(why);
                false
            }
            None => true,
        })
        .collect();
    if let (true, Some(why)) = (allowed.is_empty(), refused) {
        return Err(not_allowed(why));
    }
    Ok(allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().expect("a socket address")).collect()
    }

    #[test]
    fn a_name_resolving_to_the_metadata_address_is_refused_even_for_internal_members() {
        let guard = AddressGuard::new();
        for internal in [false, true] {
            let reach = Reach { guard: guard.clone(), port: 80, internal };
            let only_metadata = addrs(&["169.254.169.254:80", "[::ffff:169.254.169.254]:80", "100.100.100.200:80"]);
            let error = reachable(&reach, only_metadata.into_iter()).expect_err("metadata is never reached");
            assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
            assert!(error.to_string().contains("metadata"), "{error}");
            // Beside an address it may reach, only that one is kept.
            let mixed = addrs(&["169.254.169.254:80", "10.0.0.5:80"]);
            assert_eq!(reachable(&reach, mixed.into_iter()).expect("one allowed"), addrs(&["10.0.0.5:80"]));
        }
    }

    #[test]
    fn a_name_resolving_to_the_gateways_own_listener_is_refused() {
        let guard = AddressGuard::new();
        guard.add_listeners(&addrs(&["0.0.0.0:8080"]));
        let reach = Reach { guard, port: 8080, internal: true };
        let error = reachable(&reach, addrs(&["127.0.0.1:8080", "[::1]:8080"]).into_iter()).expect_err("own listener");
        assert!(error.to_string().contains("own listener"), "{error}");
    }
}
