//! Request signatures as RocketMQ 4.x's plain ACL makes them (Java's `AclClientRPCHook`
//! and `AclUtils.combineRequestContent` / `calSignature`): the values of a request's
//! ext fields sorted by key, `Signature` left out, concatenated as UTF-8, then the body
//! bytes; HmacSHA1 over that with the secret key, base64 (standard alphabet, padded).
//!
//! Owns: [`Credentials`] (what a client signs with), [`sign`] (adds `AccessKey`,
//! `SecurityToken` when set, and `Signature` to a request, as the Java hook does) and
//! [`signature_matches`] (the broker's check, same content, constant-time compare).
//!
//! Invariants: the content is fed to the MAC field by field, never concatenated into a
//! buffer (a signed send costs no copy of its body); a signature is compared in constant
//! time over its 28 base64 bytes; a secret is never printed (`Debug` redacts it).

use super::command::RemotingCommand;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use subtle::ConstantTimeEq;

/// Ext field names (Java's `SessionCredentials`).
pub const ACCESS_KEY: &str = "AccessKey";
pub const SIGNATURE: &str = "Signature";
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// Java's `MixAll.UNIQUE_MSG_QUERY_FLAG`: Apache's broker leaves it out of the content it
/// checks, while Java's client signs it (a QUERY_MESSAGE by unique key).
pub const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";
/// Length of a base64 HmacSHA1 (20 bytes → 28 characters, padded).
pub const SIGNATURE_BYTES: usize = 28;

/// An account's keys, as Java's `SessionCredentials`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
    /// Sent as `SecurityToken` (and signed) when set; Apache's plain ACL does not check it.
    pub security_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("access_key", &self.access_key).field("secret_key", &"<redacted>").field("security_token", &self.security_token.as_ref().map(|_| "<redacted>")).finish()
    }
}

impl Credentials {
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Self { access_key: access_key.into(), secret_key: secret_key.into(), security_token: None }
    }
}

/// The base64 HmacSHA1 of `fields` (already in key order; `Signature` and the keys
/// `skip` names are left out) followed by `body`, keyed by `secret`.
pub fn signature<'a>(fields: impl Iterator<Item = (&'a str, &'a str)>, skip: &[&str], body: &[u8], secret: &str) -> [u8; SIGNATURE_BYTES] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let mut mac = match Hmac::<Sha1>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    for (key, value) in fields {
        if key != SIGNATURE && !skip.contains(&key) {
            mac.update(value.as_bytes());
        }
    }
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = [0u8; SIGNATURE_BYTES];
    // 20 bytes always encode to exactly 28.
    let _ = base64::engine::general_purpose::STANDARD.encode_slice(digest, &mut out);
    out
}

/// Signs `cmd` as Java's `AclClientRPCHook.doBeforeRequest`: `AccessKey` (and
/// `SecurityToken`) are added first, so they are part of the signed content.
pub fn sign(cmd: &mut RemotingCommand, credentials: &Credentials) {
    cmd.ext_fields.set_str(ACCESS_KEY, &credentials.access_key);
    if let Some(token) = &credentials.security_token {
        cmd.ext_fields.set_str(SECURITY_TOKEN, token);
    }
    let sig = signature(cmd.ext_fields.iter(), &[], &cmd.body, &credentials.secret_key);
    // Base64 is ASCII.
    let text = std::str::from_utf8(&sig).unwrap_or_default();
    cmd.ext_fields.set_str(SIGNATURE, text);
}

