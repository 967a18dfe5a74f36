//! RocketMQ 5's authentication and authorization model (Apache's `org.apache.rocketmq.auth`
//! `User`, `Acl`, `Policy`, `PolicyEntry`, `Resource`, `Environment` and the enums of
//! `common`: `Action`, `ResourceType`, `ResourcePattern`, `Decision`, `PolicyType`,
//! `UserType`, `UserStatus`), with their names and parsing as Apache's `getByName` and
//! `Resource.of` read them, and the matching `AclAuthorizationHandler` does.
//!
//! Invariants: every value here is valid by construction (a parsed resource has a type
//! and a pattern, a literal or prefixed one a non-empty name; a source IP is an address
//! or a CIDR); parsing never panics; names and lists are bounded (`*_MAX` below), so a
//! table of `USERS_MAX` users is bounded too. A password is never printed (`Debug`).

use std::net::IpAddr;

/// Longest username, bytes (Apache sets none; a name travels in every signed request).
pub const USERNAME_BYTES_MAX: usize = 256;
/// Longest password, bytes.
pub const PASSWORD_BYTES_MAX: usize = 1024;
/// Longest resource name (a topic, group or cluster name), bytes.
pub const RESOURCE_NAME_BYTES_MAX: usize = 512;
/// Source IPs (addresses or CIDRs) of one policy entry.
pub const SOURCE_IPS_PER_ENTRY_MAX: usize = 64;
/// Entries of one ACL, both policies together.
pub const POLICY_ENTRIES_MAX: usize = 1024;

/// Why a model value does not parse: Apache's wording where Apache has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub String);

fn bad(reason: impl Into<String>) -> ModelError {
    ModelError(reason.into())
}

/// Apache's enums: a name read case-insensitively (`getByName`), written as Apache's.
macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($variant,)*
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// Apache's name (`getName`).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// Apache's `getByName`: case-insensitive, surrounding blanks ignored.
            pub fn parse(text: &str) -> Option<Self> {
                let t = text.trim();
                Self::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(t))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_enum! {
    /// Apache's `UserType`: a super user passes every authorization check.
    UserType { Super = "Super", Normal = "Normal", }
}

named_enum! {
    /// Apache's `UserStatus`: a disabled user is refused at authentication.
    UserStatus { Enable = "enable", Disable = "disable", }
}

named_enum! {
    /// Apache's `Action` less `Unknown` (never stored). `Any` is what a request asks
    /// when any granted action will do; it may not appear in a policy entry.
    Action { All = "All", Any = "Any", Pub = "Pub", Sub = "Sub", Create = "Create", Update = "Update", Delete = "Delete", Get = "Get", List = "List", }
}

named_enum! {
    /// Apache's `ResourceType` less `Unknown`.
    ResourceType { Any = "Any", Cluster = "Cluster", Namespace = "Namespace", Topic = "Topic", Group = "Group", }
}

named_enum! {
    /// Apache's `ResourcePattern`.
    ResourcePattern { Any = "ANY", Literal = "LITERAL", Prefixed = "PREFIXED", }
}

named_enum! {
    /// Apache's `Decision`.
    Decision { Allow = "Allow", Deny = "Deny", }
}

named_enum! {
    /// Apache's `PolicyType`: `Custom` entries are matched first; `Default` ones only when
    /// no custom entry matches.
    PolicyType { Custom = "Custom", Default = "Default", }
}

/// One user (Apache's `User`).
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    pub username: String,
    /// Kept as given: Apache's signature check (HmacSHA1) needs the secret itself.
    pub password: String,
    pub user_type: UserType,
    pub user_status: UserStatus,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User").field("username", &self.username).field("password", &"<redacted>").field("user_type", &self.user_type).field("user_status", &self.user_status).finish()
    }
}

