//! The usage hand-off takes no lock: no file of this module may name a mutex, a condition
//! variable or a reader-writer lock (comments aside). The loom stand-ins live in `sync_shim.rs`,
//! outside it.

use std::fs;
use std::path::Path;

const FORBIDDEN: [&str; 5] = ["Mutex", "Condvar", "RwLock", "parking_lot", ".lock()"];

/// The file's code with `//` comments removed (string literals here never hold `//`).
fn code(text: &str) -> String {
    text.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

#[test]
fn the_usage_module_takes_no_lock() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/usage");
    let mut checked = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("lock_free_lint.rs") {
            continue;
        }
        let text = code(&fs::read_to_string(&path).unwrap());
        for word in FORBIDDEN {
            assert!(!text.contains(word), "{} uses `{word}`: the usage hand-off must stay lock-free", path.display());
        }
        checked += 1;
    }
    assert!(checked >= 6, "found only {checked} files in {}", dir.display());
}

#[test]
fn the_lint_sees_a_lock() {
    assert!(code("let q = self.queues.lock(); // fine").contains(".lock()"));
    assert!(!code("// a Mutex in a comment").contains("Mutex"));
}
