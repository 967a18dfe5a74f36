//! `plain_acl.yml`, Apache RocketMQ 4.x's plain ACL file (`PlainPermissionManager.load`):
//! `globalWhiteRemoteAddresses` (a list of address patterns) and `accounts`, each with
//! `accessKey`, `secretKey`, `whiteRemoteAddress`, `admin`, `defaultTopicPerm`,
//! `defaultGroupPerm`, `topicPerms` and `groupPerms` (`name=PERM` lines); `dataVersion`
//! is accepted and ignored. An empty file is no accounts (as Apache).
//!
//! Invariants: parsing never panics; the text is at most `ACL_FILE_BYTES_MAX`, at most
//! `ACL_ACCOUNTS_MAX` accounts, `ACL_WHITE_ADDRESSES_MAX` global patterns and
//! `ACL_RESOURCES_PER_ACCOUNT_MAX` topic + group lines per account; keys are checked as
//! Apache's `checkPlainAccessConfig` (longer than 6 characters). Stricter than Apache,
//! so a mistake is pointed at rather than guessed about: an unknown key is refused by
//! name, and so is an access key given twice (Apache keeps the last).

use super::addr::AddrPattern;
use super::{parse_perm, Account, AclError, AclRules};
use serde_yaml::Value;
use std::collections::HashMap;

/// Largest `plain_acl.yml` read, bytes.
pub const ACL_FILE_BYTES_MAX: u64 = 1024 * 1024;
/// Accounts one file may hold.
pub const ACL_ACCOUNTS_MAX: usize = 1000;
/// `globalWhiteRemoteAddresses` entries.
pub const ACL_WHITE_ADDRESSES_MAX: usize = 1000;
/// `topicPerms` plus `groupPerms` lines of one account.
pub const ACL_RESOURCES_PER_ACCOUNT_MAX: usize = 10_000;
/// Apache's `ACCESS_KEY_MIN_LENGTH` / `SECRET_KEY_MIN_LENGTH` (6): a key must be longer.
pub const ACL_KEY_CHARS_MIN: usize = 7;

const TOP_KEYS: &[&str] = &["globalWhiteRemoteAddresses", "accounts", "dataVersion"];
const ACCOUNT_KEYS: &[&str] = &["accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm", "topicPerms", "groupPerms"];

fn bad(reason: impl Into<String>) -> AclError {
    AclError::File(reason.into())
}

/// A scalar as Java's fastjson would read it into a `String` field (numbers and
/// booleans spelt out); `None` for null or absent.
fn scalar(v: Option<&Value>, what: &str) -> Result<Option<String>, AclError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::Bool(b)) => Ok(Some(b.to_string())),
        Some(_) => Err(bad(format!("{what} must be a string"))),
    }
}

fn list<'a>(v: Option<&'a Value>, what: &str) -> Result<&'a [Value], AclError> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Sequence(s)) => Ok(s),
        Some(_) => Err(bad(format!("{what} must be a list"))),
    }
}

fn check_keys(map: &serde_yaml::Mapping, known: &[&str], what: &str) -> Result<(), AclError> {
    for key in map.keys() {
        let name = key.as_str().unwrap_or("<not a string>");
        if !known.contains(&name) {
            return Err(bad(format!("{what}: unknown key `{name}` (known: {})", known.join(", "))));
        }
    }
    Ok(())
}

