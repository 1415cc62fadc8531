//! The labs' reports as people read them: text tables, CSV files and SVG figures, written
//! into an output folder. The command line only parses arguments and calls these.

/// A CSV row: each value as its `Display` text.
macro_rules! row {
    ($($x:expr),* $(,)?) => { vec![$($x.to_string()),*] };
}

pub mod advise;
pub mod advise_html;
pub mod bonfire;
mod bonfire_io;
pub mod bonfire_schemes;
pub mod everest;
pub mod format;
pub mod plots;
pub mod sierra;
mod sierra_csv;
mod sierra_micro;
pub mod sim;
pub mod striping;
pub mod trace;

use std::path::Path;

use anyhow::{Context, Result};

/// Writes a CSV file into the lab's output folder with the csv crate (every field quoted as
/// it needs); a row must have as many fields as the header.
pub fn write_csv(
    dir: &Path,
    name: &str,
    header: &[&str],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> Result<()> {
    let path = dir.join(name);
    let mut w =
        csv::Writer::from_path(&path).with_context(|| format!("writing {}", path.display()))?;
    w.write_record(header)?;
    for row in rows {
        anyhow::ensure!(
            row.len() == header.len(),
            "{name}: a row of {} fields under a header of {}",
            row.len(),
            header.len()
        );
        w.write_record(&row)?;
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Writes a named file into the lab's output folder.
pub fn writer(dir: &Path) -> impl Fn(&str, String) -> Result<()> + '_ {
    move |name, text| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }
}
