//! Helpers shared by the test suites.

use std::path::PathBuf;

/// The shared real-trace fragments (`../shared/traces/` beside the repository), or `None`
/// after printing that `test` was SKIPPED when the folder is absent. `CORDILLERA_TRACES`
/// overrides the location.
pub fn traces_dir(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("CORDILLERA_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
        });
    if dir.is_dir() {
        Some(dir)
    } else {
        // Both streams: nextest shows stdout of passing tests only with --no-capture, and
        // cargo test hides stderr of passing tests.
        println!(
            "SKIPPED {test}: real traces not found at {} (set CORDILLERA_TRACES)",
            dir.display()
        );
        eprintln!(
            "SKIPPED {test}: real traces not found at {} (set CORDILLERA_TRACES)",
            dir.display()
        );
        None
    }
}
