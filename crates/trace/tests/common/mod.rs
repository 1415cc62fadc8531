//! Finding the shared real-trace fragments (`../shared/traces/` beside the repository).

use std::path::PathBuf;

/// The traces folder, or `None` (after saying so) when it is absent. `CORDILLERA_TRACES`
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
        eprintln!(
            "SKIPPED {test}: real traces not found at {} (set CORDILLERA_TRACES)",
            dir.display()
        );
        None
    }
}
