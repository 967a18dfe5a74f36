//! Java-compatible hashing: tag filtering and index keys must reproduce
//! `java.lang.String.hashCode` exactly (UTF-16 code units, wrapping i32 arithmetic),
//! otherwise a Java client's tag hash and ours disagree and filters match nothing.

/// `java.lang.String.hashCode` over the UTF-16 encoding of `s`.
pub fn java_string_hash(s: &str) -> i32 {
    java_string_hash_continue(0, s)
}

/// The hash of a string that starts with text hashing to `h` and goes on with `s`:
/// `java_string_hash_continue(java_string_hash(a), b) == java_string_hash(a + b)`, so a
/// joined key is hashed without building it.
pub fn java_string_hash_continue(mut h: i32, s: &str) -> i32 {
    for unit in s.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    h
}

/// The tag hash code stored in a ConsumeQueue entry (RocketMQ stores the i32 hash
/// widened to i64).
pub fn tag_hash_code(tag: &str) -> i64 {
    java_string_hash(tag) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continued_hash_is_the_hash_of_the_join() {
        for (a, b) in [("", ""), ("TopicA#", "key-1"), ("é", "\u{1F600}x"), ("Aa", "BB")] {
            assert_eq!(java_string_hash_continue(java_string_hash(a), b), java_string_hash(&format!("{a}{b}")), "{a:?} {b:?}");
        }
    }

    fn check(input: &str, expected: i32) {
        assert_eq!(java_string_hash(input), expected, "hash of {input:?}");
    }

    #[test]
    fn matches_java() {
        // Values computed with Java's String.hashCode.
        check("", 0);
        check("a", 97);
        check("TagA", 2598919);
        check("hello", 99162322);
        check("TopicTest#key-1", 204089217);
        check("é", 233);
        check("😀", 1772899); // surrogate pair 0xD83D 0xDE00
    }
}
