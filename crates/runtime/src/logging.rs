//! The daemons' structured logs on standard error. The servers also print a few fixed lines
//! that scripts parse (`cordillera volume: NBD export at nbd://…`, `cordillera store: listening
//! on …`); those stay plain whatever the format.

use tracing_subscriber::EnvFilter;

/// Sets up logging for the process: one line per event, as text or (`json`) as a JSON object
/// with the event's fields. The level filter comes from `CORDILLERA_LOG` (default `info`; e.g.
/// `CORDILLERA_LOG=debug` or `cordillera_runtime=debug`). A second call, or a subscriber set
/// up already, leaves a note on standard error and the first one in place.
pub fn init(json: bool) {
    let filter =
        EnvFilter::try_from_env("CORDILLERA_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.with_ansi(false).try_init()
    };
    if let Err(e) = result {
        eprintln!("cordillera: logging not set up: {e}");
    }
}
