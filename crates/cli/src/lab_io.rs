//! What every lab command shares: its `--trace` input.

use std::path::Path;

use cordillera_lab::input::TraceInput;

/// A lab's `--trace` file, all volumes.
pub(crate) fn trace_input(
    path: &Path,
    format: Option<cordillera_trace::Format>,
    time_unit: Option<cordillera_trace::TimeUnit>,
    skip_invalid: bool,
) -> TraceInput {
    TraceInput {
        format,
        time_unit,
        skip_invalid,
        ..TraceInput::file(path)
    }
}
