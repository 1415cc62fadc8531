//! The built-in workload of `advise` and `demo`: a generated multi-volume trace (peaks, a
//! diurnal swing, hot data, a nightly job) that can be opened again and again, and saved in the
//! binary format so that the report's commands can name it.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use cordillera_sim::workload::Generated;
use cordillera_trace::binary::BinaryWriter;
use cordillera_trace::record::VolumeId;
use cordillera_trace::synth::{generate, SynthOptions};

use super::Open;

/// The workload `options` generates, its description and its opener; with `save`, also written
/// there in the binary format.
pub fn builtin(options: &SynthOptions, save: Option<&Path>) -> Result<(String, Open)> {
    let (info, volumes, mut records) = generate(options);
    // Volumes numbered in order of first appearance, as a saved trace numbers them when read
    // back: the labs then see the same volume ids in memory and from the file (the striping
    // partition, say, depends on them).
    let mut order: Vec<Option<u32>> = vec![None; volumes.len()];
    let mut names: Vec<String> = Vec::new();
    for r in &mut records {
        let i = r.volume.0 as usize;
        let id = *order[i].get_or_insert_with(|| {
            names.push(volumes.name(r.volume).to_owned());
            names.len() as u32 - 1
        });
        r.volume = VolumeId(id);
    }
    if let Some(path) = save {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut writer = BinaryWriter::new(std::io::BufWriter::new(file), path)?;
        let mut table = cordillera_trace::record::VolumeTable::new();
        for n in &names {
            table
                .intern(n.as_bytes())
                .context("the built-in workload's volume table")?;
        }
        for r in &records {
            writer.write(r, &table, &info)?;
        }
        writer.finish(&info)?;
    }
    let records = Arc::new(records);
    let days = options.duration_s / (24 * 3600);
    let source = format!(
        "built-in workload ({} volumes, {} days, seed {}: peaks, a diurnal swing, hot data, a nightly job)",
        options.volumes, days, options.seed
    );
    let open: Open = Arc::new(move || {
        let records = records.clone();
        let n = records.len();
        Ok(Box::new(Generated::new(
            &names,
            Box::new((0..n).map(move |i| records[i])),
        )) as Box<dyn cordillera_trace::RecordReader>)
    });
    Ok((source, open))
}
