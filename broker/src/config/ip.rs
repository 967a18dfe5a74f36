//! Which addresses the broker uses: the IPv4 address it advertises to NameServers
//! and encodes in offsetMsgIds (`broker_ip`, else one discovered from the host's
//! interfaces), and the address it listens on.
//!
//! Invariant: a discovered address belongs to an interface that is up and is neither
//! loopback, link-local nor unspecified (other hosts must reach it); 127.0.0.1 is
//! advertised only when the host has no such address.
//! Invariant: discovery reads the interface list once per call and frees it before
//! returning; no pointer into it outlives the call.

use super::BrokerConfig;
use std::net::{IpAddr, Ipv4Addr};

impl BrokerConfig {
    /// The address to advertise: `broker_ip`, else the first non-loopback IPv4 address
    /// of an interface that is up, else 127.0.0.1.
    pub fn advertised_ip(&self) -> Ipv4Addr {
        self.broker_ip
            .as_deref()
            .and_then(|ip| ip.parse().ok())
            .or_else(first_non_loopback_ipv4)
            .unwrap_or(Ipv4Addr::LOCALHOST)
    }

    /// The address the broker listens on: every interface, as RocketMQ's broker does.
    pub fn listen_ip(&self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

/// The first IPv4 address of an interface that is up and neither loopback nor
/// link-local (169.254/16 is not reachable from other hosts reliably).
fn first_non_loopback_ipv4() -> Option<Ipv4Addr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we free below; on failure it
    // returns -1 and we read nothing.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cursor = list;
    while !cursor.is_null() && found.is_none() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*cursor };
        cursor = entry.ifa_next;
        let up = entry.ifa_flags & libc::IFF_UP as libc::c_uint != 0;
        if !up || entry.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr of the family it names.
        if unsafe { (*entry.ifa_addr).sa_family } as i32 != libc::AF_INET {
            continue;
        }
        // SAFETY: the family is AF_INET, so the address is a sockaddr_in.
        let addr = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in) };
        let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
        if !ip.is_loopback() && !ip.is_link_local() && !ip.is_unspecified() {
            found = Some(ip);
        }
    }
    // SAFETY: frees the list getifaddrs allocated, once; no reference into it survives.
    unsafe { libc::freeifaddrs(list) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::with;

    #[test]
    fn advertised_ip_prefers_the_configured_one() {
        assert_eq!(with(|c| c.broker_ip = Some("10.1.2.3".into())).advertised_ip(), Ipv4Addr::new(10, 1, 2, 3));
        let picked = BrokerConfig::default().advertised_ip();
        assert!(!picked.is_link_local() && !picked.is_unspecified(), "{picked}");
        assert!(!picked.is_loopback() || first_non_loopback_ipv4().is_none(), "{picked}");
    }
}