/// Checks a username: non-blank, at most `USERNAME_BYTES_MAX`, no `:` framing issue
/// (Apache's subject key is `User:<name>`, split at the first `:`, so a name may hold one).
pub fn check_username(name: &str) -> Result<(), ModelError> {
    if name.trim().is_empty() {
        return Err(bad("username can not be blank"));
    }
    if name.len() > USERNAME_BYTES_MAX {
        return Err(bad(format!("username of {} bytes: at most USERNAME_BYTES_MAX ({USERNAME_BYTES_MAX})", name.len())));
    }
    Ok(())
}

pub fn check_password(password: &str) -> Result<(), ModelError> {
    if password.trim().is_empty() {
        return Err(bad("password can not be blank"));
    }
    if password.len() > PASSWORD_BYTES_MAX {
        return Err(bad(format!("password of {} bytes: at most PASSWORD_BYTES_MAX ({PASSWORD_BYTES_MAX})", password.len())));
    }
    Ok(())
}

/// The subject prefix of a user (Apache's `SubjectType.USER` and `getSubjectKey`).
pub const USER_SUBJECT_PREFIX: &str = "User";

/// The username of a subject key `User:<name>` (Apache's `Subject.of`: the type before
/// the first `:`, case-insensitive; the only subject type is `User`).
pub fn parse_subject(key: &str) -> Result<String, ModelError> {
    let key = key.trim();
    let Some((kind, name)) = key.split_once(':') else {
        return Err(bad(format!("subject `{key}`: expected User:<username>")));
    };
    if !kind.eq_ignore_ascii_case(USER_SUBJECT_PREFIX) {
        return Err(bad(format!("subject `{key}`: the subject type is `User` (User:<username>)")));
    }
    check_username(name)?;
    Ok(name.to_string())
}

pub fn subject_key(username: &str) -> String {
    format!("{USER_SUBJECT_PREFIX}:{username}")
}

/// A policy entry's resource (Apache's `Resource`): a type, a pattern and, for a literal
/// or prefixed pattern, a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    pub resource_type: ResourceType,
    pub pattern: ResourcePattern,
    /// `None` for the `ANY` pattern; non-empty otherwise.
    pub name: Option<String>,
}

impl Resource {
    /// Apache's `Resource.of(resourceKey)`: `*` (anything), `Type:*` (any of a type),
    /// `Type:prefix*` (the part before the first `*` is the prefix), `Type:name`.
    /// Stricter than Apache, which yields null (and later a null-pointer error) for
    /// these: an unknown type, a missing `:` and an empty name are refused by name.
    pub fn parse(key: &str) -> Result<Self, ModelError> {
        let key = key.trim();
        if key.is_empty() {
            return Err(bad("The resource is null."));
        }
        if key == "*" {
            return Ok(Resource { resource_type: ResourceType::Any, pattern: ResourcePattern::Any, name: None });
        }
        let Some((kind, name)) = key.split_once(':') else {
            return Err(bad(format!("resource `{key}`: expected *, or Type:name, Type:prefix* or Type:* (types: Cluster, Namespace, Topic, Group)")));
        };
        let resource_type = match ResourceType::parse(kind) {
            Some(ResourceType::Any) | None => return Err(bad(format!("resource `{key}`: unknown type `{kind}` (types: Cluster, Namespace, Topic, Group)"))),
            Some(t) => t,
        };
        if name == "*" {
            return Ok(Resource { resource_type, pattern: ResourcePattern::Any, name: None });
        }
        let (pattern, name) = match name.split_once('*') {
            Some((prefix, _)) if name.ends_with('*') => (ResourcePattern::Prefixed, prefix),
            _ => (ResourcePattern::Literal, name),
        };
        if name.is_empty() {
            return Err(bad(format!("resource `{key}`: the name is empty")));
        }
        if name.len() > RESOURCE_NAME_BYTES_MAX {
            return Err(bad(format!("resource `{key}`: a name of at most RESOURCE_NAME_BYTES_MAX ({RESOURCE_NAME_BYTES_MAX}) bytes")));
        }
        Ok(Resource { resource_type, pattern, name: Some(name.to_string()) })
    }

