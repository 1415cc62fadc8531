//! What every lab command shares: its `--trace` input.

use std::path::Path;

use crate::trace_cmd::InputArgs;

/// A lab's `--trace` file, all volumes.
pub(crate) fn trace_input(
    path: &Path,
    format: Option<cordillera_trace::Format>,
    time_unit: Option<cordillera_trace::TimeUnit>,
    skip_invalid: bool,
) -> InputArgs {
    InputArgs {
        file: path.to_path_buf(),
        format,
        time_unit,
        arc_block_bytes: 512,
        volumes: Vec::new(),
        skip_invalid,
    }
}
