//! Test support: fake host trees (`/proc/sys/...`, `/sys/...`) under a temporary
//! directory, so host reading, checks and apply plans are tested without touching the
//! real machine.

/// Builds a fake root from `(relative path, content)` pairs.
pub fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (rel, content) in files {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
        std::fs::write(path, content).expect("write fake file");
    }
    dir
}