    /// Apache's `getResourceKey`.
    pub fn key(&self) -> String {
        if self.resource_type == ResourceType::Any {
            return "*".into();
        }
        let name = self.name.as_deref().unwrap_or_default();
        match self.pattern {
            ResourcePattern::Any => format!("{}:*", self.resource_type),
            ResourcePattern::Literal => format!("{}:{name}", self.resource_type),
            ResourcePattern::Prefixed => format!("{}:{name}*", self.resource_type),
        }
    }

    /// Apache's `Resource.isMatch` of this (an entry's) resource against a request's.
    pub fn matches(&self, kind: ResourceType, name: &str) -> bool {
        if self.resource_type == ResourceType::Any {
            return true;
        }
        if self.resource_type != kind {
            return false;
        }
        match self.pattern {
            ResourcePattern::Any => true,
            ResourcePattern::Literal => self.name.as_deref() == Some(name),
            ResourcePattern::Prefixed => self.name.as_deref().is_some_and(|p| name.starts_with(p)),
        }
    }

    /// How specific this resource is, most specific first (Apache's
    /// `comparePolicyEntries`): a literal, then prefixes longest first, then a type's
    /// `*`, then `*` itself.
    fn specificity(&self) -> (u8, std::cmp::Reverse<usize>) {
        if self.resource_type == ResourceType::Any {
            return (3, std::cmp::Reverse(0));
        }
        match self.pattern {
            ResourcePattern::Literal => (0, std::cmp::Reverse(0)),
            ResourcePattern::Prefixed => (1, std::cmp::Reverse(self.name.as_ref().map_or(0, String::len))),
            ResourcePattern::Any => (2, std::cmp::Reverse(0)),
        }
    }
}

/// A source IP of a policy entry: an address or a CIDR (Apache's `IPAddressUtils`),
/// kept as written for display.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceIp {
    pub text: String,
    net: IpAddr,
    /// Prefix length; the full length for a single address.
    prefix: u8,
}

impl SourceIp {
    /// Apache's `isValidIPOrCidr`: `a.b.c.d`, an IPv6 address, or either `/prefix`.
    pub fn parse(text: &str) -> Result<Self, ModelError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(bad("The source ip is empty."));
        }
        let invalid = || bad(format!("The source ip is invalid: `{t}` (an IPv4 or IPv6 address, or a CIDR such as 10.0.0.0/8)"));
        let (addr, prefix) = match t.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (t, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| invalid())?;
        let full = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => full,
            Some(p) => match p.parse::<u8>() {
                Ok(p) if p <= full => p,
                _ => return Err(invalid()),
            },
        };
        Ok(SourceIp { text: t.to_string(), net, prefix })
    }

    /// Whether `ip` is this address or inside this CIDR (IPv4-mapped IPv6 callers as
    /// IPv4, so a dual-stack listener's callers match IPv4 entries).
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let net = self.net.to_canonical();
        match (net, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                let p = self.prefix.min(32) as u32;
                let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
                (u32::from(n) & mask) == (u32::from(i) & mask)
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => {
                let p = self.prefix.min(128) as u32;
                let mask = if p == 0 { 0 } else { u128::MAX << (128 - p) };
                (u128::from(n) & mask) == (u128::from(i) & mask)
            }
            _ => false,
        }
    }
}

/// One entry of a policy (Apache's `PolicyEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEntry {
    pub resource: Resource,
    /// Non-empty, without `Any`, no repeats.
    pub actions: Vec<Action>,
    /// Empty: from anywhere.
    pub source_ips: Vec<SourceIp>,
    pub decision: Decision,
}

impl PolicyEntry {
    /// Apache's `isMatchAction`: a request asking `Any` matches any entry; otherwise one
    /// of the asked actions is granted, or the entry grants `All`.
    pub fn matches_actions(&self, asked: &[Action]) -> bool {
        if self.actions.is_empty() {
            return false;
        }
        if asked.contains(&Action::Any) {
            return true;
        }
        asked.iter().any(|a| self.actions.contains(a) || self.actions.contains(&Action::All))
    }

