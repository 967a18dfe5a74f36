//! The JSON bodies of the AUTH_* request codes, as Apache's remoting classes and fastjson
//! write them: `UserInfo` (`username`, `password`, `userType`, `userStatus`), `AclInfo`
//! (`subject`, `policies`), `PolicyInfo` (`policyType`, `entries`) and `PolicyEntryInfo`
//! (`resource`, `actions`, `sourceIps`, `decision`), and their conversion to the model
//! as Apache's `UserConverter` / `AclConverter` and the metadata managers' `validate` do.
//!
//! Invariants: decoding never panics and reads at most `AUTH_BODY_BYTES_MAX` bytes;
//! absent and null fields are the same (fastjson omits nulls); fields are written in
//! fastjson's order (sorted by name) with nulls left out; an unknown field is ignored
//! (fastjson's binding). A converted value is valid (`model.rs`) or refused with why.

use super::model::{self, Acl, Action, Decision, ModelError, Policy, PolicyEntry, PolicyType, Resource, SourceIp, User, UserStatus, UserType};
use serde::{Deserialize, Deserializer, Serialize};

/// Largest AUTH_* request or answer body read, bytes.
pub const AUTH_BODY_BYTES_MAX: usize = 4 << 20;

/// Apache's `UserInfo`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

impl std::fmt::Debug for UserInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserInfo").field("username", &self.username).field("password", &self.password.as_ref().map(|_| "<redacted>")).field("user_type", &self.user_type).field("user_status", &self.user_status).finish()
    }
}

/// Apache's `AclInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AclInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<PolicyInfo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// Apache's `AclInfo.PolicyInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<PolicyEntryInfo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_type: Option<String>,
}

/// Apache's `AclInfo.PolicyEntryInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEntryInfo {
    /// A list, or (as rocketmq-client-rust also accepts) one comma-separated string.
    #[serde(default, deserialize_with = "list_or_csv", skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default, deserialize_with = "list_or_csv", skip_serializing_if = "Option::is_none")]
    pub source_ips: Option<Vec<String>>,
}

fn list_or_csv<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrCsv {
        List(Vec<String>),
        Csv(String),
    }
    Ok(match Option::<ListOrCsv>::deserialize(d)? {
        None => None,
        Some(ListOrCsv::List(l)) => Some(l),
        Some(ListOrCsv::Csv(s)) => Some(s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()),
    })
}

/// Why a body is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InfoError {
    #[error("body of {0} bytes: at most AUTH_BODY_BYTES_MAX ({AUTH_BODY_BYTES_MAX})")]
    TooLarge(usize),
    #[error("body is not a {what} JSON document: {reason}")]
    Json { what: &'static str, reason: String },
    #[error("{0}")]
    Invalid(#[from] ModelError),
}

fn decode<'a, T: Deserialize<'a>>(body: &'a [u8], what: &'static str) -> Result<T, InfoError> {
    if body.len() > AUTH_BODY_BYTES_MAX {
        return Err(InfoError::TooLarge(body.len()));
    }
    serde_json::from_slice(body).map_err(|e| InfoError::Json { what, reason: e.to_string() })
}

impl UserInfo {
    pub fn decode(body: &[u8]) -> Result<Self, InfoError> {
        decode(body, "UserInfo")
    }
    pub fn decode_list(body: &[u8]) -> Result<Vec<Self>, InfoError> {
        decode(body, "UserInfo list")
    }

    /// Apache's `UserConverter.convertUser(User)`.
    pub fn of(user: &User) -> Self {
        UserInfo {
            username: Some(user.username.clone()),
            password: Some(user.password.clone()),
            user_type: Some(user.user_type.name().into()),
            user_status: Some(user.user_status.name().into()),
        }
    }

    /// The user type named, if any. Stricter than Apache (whose `getByName` makes an
    /// unknown name "not given"): an unknown name is refused.
    pub fn parsed_type(&self) -> Result<Option<UserType>, ModelError> {
        named(self.user_type.as_deref(), UserType::parse, "userType", "Super, Normal")
    }

    pub fn parsed_status(&self) -> Result<Option<UserStatus>, ModelError> {
        named(self.user_status.as_deref(), UserStatus::parse, "userStatus", "enable, disable")
    }

    /// A user to create from this body (Apache's `createUser`: username and password
    /// required; type Normal and status enable unless given).
    pub fn to_new_user(&self) -> Result<User, ModelError> {
        let username = self.username.clone().unwrap_or_default();
        model::check_username(&username)?;
        let password = self.password.clone().unwrap_or_default();
        model::check_password(&password)?;
        Ok(User {
            username,
            password,
            user_type: self.parsed_type()?.unwrap_or(UserType::Normal),
            user_status: self.parsed_status()?.unwrap_or(UserStatus::Enable),
        })
    }
}

/// A blank or absent name is "not given" (`None`); a name not among `known` is refused.
fn named<T>(text: Option<&str>, parse: fn(&str) -> Option<T>, field: &str, known: &str) -> Result<Option<T>, ModelError> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => parse(t).map(Some).ok_or_else(|| ModelError(format!("{field} `{t}` is unknown (known: {known})"))),
    }
}

