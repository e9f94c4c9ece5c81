//! Layers point one way (ARCHITECTURE.md): the request path (`proxy/`) composes the policy and
//! config modules and the usage and metrics sinks; none of those reaches back up into it. A
//! module below the request path that names `proxy` fails this test.

use std::fs;
use std::path::{Path, PathBuf};

/// The modules below the request path.
const LOWER: &[&str] = &[
    "config",
    "limits",
    "admission",
    "routing",
    "stats",
    "upstream",
    "usage",
    "sse",
    "metrics",
    "telemetry",
    "server",
    "fleet",
    "auth.rs",
    "endpoint.rs",
    "error.rs",
    "tokens.rs",
    "clock.rs",
    "private_fs.rs",
    "access_log.rs",
    "header_names.rs",
    "sync_shim.rs",
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in fs::read_dir(path).expect("read_dir").flatten() {
            rust_files(&entry.path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

#[test]
fn nothing_below_the_request_path_imports_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for module in LOWER {
        rust_files(&src.join(module), &mut files);
    }
    assert!(files.len() > 20, "the lower modules were not found: {files:?}");
    let mut offenders = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            // `crate::proxy`, `super::proxy`, and `proxy::` inside a grouped `use crate::{...}`.
            if code.contains("crate::proxy") || code.contains("super::proxy") || code.contains("proxy::") {
                offenders.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(offenders.is_empty(), "lower modules import the request path:\n{}", offenders.join("\n"));
}
