//! The request metadata every RPC carries (docs/design/pop-grpc.md §3.5 "Other
//! metadata"): `x-mq-client-id` (required), `x-mq-namespace`, `x-mq-language`,
//! `x-mq-client-version`, `x-mq-protocol[-version]`, `x-mq-request-id`, and the
//! authentication pair `authorization` / `x-mq-date-time` (checked in `auth_header`).
//! Also the namespace rule (`namespace%name`, Apache's `NamespaceUtil`).
//!
//! Invariant: each value is at most `METADATA_VALUE_BYTES_MAX` bytes (longer is refused
//! as BAD_REQUEST, never truncated into a different identity).

use crate::pb::Code;
use crate::status::GrpcError;
use tonic::metadata::MetadataMap;

pub const CLIENT_ID: &str = "x-mq-client-id";
pub const NAMESPACE: &str = "x-mq-namespace";
pub const LANGUAGE: &str = "x-mq-language";
pub const CLIENT_VERSION: &str = "x-mq-client-version";
pub const PROTOCOL_VERSION: &str = "x-mq-protocol-version";
pub const REQUEST_ID: &str = "x-mq-request-id";
pub const AUTHORIZATION: &str = "authorization";
pub const DATE_TIME: &str = "x-mq-date-time";

/// Longest metadata value read (a client id is ~40 bytes; an authorization header ~120).
pub const METADATA_VALUE_BYTES_MAX: usize = 1024;

/// What the front end reads from one request's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientMeta {
    pub client_id: String,
    /// Empty: no namespace.
    pub namespace: String,
    /// The remoting language name (`LANGUAGE_NAMES`), for connection lists.
    pub language: &'static str,
    pub client_version: String,
    pub protocol_version: String,
    pub request_id: String,
    pub authorization: Option<String>,
    pub date_time: Option<String>,
    /// The peer's `ip:port` (the born host of messages that name none).
    pub peer: String,
}

fn value(map: &MetadataMap, key: &'static str) -> Result<Option<String>, GrpcError> {
    let Some(v) = map.get(key) else { return Ok(None) };
    let v = v.to_str().map_err(|_| GrpcError::new(Code::BadRequest, format!("metadata {key} is not ASCII")))?;
    if v.len() > METADATA_VALUE_BYTES_MAX {
        return Err(GrpcError::new(Code::BadRequest, format!("metadata {key} is {} bytes; at most {METADATA_VALUE_BYTES_MAX}", v.len())));
    }
    Ok(Some(v.to_string()))
}

/// The SDKs' `x-mq-language` values (the proto `Language` names, and Node's `HTTP`) as
/// remoting language names; unknown ones are OTHER.
pub fn remoting_language(grpc_language: &str) -> &'static str {
    match grpc_language.to_ascii_uppercase().as_str() {
        "JAVA" | "KOTLIN" => "JAVA",
        "CPP" | "OBJECTIVE_C" => "CPP",
        "DOT_NET" | "DOTNET" => "DOTNET",
        "GOLANG" | "GO" => "GO",
        "PYTHON" => "PYTHON",
        "PHP" => "PHP",
        "RUST" => "RUST",
        "RUBY" => "RUBY",
        "NODE_JS" | "NODEJS" | "HTTP" => "HTTP",
        _ => "OTHER",
    }
}

impl ClientMeta {
    /// Reads a request's metadata; a missing or empty client id is CLIENT_ID_REQUIRED.
    pub fn from_metadata(map: &MetadataMap) -> Result<Self, GrpcError> {
        let client_id = value(map, CLIENT_ID)?.filter(|c| !c.trim().is_empty()).ok_or_else(|| GrpcError::new(Code::ClientIdRequired, "missing x-mq-client-id"))?;
        Ok(Self {
            client_id,
            namespace: value(map, NAMESPACE)?.unwrap_or_default(),
            language: remoting_language(&value(map, LANGUAGE)?.unwrap_or_default()),
            client_version: value(map, CLIENT_VERSION)?.unwrap_or_default(),
            protocol_version: value(map, PROTOCOL_VERSION)?.unwrap_or_default(),
            request_id: value(map, REQUEST_ID)?.unwrap_or_default(),
            authorization: value(map, AUTHORIZATION)?,
            date_time: value(map, DATE_TIME)?,
            peer: String::new(),
        })
    }

    /// A resource's broker-side name: the resource's own namespace if set, else the
    /// request's (`x-mq-namespace`).
    pub fn resource_name(&self, resource: &crate::pb::Resource) -> String {
        let ns = if resource.resource_namespace.is_empty() { &self.namespace } else { &resource.resource_namespace };
        wrap_namespace(ns, &resource.name)
    }
}

