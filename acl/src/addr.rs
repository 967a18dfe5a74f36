//! Remote-address patterns of `plain_acl.yml` (`globalWhiteRemoteAddresses`, an
//! account's `whiteRemoteAddress`), as Apache's `RemoteAddressStrategyFactory`:
//! blank (matches nothing), `*` / `*.*.*.*` (everything), `192.168.1.{1,2,3}` and
//! `a.b.c.d,e.f.g.h` (a set), `192.168.*.*` / `192.168.1.1-100` / `10.0-10.*.*` (an IPv4
//! range at one octet), and one exact IPv4 or IPv6 address.
//!
//! Invariants: parsing never panics and refuses what Apache refuses (an octet out of
//! 0..=255, a range whose start is past its end, an address that is not one); a pattern
//! holds at most `ACL_SET_ADDRESSES_MAX` addresses. Stricter than Apache: a range's
//! octets after the ranged one must be `*` (Apache ignores them, so `192.*.1.1` would
//! match all of 192/8), and IPv6 ranges are refused (not built).

use super::AclError;
use std::net::IpAddr;

/// Addresses one set pattern (`{..}` or comma list) may name.
pub const ACL_SET_ADDRESSES_MAX: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddrPattern {
    /// Blank: Apache's `BlankRemoteAddressStrategy`, never matches.
    Never,
    /// `*`, `*.*.*.*`, `*:*:*:*:*:*:*:*`.
    Any,
    Set(Vec<IpAddr>),
    /// IPv4: the first `head.len()` octets equal, the next within `start..=end`.
    Range { head: Vec<u8>, start: u8, end: u8 },
    One(IpAddr),
}

fn bad(pattern: &str, why: impl Into<String>) -> AclError {
    AclError::Address { pattern: pattern.to_string(), reason: why.into() }
}

fn octet(pattern: &str, text: &str) -> Result<u8, AclError> {
    text.trim().parse::<u8>().map_err(|_| bad(pattern, format!("`{text}` is not an octet 0..=255")))
}

fn address(pattern: &str, text: &str) -> Result<IpAddr, AclError> {
    text.trim().parse::<IpAddr>().map_err(|_| bad(pattern, format!("`{text}` is not an IPv4 or IPv6 address")))
}