/// Whether `cmd`'s `Signature` is the one `secret` gives. Apache's broker signs the
/// content without `_UNIQUE_KEY_QUERY` while Java's client includes it, so a request
/// carrying that field passes with either (both are made with the secret).
pub fn signature_matches(cmd: &RemotingCommand, secret: &str) -> bool {
    let Some(given) = cmd.ext_fields.get(SIGNATURE) else { return false };
    let given = given.as_bytes();
    if given.len() != SIGNATURE_BYTES {
        return false;
    }
    let apache = signature(cmd.ext_fields.iter(), &[UNIQUE_MSG_QUERY_FLAG], &cmd.body, secret);
    if bool::from(apache.ct_eq(given)) {
        return true;
    }
    cmd.ext_fields.contains_key(UNIQUE_MSG_QUERY_FLAG) && bool::from(signature(cmd.ext_fields.iter(), &[], &cmd.body, secret).ct_eq(given))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::request_code as rq;

    fn cmd(fields: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
        let mut c = RemotingCommand::request(rq::SEND_MESSAGE_V2);
        for (k, v) in fields {
            c = c.with_ext(k, v);
        }
        c.body = bytes::Bytes::copy_from_slice(body);
        c
    }

    /// Vectors computed independently: the first by rocketmq-client-rust 1.0's
    /// `AclClientRPCHook` test (ak/secret/token, fields a and z, body "body"), all by
    /// Python's `hmac` + `base64` over the concatenation.
    #[test]
    fn signatures_match_independent_computations() {
        let check = |fields: &[(&str, &str)], body: &[u8], secret: &str, expected: &str| {
            let got = signature(cmd(fields, body).ext_fields.iter(), &[], body, secret);
            assert_eq!(std::str::from_utf8(&got).unwrap(), expected, "fields {fields:?} body {body:?}");
        };
        check(&[("z", "last"), ("a", "first"), ("AccessKey", "ak"), ("SecurityToken", "token")], b"body", "secret", "wuJkFDNRMKY6aFXTDwT/vg0UC8M=");
        // A stale Signature is left out.
        check(&[("z", "last"), ("a", "first"), ("AccessKey", "ak"), ("SecurityToken", "token"), ("Signature", "x")], b"body", "secret", "wuJkFDNRMKY6aFXTDwT/vg0UC8M=");
        check(&[("AccessKey", "RocketMQ"), ("b", "TopicTest"), ("a", "12345678")], b"body-bytes", "12345678", "9bCcjFKhzNqD9CrfPjTiY4KnUkk=");
        check(&[], b"", "12345678", "beQgVA0KNM4WtCe68fj2DEn3WWU=");
    }

    #[test]
    fn a_signed_request_verifies_and_a_changed_one_does_not() {
        let creds = Credentials { access_key: "RocketMQ".into(), secret_key: "12345678".into(), security_token: Some("tok".into()) };
        let check = |change: &dyn Fn(&mut RemotingCommand), secret: &str, expected: bool| {
            let mut c = cmd(&[("b", "TopicTest"), ("a", "group")], b"hello");
            sign(&mut c, &creds);
            assert_eq!(c.ext(ACCESS_KEY), Some("RocketMQ"));
            assert_eq!(c.ext(SECURITY_TOKEN), Some("tok"));
            change(&mut c);
            assert_eq!(signature_matches(&c, secret), expected);
        };
        check(&|_| {}, "12345678", true);
        check(&|_| {}, "12345679", false);
        check(&|c| c.body = bytes::Bytes::from_static(b"hellO"), "12345678", false);
        check(&|c| c.ext_fields.set_str("b", "Other"), "12345678", false);
        check(&|c| c.ext_fields.set_str("x", "added"), "12345678", false);
        check(&|c| c.ext_fields.set_str(ACCESS_KEY, "Someone"), "12345678", false);
        check(&|c| {
            c.ext_fields.remove(SIGNATURE);
        }, "12345678", false);
        check(&|c| c.ext_fields.set_str(SIGNATURE, "short"), "12345678", false);
        // Apache's broker leaves _UNIQUE_KEY_QUERY out of the content.
        check(&|c| c.ext_fields.set_str(UNIQUE_MSG_QUERY_FLAG, "true"), "12345678", true);
    }

    #[test]
    fn unique_key_query_flag_is_accepted_signed_or_not() {
        let creds = Credentials::new("RocketMQ", "12345678");
        // Java's client: the flag is in the content it signs.
        let mut java = cmd(&[("topic", "T"), ("key", "k"), (UNIQUE_MSG_QUERY_FLAG, "true")], b"");
        sign(&mut java, &creds);
        assert!(signature_matches(&java, "12345678"));
        // Apache's broker rule: the flag added after signing (left out of the content).
        let mut apache = cmd(&[("topic", "T"), ("key", "k")], b"");
        sign(&mut apache, &creds);
        apache.ext_fields.set_str(UNIQUE_MSG_QUERY_FLAG, "false");
        assert!(signature_matches(&apache, "12345678"));
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let text = format!("{:?}", Credentials { access_key: "ak".into(), secret_key: "s3cr3t!!".into(), security_token: Some("t0k3n".into()) });
        assert!(!text.contains("s3cr3t") && !text.contains("t0k3n") && text.contains("ak"), "{text}");
    }
}