impl AclInfo {
    pub fn decode(body: &[u8]) -> Result<Self, InfoError> {
        decode(body, "AclInfo")
    }
    pub fn decode_list(body: &[u8]) -> Result<Vec<Self>, InfoError> {
        decode(body, "AclInfo list")
    }

    /// Apache's `AclConverter.convertAcl(Acl)`.
    pub fn of(acl: &Acl) -> Self {
        AclInfo {
            subject: Some(model::subject_key(&acl.username)),
            policies: Some(
                acl.policies
                    .iter()
                    .map(|p| PolicyInfo {
                        policy_type: Some(p.policy_type.name().into()),
                        entries: Some(
                            p.entries
                                .iter()
                                .map(|e| PolicyEntryInfo {
                                    resource: Some(e.resource.key()),
                                    actions: Some(e.actions.iter().map(|a| a.name().to_string()).collect()),
                                    source_ips: (!e.source_ips.is_empty()).then(|| e.source_ips.iter().map(|s| s.text.clone()).collect()),
                                    decision: Some(e.decision.name().into()),
                                })
                                .collect(),
                        ),
                    })
                    .collect(),
            ),
        }
    }

    /// The ACL this body describes (Apache's `AclConverter.convertAcl(AclInfo)` and
    /// `AuthorizationMetadataManagerImpl.validate`); `header_subject` is the request
    /// header's, used when the body names none (as Apache). A policy without a type is
    /// `Custom`; policies of one type in one body merge.
    pub fn to_acl(&self, header_subject: Option<&str>) -> Result<Acl, ModelError> {
        let subject = self.subject.as_deref().filter(|s| !s.trim().is_empty()).or(header_subject).unwrap_or_default();
        let username = model::parse_subject(subject)?;
        let infos = self.policies.as_deref().unwrap_or_default();
        if infos.is_empty() {
            return Err(ModelError("The policies is empty.".into()));
        }
        let mut acl = Acl { username, policies: Vec::new() };
        for info in infos {
            let policy_type = named(info.policy_type.as_deref(), PolicyType::parse, "policyType", "Custom, Default")?.unwrap_or(PolicyType::Custom);
            let entry_infos = info.entries.as_deref().unwrap_or_default();
            if entry_infos.is_empty() {
                return Err(ModelError("The policy entries is empty.".into()));
            }
            if entry_infos.len() > model::POLICY_ENTRIES_MAX {
                return Err(ModelError(format!("{} policy entries: at most POLICY_ENTRIES_MAX ({})", entry_infos.len(), model::POLICY_ENTRIES_MAX)));
            }
            let entries = entry_infos.iter().map(PolicyEntryInfo::to_entry).collect::<Result<Vec<_>, _>>()?;
            acl.update_policies(vec![Policy { policy_type, entries }]);
            if acl.entry_count() > model::POLICY_ENTRIES_MAX {
                return Err(ModelError(format!("more than POLICY_ENTRIES_MAX ({}) policy entries", model::POLICY_ENTRIES_MAX)));
            }
        }
        Ok(acl)
    }
}