impl AddrPattern {
    pub fn parse(pattern: &str) -> Result<Self, AclError> {
        let p = pattern.trim();
        if p.is_empty() {
            return Ok(AddrPattern::Never);
        }
        if matches!(p, "*" | "*.*.*.*" | "*:*:*:*:*:*:*:*") {
            return Ok(AddrPattern::Any);
        }
        if p.ends_with('}') {
            let open = p.find('{').ok_or_else(|| bad(pattern, "`}` without `{`"))?;
            let (prefix, list) = (&p[..open], &p[open + 1..p.len() - 1]);
            if p.contains(':') {
                return Err(bad(pattern, "IPv6 `{..}` sets are not supported"));
            }
            if prefix.split('.').filter(|s| !s.is_empty()).count() != 3 || !prefix.ends_with('.') {
                return Err(bad(pattern, "a `{..}` set completes the last octet: a.b.c.{x,y}"));
            }
            let items: Vec<&str> = list.split(',').filter(|s| !s.trim().is_empty()).collect();
            return Self::set(pattern, items.iter().map(|i| format!("{prefix}{}", i.trim())));
        }
        if p.contains(',') {
            return Self::set(pattern, p.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().to_string()));
        }
        if p.contains('*') || p.contains('-') {
            return Self::range(pattern, p);
        }
        Ok(AddrPattern::One(address(pattern, p)?))
    }

    fn set(pattern: &str, items: impl Iterator<Item = String>) -> Result<Self, AclError> {
        let mut set = Vec::new();
        for item in items {
            if set.len() >= ACL_SET_ADDRESSES_MAX {
                return Err(bad(pattern, format!("more than {ACL_SET_ADDRESSES_MAX} addresses")));
            }
            set.push(address(pattern, &item)?);
        }
        Ok(AddrPattern::Set(set))
    }

    fn range(pattern: &str, p: &str) -> Result<Self, AclError> {
        if p.contains(':') {
            return Err(bad(pattern, "IPv6 ranges are not supported"));
        }
        let parts: Vec<&str> = p.split('.').collect();
        if parts.len() != 4 {
            return Err(bad(pattern, "an IPv4 range has 4 octets"));
        }
        // Apache looks for the ranged octet at positions 1..=3, first found wins.
        let Some(index) = (1..4).find(|&i| parts[i].trim() == "*" || parts[i].contains('-')) else {
            return Err(bad(pattern, "no `*` or `a-b` octet after the first"));
        };
        let head = parts[..index].iter().map(|o| octet(pattern, o)).collect::<Result<Vec<u8>, _>>()?;
        let ranged = parts[index].trim();
        let (start, end) = if ranged == "*" {
            (0, 255)
        } else {
            let (a, b) = ranged.split_once('-').ok_or_else(|| bad(pattern, "expected a-b"))?;
            if a.trim().is_empty() {
                return Err(bad(pattern, format!("`{ranged}` has no start")));
            }
            (octet(pattern, a)?, octet(pattern, b)?)
        };
        if start > end {
            return Err(bad(pattern, format!("range start {start} is past its end {end}")));
        }
        if let Some(rest) = parts[index + 1..].iter().find(|o| o.trim() != "*") {
            return Err(bad(pattern, format!("octet `{rest}` after the ranged one must be `*`")));
        }
        Ok(AddrPattern::Range { head, start, end })
    }

    /// Whether the caller at `ip` matches (IPv4-mapped IPv6 callers as IPv4).
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match self {
            AddrPattern::Never => false,
            AddrPattern::Any => true,
            AddrPattern::Set(set) => set.iter().any(|a| a.to_canonical() == ip),
            AddrPattern::One(a) => a.to_canonical() == ip,
            AddrPattern::Range { head, start, end } => match ip {
                IpAddr::V4(v4) => {
                    let o = v4.octets();
                    o[..head.len()] == head[..] && (*start..=*end).contains(&o[head.len()])
                }
                IpAddr::V6(_) => false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pattern` parses (or not: `Err(substring of the reason)`) and then matches
    /// exactly the addresses in `yes`, none in `no`.
    fn check(pattern: &str, expected: Result<(&[&str], &[&str]), &str>) {
        match (AddrPattern::parse(pattern), expected) {
            (Ok(p), Ok((yes, no))) => {
                for a in yes {
                    assert!(p.matches(a.parse().unwrap()), "{pattern} should match {a} ({p:?})");
                }
                for a in no {
                    assert!(!p.matches(a.parse().unwrap()), "{pattern} should not match {a} ({p:?})");
                }
            }
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{pattern}: {e} lacks {want}"),
            (got, want) => panic!("{pattern}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn patterns_as_apache() {
        check("", Ok((&[], &["127.0.0.1", "::1"])));
        check("  ", Ok((&[], &["127.0.0.1"])));
        check("*", Ok((&["127.0.0.1", "10.1.2.3", "::1"], &[])));
        check("*.*.*.*", Ok((&["192.168.0.1"], &[])));
        check("192.168.0.1", Ok((&["192.168.0.1", "::ffff:192.168.0.1"], &["192.168.0.2", "::1"])));
        check("::1", Ok((&["::1", "0:0:0:0:0:0:0:1"], &["127.0.0.1"])));
        check("192.168.*.*", Ok((&["192.168.0.0", "192.168.255.9"], &["192.169.0.1", "10.168.1.1"])));
        check("192.*.*.*", Ok((&["192.0.0.1", "192.255.1.1"], &["193.0.0.1"])));
        check("192.168.1.*", Ok((&["192.168.1.0", "192.168.1.255"], &["192.168.2.1"])));
        check("192.168.1.1-100", Ok((&["192.168.1.1", "192.168.1.50", "192.168.1.100"], &["192.168.1.0", "192.168.1.101", "192.168.2.50"])));
        check("10.0-10.*.*", Ok((&["10.0.1.1", "10.10.255.255"], &["10.11.0.0", "11.5.0.0"])));
        check("192.168.1.{1,2,3}", Ok((&["192.168.1.1", "192.168.1.3"], &["192.168.1.4", "192.168.2.1"])));
        check("192.168.1.1,10.0.0.1", Ok((&["192.168.1.1", "10.0.0.1"], &["192.168.1.2"])));
        check("192.168.1.1, ::1", Ok((&["::1"], &["::2"])));
        // Refused, as Apache refuses them (its remark is "Netaddress examine ...").
        check("192.168.1.1,2,3", Err("`2` is not an IPv4 or IPv6 address"));
        check("192.168.1.256", Err("not an IPv4 or IPv6 address"));
        check("192.168.1.100-1", Err("past its end"));
        check("192.168.1.-5", Err("has no start"));
        check("192.168.1.1-300", Err("not an octet"));
        check("300.168.*.*", Err("not an octet"));
        check("192.168.*", Err("4 octets"));
        check("hostname", Err("not an IPv4 or IPv6 address"));
        check("192.168.1.{1,x}", Err("`192.168.1.x`"));
        check("192.168.{1,2}", Err("completes the last octet"));
        check("1}", Err("without `{`"));
        // Stricter than Apache: later octets of a range are `*`; no IPv6 ranges.
        check("192.*.1.1", Err("must be `*`"));
        check("fe80::*", Err("IPv6 ranges"));
        check("fe80::{1,2}", Err("IPv6"));
    }

    #[test]
    fn a_huge_set_is_refused() {
        let many: Vec<String> = (0..=ACL_SET_ADDRESSES_MAX).map(|i| format!("10.{}.{}.1", i / 256, i % 256)).collect();
        check(&many.join(","), Err("more than"));
    }
}
