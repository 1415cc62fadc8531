//! The traces `lab sierra` reads: the generated Hotmail-like load and I/O traces of a seed, or
//! the user's traces merged into one.

use cordillera_sim::workload::{Generated, HotmailLike, HOTMAIL_ORIGIN_UNIX_NS};
use cordillera_trace::merge::Merged;
use cordillera_trace::RecordReader;

use super::Input;
use crate::input::TraceInput;

/// The generated workload: a load trace of `week_days` days and an I/O trace of `io_days`,
/// their peak rates scaled from Sierra's, both drawn from `seed`; `maintenance_hours` (the
/// paper's 0 and 1 when empty) run in the top gear.
pub fn generated(
    week_days: u64,
    week_rate_scale: f64,
    io_days: u64,
    io_rate_scale: f64,
    maintenance_hours: &[usize],
    seed: u64,
) -> Vec<Input> {
    let generated = |days: u64, scale: f64| {
        let w = HotmailLike {
            days,
            peak_rate_per_s: HotmailLike::sierra().peak_rate_per_s * scale,
            seed,
            ..HotmailLike::sierra()
        };
        move || -> Result<Box<dyn RecordReader>, String> {
            w.validate()?;
            Ok(Box::new(
                Generated::new(&w.volume_names(), Box::new(w.records()))
                    .with_origin(HOTMAIL_ORIGIN_UNIX_NS),
            ))
        }
    };
    let maintenance = if maintenance_hours.is_empty() {
        vec![0, 1]
    } else {
        maintenance_hours.to_vec()
    };
    vec![
        Input {
            name: format!("hotmail-like, {week_days} days"),
            open: Box::new(generated(week_days, week_rate_scale)),
            maintenance_hours: maintenance.clone(),
            utc_offset_hours: 0,
            load_trace: true,
            io_trace: false,
        },
        Input {
            name: format!("hotmail-like, {} h", io_days * 24),
            open: Box::new(generated(io_days, io_rate_scale)),
            maintenance_hours: maintenance,
            utc_offset_hours: 0,
            load_trace: false,
            io_trace: true,
        },
    ]
}

/// The user's traces, merged in time order on their wall clock, as one load and I/O trace.
pub fn traces(
    inputs: Vec<TraceInput>,
    maintenance_hours: &[usize],
    utc_offset_hours: i64,
) -> Vec<Input> {
    let name = inputs
        .iter()
        .map(|i| {
            i.file
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| i.file.display().to_string())
        })
        .collect::<Vec<_>>()
        .join("+");
    let opener = move || -> Result<Box<dyn RecordReader>, String> {
        let readers = inputs
            .iter()
            .map(|i| i.open().map_err(|e| format!("{e:#}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Box::new(Merged::new(readers).map_err(|e| e.to_string())?))
    };
    vec![Input {
        name,
        open: Box::new(opener),
        maintenance_hours: maintenance_hours.to_vec(),
        utc_offset_hours,
        load_trace: true,
        io_trace: true,
    }]
}
