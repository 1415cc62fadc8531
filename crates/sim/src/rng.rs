//! Seeded randomness: [`SimRng`], one independent ChaCha8 stream per component, defined in
//! `cordillera_types::rng` so that cores that must not depend on the simulator draw the same.

pub use cordillera_types::rng::SimRng;
