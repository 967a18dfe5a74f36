//! The gRPC authentication header (docs/design/pop-grpc.md §3.5): `authorization:
//! MQv2-HMAC-SHA1 Credential=<ak>[/...], SignedHeaders=x-mq-date-time, Signature=<hex>`
//! with signature = HMAC-SHA1(secret, value of `x-mq-date-time`). Parsed as Apache's
//! `DefaultAuthenticationContextBuilder` (split on the first space, then `,`, then the
//! first `=`; the credential's first `/` part is the user), verified in constant time.
//!
//! Invariants: the header is at most `metadata::METADATA_VALUE_BYTES_MAX` bytes and the
//! signature at most `SIGNATURE_BYTES_MAX` bytes (checked before decoding); the parser
//! never panics (proptest); a secret never appears in `Debug` or an error.

use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use subtle::ConstantTimeEq;

pub const ALGORITHM: &str = "MQv2-HMAC-SHA1";
const CREDENTIAL: &str = "Credential";
const SIGNATURE: &str = "Signature";
/// Longest decoded signature accepted (an HMAC-SHA1 is 20 bytes).
pub const SIGNATURE_BYTES_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthHeaderError {
    #[error("datetime is null.")]
    MissingDateTime,
    #[error("authentication header is incorrect.")]
    Malformed,
    #[error("authentication keyValues length is incorrect: {0:?}")]
    BadKeyValue(String),
    #[error("authentication credential is empty")]
    NoCredential,
    #[error("the signature is not hex of at most {SIGNATURE_BYTES_MAX} bytes")]
    BadSignature,
    #[error("no signature in the authentication header")]
    NoSignature,
}

/// A parsed header: who claims to call and the MAC they sent over `content`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthHeader {
    pub access_key: String,
    pub signature: Vec<u8>,
    /// The signed bytes: the `x-mq-date-time` value.
    pub content: String,
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() / 2 > SIGNATURE_BYTES_MAX {
        return None;
    }
    let digit = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    };
    s.as_bytes().chunks(2).map(|p| Some(digit(p[0])? << 4 | digit(p[1])?)).collect()
}

/// Parses `authorization` and `x-mq-date-time`.
pub fn parse(authorization: &str, date_time: Option<&str>) -> Result<AuthHeader, AuthHeaderError> {
    let content = date_time.filter(|d| !d.is_empty()).ok_or(AuthHeaderError::MissingDateTime)?;
    let (_algorithm, rest) = authorization.split_once(' ').ok_or(AuthHeaderError::Malformed)?;
    let (mut access_key, mut signature) = (None, None);
    for key_value in rest.split(',') {
        let (key, value) = key_value.trim().split_once('=').ok_or_else(|| AuthHeaderError::BadKeyValue(key_value.trim().to_string()))?;
        match key {
            CREDENTIAL => access_key = Some(value.split('/').next().unwrap_or("").to_string()),
            SIGNATURE => signature = Some(hex_decode(value).ok_or(AuthHeaderError::BadSignature)?),
            _ => {}
        }
    }
    let access_key = access_key.filter(|a| !a.is_empty()).ok_or(AuthHeaderError::NoCredential)?;
    let signature = signature.ok_or(AuthHeaderError::NoSignature)?;
    Ok(AuthHeader { access_key, signature, content: content.to_string() })
}

/// HMAC-SHA1(secret, content).
pub fn sign(secret: &[u8], content: &str) -> [u8; 20] {
    // HMAC takes keys of any length: new_from_slice cannot fail for it.
    let mut mac = match <Hmac<Sha1> as KeyInit>::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts every key length"),
    };
    mac.update(content.as_bytes());
    mac.finalize().into_bytes().into()
}

