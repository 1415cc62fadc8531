//! The labs' reports as people read them: text tables, CSV files and SVG figures, written
//! into an output folder. The command line only parses arguments and calls these.

pub mod bonfire;
pub mod everest;
pub mod plots;
pub mod sierra;
pub mod striping;

use std::path::Path;

use anyhow::{Context, Result};

/// Writes a named file into the lab's output folder.
/// A CSV field: quoted when it holds a comma, a quote or a line break (trace names such as
/// "hotmail-like, 48 h" do).
pub fn csv_field(field: &str) -> String {
    if field.contains([',', '"', '\n']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

pub fn writer(dir: &Path) -> impl Fn(&str, String) -> Result<()> + '_ {
    move |name, text| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }
}