/// Parses the text of a `plain_acl.yml`.
pub fn parse(text: &[u8]) -> Result<AclRules, AclError> {
    if text.len() as u64 > ACL_FILE_BYTES_MAX {
        return Err(bad(format!("{} bytes, more than ACL_FILE_BYTES_MAX ({ACL_FILE_BYTES_MAX})", text.len())));
    }
    let text = std::str::from_utf8(text).map_err(|e| bad(format!("not UTF-8: {e}")))?;
    if text.trim().is_empty() {
        return Ok(AclRules::default());
    }
    let doc: Value = serde_yaml::from_str(text).map_err(|e| bad(format!("not YAML: {e}")))?;
    let top = match &doc {
        Value::Null => return Ok(AclRules::default()),
        Value::Mapping(m) => m,
        _ => return Err(bad("the file must be a mapping (globalWhiteRemoteAddresses, accounts)")),
    };
    check_keys(top, TOP_KEYS, "top level")?;
    let mut rules = AclRules::default();
    let globals = list(top.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")?;
    if globals.len() > ACL_WHITE_ADDRESSES_MAX {
        return Err(bad(format!("{} globalWhiteRemoteAddresses, more than ACL_WHITE_ADDRESSES_MAX ({ACL_WHITE_ADDRESSES_MAX})", globals.len())));
    }
    for g in globals {
        let text = scalar(Some(g), "a globalWhiteRemoteAddresses entry")?.unwrap_or_default();
        rules.global_white.push(AddrPattern::parse(&text)?);
    }
    let accounts = list(top.get("accounts"), "accounts")?;
    if accounts.len() > ACL_ACCOUNTS_MAX {
        return Err(bad(format!("{} accounts, more than ACL_ACCOUNTS_MAX ({ACL_ACCOUNTS_MAX})", accounts.len())));
    }
    for (i, a) in accounts.iter().enumerate() {
        let what = format!("account {}", i + 1);
        let Value::Mapping(m) = a else { return Err(bad(format!("{what} must be a mapping"))) };
        check_keys(m, ACCOUNT_KEYS, &what)?;
        let account = parse_account(m, &what)?;
        if rules.accounts.contains_key(&account.access_key) {
            return Err(bad(format!("{what}: accessKey {} is given twice", account.access_key)));
        }
        rules.accounts.insert(account.access_key.clone(), account);
    }
    Ok(rules)
}

fn parse_account(m: &serde_yaml::Mapping, what: &str) -> Result<Account, AclError> {
    let access_key = scalar(m.get("accessKey"), &format!("{what}: accessKey"))?.unwrap_or_default();
    let secret_key = scalar(m.get("secretKey"), &format!("{what}: secretKey"))?.unwrap_or_default();
    if access_key.chars().count() < ACL_KEY_CHARS_MIN || secret_key.chars().count() < ACL_KEY_CHARS_MIN {
        // Apache's remark, less the secret.
        return Err(bad(format!("{what}: the accessKey={access_key} and secretKey cannot be null and length should longer than 6")));
    }
    let white = AddrPattern::parse(&scalar(m.get("whiteRemoteAddress"), &format!("{what}: whiteRemoteAddress"))?.unwrap_or_default())
        .map_err(|e| bad(format!("{what} ({access_key}): {e}")))?;
    let admin = match m.get("admin") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
        Some(_) => return Err(bad(format!("{what} ({access_key}): admin must be true or false"))),
    };
    let default_topic_perm = parse_perm(scalar(m.get("defaultTopicPerm"), what)?.as_deref());
    let default_group_perm = parse_perm(scalar(m.get("defaultGroupPerm"), what)?.as_deref());
    let topic_lines = list(m.get("topicPerms"), &format!("{what}: topicPerms"))?;
    let group_lines = list(m.get("groupPerms"), &format!("{what}: groupPerms"))?;
    if topic_lines.len() + group_lines.len() > ACL_RESOURCES_PER_ACCOUNT_MAX {
        return Err(bad(format!("{what} ({access_key}): more than ACL_RESOURCES_PER_ACCOUNT_MAX ({ACL_RESOURCES_PER_ACCOUNT_MAX}) topic and group permissions")));
    }
    let resources = |lines: &[Value], kind: &str| -> Result<HashMap<String, u8>, AclError> {
        let mut out = HashMap::new();
        for line in lines {
            let text = scalar(Some(line), &format!("{what}: a {kind} permission"))?.unwrap_or_default();
            // Java's StringUtils.split(resource, "="): empty pieces dropped, exactly two.
            let items: Vec<&str> = text.split('=').filter(|s| !s.is_empty()).collect();
            let [name, perm] = items[..] else {
                return Err(bad(format!("{what} ({access_key}): Parse resource permission failed for {kind}:{text}")));
            };
            out.insert(name.trim().to_string(), parse_perm(Some(perm)));
        }
        Ok(out)
    };
    Ok(Account {
        topic_perms: resources(topic_lines, "topic")?,
        group_perms: resources(group_lines, "group")?,
        access_key,
        secret_key,
        white,
        admin,
        default_topic_perm,
        default_group_perm,
    })
}
