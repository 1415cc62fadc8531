//! Finding the shared real-trace fragments (`../shared/traces/` beside the repository).

pub use cordillera_testkit::traces_dir;
