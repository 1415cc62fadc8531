//! What every lab command shares: its `--trace` input and its `--seed`, `--seeds`.

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

/// `--seeds` runs from `--seed`: 1 to 1000 of them, the last seed within `u64`.
pub(crate) fn check_seeds(seed: u64, seeds: u64) -> anyhow::Result<()> {
    if seeds == 0 || seeds > 1000 || seed.checked_add(seeds).is_none() {
        anyhow::bail!("--seeds must be 1 to 1000 (and --seed + --seeds must not overflow)");
    }
    Ok(())
}