impl AuthHeader {
    /// Whether the signature is the user's MAC of the date-time (constant time).
    pub fn verify(&self, secret: &[u8]) -> bool {
        let expected = sign(secret, &self.content);
        self.signature.len() == expected.len() && bool::from(self.signature.as_slice().ct_eq(&expected))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn check(authorization: &str, date_time: Option<&str>, expected: Result<(&str, &str), AuthHeaderError>) {
        let got = parse(authorization, date_time);
        let got = got.as_ref().map(|h| (h.access_key.as_str(), hex(&h.signature))).map_err(Clone::clone);
        let expected = expected.map(|(ak, sig)| (ak, sig.to_ascii_lowercase()));
        assert_eq!(got, expected, "{authorization:?}");
    }

    #[test]
    fn parses_headers() {
        const SIG: &str = "D18A9CBCDDBA9041D6693268FEF15A989E64430B";
        let dt = Some("20231227T194619Z");
        // Apache's DefaultAuthenticationContextBuilderTest vector.
        check(&format!("MQv2-HMAC-SHA1 Credential=abc, SignedHeaders=x-mq-date-time, Signature={SIG}"), dt, Ok(("abc", SIG)));
        // Go / C++ / C# SDKs: Credential=<ak>//Rocketmq.
        check(&format!("MQv2-HMAC-SHA1 Credential=abc//Rocketmq, SignedHeaders=x-mq-date-time, Signature={SIG}"), dt, Ok(("abc", SIG)));
        // Rust SDK: lower-case hex.
        check(&format!("MQv2-HMAC-SHA1 Credential=abc, SignedHeaders=x-mq-date-time, Signature={}", SIG.to_lowercase()), dt, Ok(("abc", SIG)));
        check("MQv2-HMAC-SHA1 Credential=abc, Signature=00", None, Err(AuthHeaderError::MissingDateTime));
        check("MQv2-HMAC-SHA1 Credential=abc, Signature=00", Some(""), Err(AuthHeaderError::MissingDateTime));
        check("MQv2-HMAC-SHA1", dt, Err(AuthHeaderError::Malformed));
        check("MQv2-HMAC-SHA1 Credential", dt, Err(AuthHeaderError::BadKeyValue("Credential".into())));
        check("MQv2-HMAC-SHA1 Credential=, Signature=00", dt, Err(AuthHeaderError::NoCredential));
        check("MQv2-HMAC-SHA1 Credential=abc, SignedHeaders=x-mq-date-time", dt, Err(AuthHeaderError::NoSignature));
        check("MQv2-HMAC-SHA1 Credential=abc, Signature=0g", dt, Err(AuthHeaderError::BadSignature));
        check("MQv2-HMAC-SHA1 Credential=abc, Signature=000", dt, Err(AuthHeaderError::BadSignature));
        check(&format!("MQv2-HMAC-SHA1 Credential=abc, Signature={}", "00".repeat(SIGNATURE_BYTES_MAX + 1)), dt, Err(AuthHeaderError::BadSignature));
    }

    #[test]
    fn apache_signature_is_the_hex_of_its_base64() {
        // Apache compares base64 of the hex-decoded bytes: "0YqcvN26kEHWaTJo/vFamJ5kQws=".
        let h = parse("MQv2-HMAC-SHA1 Credential=abc, SignedHeaders=x-mq-date-time, Signature=D18A9CBCDDBA9041D6693268FEF15A989E64430B", Some("20231227T194619Z")).unwrap();
        use base64_vector::encode;
        assert_eq!(encode(&h.signature), "0YqcvN26kEHWaTJo/vFamJ5kQws=");
    }

    /// Standard base64, only for the vector above (the crate needs no base64 otherwise).
    mod base64_vector {
        pub fn encode(bytes: &[u8]) -> String {
            const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut out = String::new();
            for c in bytes.chunks(3) {
                let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
                for i in 0..4 {
                    if i <= c.len() {
                        out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
                    } else {
                        out.push('=');
                    }
                }
            }
            out
        }
    }

    #[test]
    fn verify_vectors() {
        // RFC 2202 test case 2 (HMAC-SHA1, key "Jefe").
        assert_eq!(hex(&sign(b"Jefe", "what do ya want for nothing?")), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
        // Python SDK style (%Y%m%dT%H%M%SZ, upper-case hex) and Rust SDK style (RFC 3339, lower-case).
        for (dt, upper) in [("20240101T000000Z", true), ("2024-01-01T00:00:00.000Z", false)] {
            let sig = hex(&sign(b"secret", dt));
            let sig = if upper { sig.to_ascii_uppercase() } else { sig };
            let h = parse(&format!("MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature={sig}"), Some(dt)).unwrap();
            assert!(h.verify(b"secret"), "{dt}");
            assert!(!h.verify(b"Secret"), "{dt}");
            let other = AuthHeader { content: format!("{dt}x"), ..h.clone() };
            assert!(!other.verify(b"secret"), "{dt}: the date-time is what is signed");
            let short = AuthHeader { signature: h.signature[..19].to_vec(), ..h };
            assert!(!short.verify(b"secret"));
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics(a in ".{0,200}", d in proptest::option::of(".{0,40}")) {
            let _ = parse(&a, d.as_deref());
        }
    }
}