    /// Apache's `isMatchEnvironment`: no source IPs match every caller; otherwise the
    /// caller's address must be one of them (an unknown caller matches none).
    pub fn matches_source(&self, ip: Option<IpAddr>) -> bool {
        if self.source_ips.is_empty() {
            return true;
        }
        ip.is_some_and(|ip| self.source_ips.iter().any(|s| s.matches(ip)))
    }

    /// Apache's entry order: the more specific resource first; at the same specificity
    /// `Deny` before `Allow` (see `acl_decision` for why this departs from Apache's code).
    pub fn order_key(&self) -> impl Ord {
        (self.resource.specificity(), self.decision != Decision::Deny)
    }
}

/// One policy of an ACL (Apache's `Policy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub policy_type: PolicyType,
    pub entries: Vec<PolicyEntry>,
}

impl Policy {
    /// Apache's `Policy.updateEntry`: an entry for a resource already present replaces
    /// its actions, source IPs and decision; others are added.
    pub fn update_entries(&mut self, entries: Vec<PolicyEntry>) {
        for entry in entries {
            match self.entries.iter_mut().find(|e| e.resource == entry.resource) {
                Some(old) => *old = entry,
                None => self.entries.push(entry),
            }
        }
    }
}

/// One subject's ACL (Apache's `Acl`); the subject is always a user here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    pub username: String,
    /// At most one policy of each type.
    pub policies: Vec<Policy>,
}

impl Acl {
    pub fn policy(&self, policy_type: PolicyType) -> Option<&Policy> {
        self.policies.iter().find(|p| p.policy_type == policy_type)
    }

    pub fn entry_count(&self) -> usize {
        self.policies.iter().map(|p| p.entries.len()).sum()
    }

    /// Apache's `Acl.updatePolicy`: a policy of a type already present merges its
    /// entries (`Policy::update_entries`); a new type is added.
    pub fn update_policies(&mut self, policies: Vec<Policy>) {
        for policy in policies {
            match self.policies.iter_mut().find(|p| p.policy_type == policy.policy_type) {
                Some(old) => old.update_entries(policy.entries),
                None => self.policies.push(policy),
            }
        }
    }

