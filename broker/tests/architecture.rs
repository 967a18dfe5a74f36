//! The layering ARCHITECTURE.md states, checked on the source: which module may name
//! which (no upward imports in `broker/src`), where glommio and the process clock may
//! be called, how many fields `Shard` has, and that every file opens with its `//!`
//! header. A forbidden import fails here with the file and line that made it.
//!
//! The check reads code lines only (comment lines are skipped), so a doc comment may
//! still name what a module must not import.

use std::path::{Path, PathBuf};

fn src_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir` (or `dir` itself when it is a file), sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if !dir.exists() {
        // A module is a directory or one file: `config` may be `config.rs`.
        let file = dir.with_extension("rs");
        assert!(file.is_file(), "{} names no module", dir.display());
        return vec![file];
    }
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return out;
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// (file, line number, line) of every code line under `scope` naming one of `banned`.
fn offending(scope: &str, banned: &[&str]) -> Vec<String> {
    let root = src_root();
    let mut found = Vec::new();
    for file in rust_files(&root.join(scope)) {
        let text = std::fs::read_to_string(&file).expect("source readable");
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for b in banned {
                if code.contains(b) {
                    found.push(format!("{}:{}: names `{b}`: {}", file.strip_prefix(&root).unwrap_or(&file).display(), i + 1, code));
                }
            }
        }
    }
    found
}

/// One layering rule: nothing in `scope` may name any of `banned`.
fn check(scope: &str, banned: &[&str]) {
    let found = offending(scope, banned);
    assert!(found.is_empty(), "layering broken in `{scope}`:\n{}", found.join("\n"));
}

const ABOVE_THE_SHARD: &[&str] = &["crate::shard", "crate::launch", "crate::net::", "crate::sim"];

#[test]
fn the_runtime_seam_knows_nothing_of_shards() {
    check("rt", &["crate::shard", "crate::launch", "crate::net::", "crate::namesrv_client"]);
}

#[test]
fn the_store_depends_only_on_its_own_traits() {
    check("store", &["crate::shard", "crate::rt", "crate::launch", "crate::net::", "crate::sim", "crate::namesrv_client", "crate::config"]);
}

#[test]
fn rules_modules_import_no_shard_or_process_code() {
    for scope in ["meta", "schedule", "txn", "ha", "metrics", "routing.rs", "namesrv_client.rs", "config"] {
        check(scope, ABOVE_THE_SHARD);
    }
}

#[test]
fn the_namesrv_client_goes_through_the_runtime_seam() {
    check("namesrv_client.rs", &["crate::rt", "glommio", "Instant", "SystemTime", "ringmq_client::net"]);
}

#[test]
fn only_the_runtime_calls_glommio_or_the_process_clock() {
    // ARCHITECTURE.md: nothing in `shard/`, `net/conn.rs`, `meta/` or
    // `store/flusher.rs` calls glommio, `Instant` or `SystemTime`.
    for scope in ["shard", "net/conn.rs", "meta", "store/flusher.rs", "schedule", "txn"] {
        check(scope, &["glommio", "Instant::now", "SystemTime"]);
    }
}

#[test]
fn shard_has_at_most_15_fields() {
    const SHARD_FIELDS_MAX: usize = 15;
    let text = std::fs::read_to_string(src_root().join("shard/mod.rs")).expect("shard/mod.rs readable");
    let start = text.find("pub struct Shard<R: Runtime> {").expect("struct Shard declared in shard/mod.rs");
    let body = &text[start..];
    let end = body.find("\n}").expect("struct Shard closed");
    let fields: Vec<&str> = body[..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.is_empty())
        .filter(|l| l.split(':').next().is_some_and(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')))
        .collect();
    assert!(fields.len() <= SHARD_FIELDS_MAX, "Shard has {} fields (at most {SHARD_FIELDS_MAX}): a feature gets an owner of its own:\n{}", fields.len(), fields.join("\n"));
    assert!(fields.len() >= 5, "field count parse looks wrong: {fields:?}");
}

#[test]
fn every_source_file_opens_with_its_header() {
    let root = src_root();
    let missing: Vec<String> = rust_files(&root)
        .into_iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap_or_default().trim_start().starts_with("//!"))
        .map(|f| f.strip_prefix(&root).unwrap_or(&f).display().to_string())
        .collect();
    assert!(missing.is_empty(), "files without a `//!` header saying what they own: {missing:?}");
}

#[test]
fn the_checker_finds_what_it_looks_for() {
    // The rules above pass vacuously if the scan saw nothing: it must see the shard's
    // own imports of the store, and not see a doc-comment mention.
    assert!(!offending("shard/mod.rs", &["crate::store::engine"]).is_empty());
    assert!(offending("rt/mod.rs", &["Architecture Invariant"]).is_empty(), "comment lines must be skipped");
}