impl PolicyEntryInfo {
    /// Apache's entry validation: a resource, actions (not `Any`), valid source IPs, a
    /// decision. Stricter than Apache (which drops unknown action names silently): an
    /// unknown action is refused by name.
    pub fn to_entry(&self) -> Result<PolicyEntry, ModelError> {
        let resource = Resource::parse(self.resource.as_deref().unwrap_or_default())?;
        let mut actions = Vec::new();
        for name in self.actions.as_deref().unwrap_or_default() {
            let action = Action::parse(name).ok_or_else(|| ModelError(format!("action `{name}` is unknown (known: All, Pub, Sub, Create, Update, Delete, Get, List)")))?;
            if action == Action::Any {
                return Err(ModelError("The actions can not be Any.".into()));
            }
            if !actions.contains(&action) {
                actions.push(action);
            }
        }
        if actions.is_empty() {
            return Err(ModelError("The actions is empty.".into()));
        }
        let ips = self.source_ips.as_deref().unwrap_or_default();
        if ips.len() > model::SOURCE_IPS_PER_ENTRY_MAX {
            return Err(ModelError(format!("{} source IPs: at most SOURCE_IPS_PER_ENTRY_MAX ({})", ips.len(), model::SOURCE_IPS_PER_ENTRY_MAX)));
        }
        let source_ips = ips.iter().map(|ip| SourceIp::parse(ip)).collect::<Result<Vec<_>, _>>()?;
        let decision = named(self.decision.as_deref(), Decision::parse, "decision", "Allow, Deny")?.ok_or_else(|| ModelError("The decision is null or illegal.".into()))?;
        Ok(PolicyEntry { resource, actions, source_ips, decision })
    }
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Plain structs of strings and lists: serializing them cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ACL body converts to the model, or is refused with a reason containing `want`.
    fn check_acl(body: &str, header: Option<&str>, expected: Result<&str, &str>) {
        let got = AclInfo::decode(body.as_bytes()).map_err(|e| e.to_string()).and_then(|i| i.to_acl(header).map_err(|e| e.to_string()));
        match (got, expected) {
            // The converted ACL, written back, is compared as JSON text.
            (Ok(acl), Ok(want)) => {
                let back = String::from_utf8(encode(&AclInfo::of(&acl))).unwrap();
                assert_eq!(back, want, "{body}");
            }
            (Err(e), Err(want)) => assert!(e.contains(want), "{body}: {e} lacks {want}"),
            (got, want) => panic!("{body}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn acl_bodies_convert_as_apache() {
        check_acl(
            r#"{"subject":"User:alice","policies":[{"entries":[{"resource":"Topic:t1","actions":["Pub","sub"],"sourceIps":["10.0.0.0/8"],"decision":"Allow"}]}]}"#,
            None,
            Ok(r#"{"policies":[{"entries":[{"actions":["Pub","Sub"],"decision":"Allow","resource":"Topic:t1","sourceIps":["10.0.0.0/8"]}],"policyType":"Custom"}],"subject":"User:alice"}"#),
        );
        // The header's subject when the body has none; actions as one string; no IPs.
        check_acl(
            r#"{"policies":[{"policyType":"Default","entries":[{"resource":"*","actions":"Pub, Get","decision":"deny"}]}]}"#,
            Some("User:bob"),
            Ok(r#"{"policies":[{"entries":[{"actions":["Pub","Get"],"decision":"Deny","resource":"*"}],"policyType":"Default"}],"subject":"User:bob"}"#),
        );
        // Two custom policies in one body merge; a repeated resource takes the later entry.
        check_acl(
            r#"{"subject":"User:a","policies":[{"entries":[{"resource":"Topic:x","actions":["Pub"],"decision":"Allow"}]},{"policyType":"Custom","entries":[{"resource":"Topic:x","actions":["Sub"],"decision":"Deny"}]}]}"#,
            None,
            Ok(r#"{"policies":[{"entries":[{"actions":["Sub"],"decision":"Deny","resource":"Topic:x"}],"policyType":"Custom"}],"subject":"User:a"}"#),
        );
        check_acl(r#"{"subject":"User:a"}"#, None, Err("The policies is empty."));
        check_acl(r#"{"subject":"User:a","policies":[{"entries":[]}]}"#, None, Err("The policy entries is empty."));
        check_acl(r#"{"subject":"a","policies":[]}"#, None, Err("expected User:<username>"));
        check_acl(r#"{"policies":[{"entries":[{"resource":"Topic:x","actions":["Pub"],"decision":"Allow"}]}]}"#, None, Err("expected User:<username>"));
        let entry = |e: &str| format!(r#"{{"subject":"User:a","policies":[{{"entries":[{e}]}}]}}"#);
        check_acl(&entry(r#"{"actions":["Pub"],"decision":"Allow"}"#), None, Err("The resource is null."));
        check_acl(&entry(r#"{"resource":"Topic:x","decision":"Allow"}"#), None, Err("The actions is empty."));
        check_acl(&entry(r#"{"resource":"Topic:x","actions":["Any"],"decision":"Allow"}"#), None, Err("can not be Any"));
        check_acl(&entry(r#"{"resource":"Topic:x","actions":["Publish"],"decision":"Allow"}"#), None, Err("action `Publish` is unknown"));
        check_acl(&entry(r#"{"resource":"Topic:x","actions":["Pub"]}"#), None, Err("The decision is null or illegal."));
        check_acl(&entry(r#"{"resource":"Topic:x","actions":["Pub"],"decision":"Maybe"}"#), None, Err("decision `Maybe` is unknown"));
        check_acl(&entry(r#"{"resource":"Topic:x","actions":["Pub"],"decision":"Allow","sourceIps":["300.1.1.1"]}"#), None, Err("The source ip is invalid"));
        check_acl(&entry(r#"{"resource":"Topic:x","actions":["Pub"],"decision":"Allow","sourceIps":[""]}"#), None, Err("The source ip is empty."));
        check_acl(r#"{"subject":"User:a","policies":[{"policyType":"Mine","entries":[{"resource":"*","actions":["Pub"],"decision":"Allow"}]}]}"#, None, Err("policyType `Mine`"));
        check_acl("[1]", None, Err("not a AclInfo JSON document"));
        check_acl("{", None, Err("not a AclInfo JSON document"));
    }

    #[test]
    fn user_bodies_convert_as_apache() {
        let check = |body: &str, expected: Result<(UserType, UserStatus), &str>| {
            let got = UserInfo::decode(body.as_bytes()).map_err(|e| e.to_string()).and_then(|i| i.to_new_user().map_err(|e| e.to_string()));
            match (got, expected) {
                (Ok(u), Ok((t, s))) => assert_eq!((u.user_type, u.user_status), (t, s), "{body}"),
                (Err(e), Err(want)) => assert!(e.contains(want), "{body}: {e} lacks {want}"),
                (got, want) => panic!("{body}: got {got:?}, want {want:?}"),
            }
        };
        check(r#"{"username":"u","password":"p"}"#, Ok((UserType::Normal, UserStatus::Enable)));
        check(r#"{"username":"u","password":"p","userType":"super","userStatus":"Disable","extra":1}"#, Ok((UserType::Super, UserStatus::Disable)));
        check(r#"{"username":"u","password":"p","userType":null}"#, Ok((UserType::Normal, UserStatus::Enable)));
        check(r#"{"username":"u"}"#, Err("password can not be blank"));
        check(r#"{"password":"p"}"#, Err("username can not be blank"));
        check(r#"{"username":"u","password":"p","userType":"Admin"}"#, Err("userType `Admin` is unknown"));
        check(r#"{"username":"u","password":"p","userStatus":"on"}"#, Err("userStatus `on` is unknown"));
        check(r#"{"username":5}"#, Err("not a UserInfo JSON document"));
        assert_eq!(UserInfo::decode(&vec![b' '; AUTH_BODY_BYTES_MAX + 1]), Err(InfoError::TooLarge(AUTH_BODY_BYTES_MAX + 1)));
    }

    #[test]
    fn user_info_is_written_as_fastjson() {
        let u = User { username: "alice".into(), password: "pw".into(), user_type: UserType::Super, user_status: UserStatus::Enable };
        assert_eq!(String::from_utf8(encode(&UserInfo::of(&u))).unwrap(), r#"{"password":"pw","userStatus":"enable","userType":"Super","username":"alice"}"#);
        assert!(!format!("{:?}", UserInfo::of(&u)).contains("pw\""));
    }
}