    /// Apache's `Acl.deletePolicy`: removes the entry for `resource` from the policy of
    /// `policy_type`; a policy left empty goes too.
    pub fn delete_entry(&mut self, policy_type: PolicyType, resource: &Resource) {
        if let Some(policy) = self.policies.iter_mut().find(|p| p.policy_type == policy_type) {
            policy.entries.retain(|e| &e.resource != resource);
        }
        self.policies.retain(|p| !p.entries.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `key` parses to (type, pattern, name) and prints back as `printed`, or is refused
    /// with a reason containing the given text.
    fn check(key: &str, expected: Result<(ResourceType, ResourcePattern, Option<&str>, &str), &str>) {
        match (Resource::parse(key), expected) {
            (Ok(r), Ok((t, p, n, printed))) => {
                assert_eq!((r.resource_type, r.pattern, r.name.as_deref()), (t, p, n), "{key}");
                assert_eq!(r.key(), printed, "{key}");
                assert_eq!(Resource::parse(&r.key()).as_ref(), Ok(&r), "{key} round-trips");
            }
            (Err(e), Err(want)) => assert!(e.0.contains(want), "{key}: {e} lacks {want}"),
            (got, want) => panic!("{key}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn resources_parse_as_apache() {
        use ResourcePattern as P;
        use ResourceType as T;
        check("*", Ok((T::Any, P::Any, None, "*")));
        check("Topic:*", Ok((T::Topic, P::Any, None, "Topic:*")));
        check("topic:orders", Ok((T::Topic, P::Literal, Some("orders"), "Topic:orders")));
        check("Topic:abc*", Ok((T::Topic, P::Prefixed, Some("abc"), "Topic:abc*")));
        // Apache's substringBefore: the prefix ends at the first `*`.
        check("Topic:a*b*", Ok((T::Topic, P::Prefixed, Some("a"), "Topic:a*")));
        check("Topic:a*b", Ok((T::Topic, P::Literal, Some("a*b"), "Topic:a*b")));
        check("GROUP:g1", Ok((T::Group, P::Literal, Some("g1"), "Group:g1")));
        check("Cluster:DefaultCluster", Ok((T::Cluster, P::Literal, Some("DefaultCluster"), "Cluster:DefaultCluster")));
        check("Namespace:ns", Ok((T::Namespace, P::Literal, Some("ns"), "Namespace:ns")));
        check(" Topic:t ", Ok((T::Topic, P::Literal, Some("t"), "Topic:t")));
        check("", Err("The resource is null."));
        check("Topic", Err("expected *"));
        check("Queue:q", Err("unknown type `Queue`"));
        check("Any:x", Err("unknown type `Any`"));
        check("Topic:", Err("the name is empty"));
        check(&format!("Topic:{}", "x".repeat(RESOURCE_NAME_BYTES_MAX + 1)), Err("RESOURCE_NAME_BYTES_MAX"));
    }

    #[test]
    fn resource_matching_as_apache() {
        let check = |entry: &str, kind: ResourceType, name: &str, expected: bool| {
            assert_eq!(Resource::parse(entry).unwrap().matches(kind, name), expected, "{entry} vs {kind}:{name}");
        };
        check("*", ResourceType::Group, "g", true);
        check("Topic:*", ResourceType::Topic, "anything", true);
        check("Topic:*", ResourceType::Group, "anything", false);
        check("Topic:abc*", ResourceType::Topic, "abc", true);
        check("Topic:abc*", ResourceType::Topic, "abcdef", true);
        check("Topic:abc*", ResourceType::Topic, "ab", false);
        check("Topic:abc", ResourceType::Topic, "abc", true);
        check("Topic:abc", ResourceType::Topic, "abcd", false);
        check("Group:abc", ResourceType::Topic, "abc", false);
    }

    #[test]
    fn source_ips_as_apache() {
        // check(entry, caller, expected) / check_err(entry)
        let check = |entry: &str, caller: &str, expected: bool| {
            assert_eq!(SourceIp::parse(entry).unwrap().matches(caller.parse().unwrap()), expected, "{entry} vs {caller}");
        };
        check("192.168.1.1", "192.168.1.1", true);
        check("192.168.1.1", "::ffff:192.168.1.1", true);
        check("192.168.1.1", "192.168.1.2", false);
        check("192.168.0.0/16", "192.168.200.7", true);
        check("192.168.0.0/16", "192.169.0.1", false);
        check("10.1.2.3/8", "10.200.0.1", true);
        check("0.0.0.0/0", "8.8.8.8", true);
        check("0.0.0.0/0", "::1", false);
        check("::1", "::1", true);
        check("fe80::/10", "fe80::1", true);
        check("fe80::/10", "fec0::1", false);
        for bad in ["", "  ", "host", "1.2.3.4/33", "::1/129", "1.2.3/8", "1.2.3.4/-1", "1.2.3.4/x"] {
            assert!(SourceIp::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn names_parse_case_insensitively() {
        assert_eq!(Action::parse("pub"), Some(Action::Pub));
        assert_eq!(Action::parse(" ALL "), Some(Action::All));
        assert_eq!(Action::parse("Publish"), None);
        assert_eq!(UserType::parse("super"), Some(UserType::Super));
        assert_eq!(UserStatus::parse("DISABLE"), Some(UserStatus::Disable));
        assert_eq!(UserStatus::Enable.name(), "enable");
        assert_eq!(Decision::parse("deny"), Some(Decision::Deny));
        assert_eq!(PolicyType::parse("default"), Some(PolicyType::Default));
        assert_eq!(parse_subject("User:alice"), Ok("alice".into()));
        assert_eq!(parse_subject("user:a:b"), Ok("a:b".into()));
        assert!(parse_subject("alice").is_err());
        assert!(parse_subject("Role:x").is_err());
        assert!(parse_subject("User: ").is_err());
    }

    #[test]
    fn passwords_are_never_printed() {
        let u = User { username: "alice".into(), password: "s3cret-value".into(), user_type: UserType::Normal, user_status: UserStatus::Enable };
        assert!(!format!("{u:?}").contains("s3cret"));
    }
}