const RETRY_PREFIX: &str = "%RETRY%";
const DLQ_PREFIX: &str = "%DLQ%";
const NAMESPACE_SEPARATOR: char = '%';

/// Apache's `NamespaceUtil.wrapNamespace`: `ns%name`, keeping a retry or DLQ prefix in
/// front (`%RETRY%ns%group`); an empty namespace or an already wrapped name is unchanged.
pub fn wrap_namespace(namespace: &str, name: &str) -> String {
    if namespace.is_empty() || name.is_empty() {
        return name.to_string();
    }
    let (prefix, rest) = if let Some(rest) = name.strip_prefix(RETRY_PREFIX) {
        (RETRY_PREFIX, rest)
    } else if let Some(rest) = name.strip_prefix(DLQ_PREFIX) {
        (DLQ_PREFIX, rest)
    } else {
        ("", name)
    };
    if rest.strip_prefix(namespace).is_some_and(|r| r.starts_with(NAMESPACE_SEPARATOR)) {
        return name.to_string();
    }
    format!("{prefix}{namespace}{NAMESPACE_SEPARATOR}{rest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&'static str, &str)]) -> MetadataMap {
        let mut m = MetadataMap::new();
        for (k, v) in pairs {
            m.insert(*k, v.parse().unwrap());
        }
        m
    }

    fn check(pairs: &[(&'static str, &str)], expected: Result<(&str, &str, &str), Code>) {
        let got = ClientMeta::from_metadata(&meta(pairs)).map_err(|e| e.code);
        let got = got.as_ref().map(|m| (m.client_id.as_str(), m.namespace.as_str(), m.language)).map_err(|c| *c);
        assert_eq!(got, expected, "{pairs:?}");
    }

    #[test]
    fn reads_metadata() {
        check(&[], Err(Code::ClientIdRequired));
        check(&[(CLIENT_ID, " ")], Err(Code::ClientIdRequired));
        check(&[(CLIENT_ID, "c1")], Ok(("c1", "", "OTHER")));
        check(&[(CLIENT_ID, "c1"), (LANGUAGE, "PYTHON"), (NAMESPACE, "ns")], Ok(("c1", "ns", "PYTHON")));
        check(&[(CLIENT_ID, "c1"), (LANGUAGE, "HTTP")], Ok(("c1", "", "HTTP")));
        check(&[(CLIENT_ID, "c1"), (LANGUAGE, "RUST")], Ok(("c1", "", "RUST")));
        check(&[(CLIENT_ID, "c1"), (LANGUAGE, "GOLANG")], Ok(("c1", "", "GO")));
        check(&[(CLIENT_ID, "c1"), (LANGUAGE, "DOTNET")], Ok(("c1", "", "DOTNET")));
        let long = "x".repeat(METADATA_VALUE_BYTES_MAX + 1);
        check(&[(CLIENT_ID, &long)], Err(Code::BadRequest));
    }

    #[test]
    fn every_language_name_is_a_remoting_language() {
        for l in ["JAVA", "CPP", "DOT_NET", "GOLANG", "RUST", "PYTHON", "PHP", "NODE_JS", "RUBY", "OBJECTIVE_C", "DART", "KOTLIN", "HTTP", ""] {
            assert!(ringmq_client::remoting::codes::LANGUAGE_NAMES.contains(&remoting_language(l)), "{l}");
        }
    }

    #[test]
    fn namespaces() {
        let cases = [
            ("", "T", "T"),
            ("ns", "T", "ns%T"),
            ("ns", "ns%T", "ns%T"),
            ("ns", "%RETRY%G", "%RETRY%ns%G"),
            ("ns", "%DLQ%G", "%DLQ%ns%G"),
            ("ns", "%RETRY%ns%G", "%RETRY%ns%G"),
            ("ns", "nsx%T", "ns%nsx%T"),
            ("ns", "", ""),
        ];
        for (ns, name, expected) in cases {
            assert_eq!(wrap_namespace(ns, name), expected, "{ns} {name}");
        }
        let m = ClientMeta { namespace: "hdr".into(), ..Default::default() };
        let r = |ns: &str| crate::pb::Resource { resource_namespace: ns.into(), name: "T".into() };
        assert_eq!(m.resource_name(&r("")), "hdr%T");
        assert_eq!(m.resource_name(&r("own")), "own%T");
    }
}
