//! The crate's architecture rules, checked on its manifest and sources: it never depends
//! on the broker (tokio stays off the shard threads), and every source file opens with
//! a `//!` comment saying what it owns.

use std::path::Path;

#[test]
fn the_front_end_does_not_depend_on_the_broker() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("ringmq-broker"), "grpc/Cargo.toml names ringmq-broker: tokio would reach the shard threads' crate");
}

#[test]
fn every_source_file_says_what_it_owns() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.starts_with("//!"), "{} does not open with //!", path.display());
        }
    }
}
