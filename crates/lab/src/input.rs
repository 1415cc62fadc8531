//! The trace a command or a lab reads: a file (`-` for standard input; compressed files are
//! decompressed) with how to read it, or a generated workload (`gen:NAME[:key=value,…]`), read
//! record by record with progress on a terminal and a summary of what was skipped.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use cordillera_trace::ordered::InTimeOrder;
use cordillera_trace::parse::ParseOptions;
use cordillera_trace::{open, Format, ReadOptions, Record, RecordReader, TimeUnit, TraceError};

/// A trace to read and how.
#[derive(Clone, Debug)]
pub struct TraceInput {
    pub file: PathBuf,
    /// Detected from the content when `None`.
    pub format: Option<Format>,
    /// Unit of ASCII5 timestamps (judged from the content when `None`: detected, or assumed
    /// with a warning naming the alternatives).
    pub time_unit: Option<TimeUnit>,
    /// Block size of ARC `.lis` traces.
    pub arc_block_bytes: u64,
    /// Only these volumes (all when empty).
    pub volumes: Vec<String>,
    /// Skip malformed lines (and say how many) instead of stopping at the first.
    pub skip_invalid: bool,
}

impl TraceInput {
    /// `file`, every volume, the format detected, malformed lines refused.
    pub fn file(file: &Path) -> TraceInput {
        TraceInput {
            file: file.to_path_buf(),
            format: None,
            time_unit: None,
            arc_block_bytes: 512,
            volumes: Vec::new(),
            skip_invalid: false,
        }
    }

    pub fn options(&self) -> ReadOptions {
        ReadOptions {
            format: self.format,
            time_unit: self.time_unit,
            parse: ParseOptions {
                arc_block_bytes: self.arc_block_bytes,
                ..ParseOptions::default()
            },
            volumes: self.volumes.clone(),
            skip_invalid: self.skip_invalid,
        }
    }

    /// Opens the trace file, or the generated workload when the name is `gen:…`. A file's
    /// records come in time order: those written out of order (completion-ordered traces) are
    /// sorted within a minute ([`InTimeOrder`]), counted in the summary's `reordered`; one more
    /// out of order than that is an error.
    pub fn open(&self) -> Result<Box<dyn RecordReader>> {
        if let Some(spec) = self.file.to_str().filter(|s| s.starts_with("gen:")) {
            if !self.volumes.is_empty() {
                bail!("--volume does not apply to generated workloads");
            }
            return Ok(Box::new(
                cordillera_sim::workload::open_spec(spec).map_err(anyhow::Error::msg)?,
            ));
        }
        let reader = open(&self.file, &self.options())?;
        Ok(Box::new(InTimeOrder::new(reader, InTimeOrder::WINDOW_NS)))
    }

    /// Opens the trace and calls `each` on every record, with progress on a terminal and a
    /// summary of skipped lines on standard error. Returns the reader for its volume table
    /// and info.
    pub fn for_each_record(
        &self,
        mut each: impl FnMut(&dyn RecordReader, &Record),
    ) -> Result<Box<dyn RecordReader>> {
        self.try_for_each_record(|reader, record| {
            each(reader, record);
            Ok(())
        })
    }

    /// Like [`TraceInput::for_each_record`], stopping at the first error `each` returns.
    pub fn try_for_each_record(
        &self,
        mut each: impl FnMut(&dyn RecordReader, &Record) -> Result<(), TraceError>,
    ) -> Result<Box<dyn RecordReader>> {
        let mut reader = self.open()?;
        if let Some(note) = time_unit_note(reader.summary()) {
            eprintln!("cordillera: {note}");
        }
        let progress = std::io::stderr().is_terminal();
        let started = Instant::now();
        let mut next_report = Duration::from_secs(2);
        let mut count: u64 = 0;
        while let Some(record) = reader.next_record()? {
            each(reader.as_ref(), &record)?;
            count += 1;
            if progress && count.is_multiple_of(1 << 20) && started.elapsed() >= next_report {
                let elapsed = started.elapsed().as_secs_f64();
                eprint!(
                    "\r{count} records, {:.1} M records/s",
                    count as f64 / elapsed / 1e6
                );
                next_report += Duration::from_secs(2);
            }
        }
        if progress && started.elapsed() >= Duration::from_secs(2) {
            eprintln!();
        }
        self.report_reading(reader.as_ref());
        Ok(reader)
    }

    /// For commands that read their trace more than once: standard input can be read only
    /// once.
    pub fn refuse_stdin(&self, command: &str) -> Result<()> {
        if self.file == Path::new("-") {
            bail!("{command} reads its trace more than once, and standard input can be read only once: save the trace to a file");
        }
        Ok(())
    }

    fn report_reading(&self, reader: &dyn RecordReader) {
        let summary = reader.summary();
        for note in reading_notes(summary) {
            eprintln!("cordillera: {note}");
        }
        if summary.invalid_skipped > 0 {
            eprintln!(
                "cordillera: skipped {} malformed line(s) of {}; the first: {}",
                summary.invalid_skipped,
                summary.lines,
                summary.first_invalid.as_deref().unwrap_or("")
            );
        }
        for name in &self.volumes {
            if reader.volumes().lookup(name).is_none() {
                eprintln!("cordillera: warning: volume {name:?} does not appear in the trace");
            }
        }
    }
}

/// How an ASCII5 trace's time unit was chosen, when it was not given: "note: …" when detected,
/// "warning: …" when assumed.
pub fn time_unit_note(summary: &cordillera_trace::ReadSummary) -> Option<String> {
    use cordillera_trace::detect::UnitSource;
    let choice = summary.time_unit.as_ref()?;
    let unit = format!("{:?}", choice.unit).to_lowercase();
    match choice.how {
        UnitSource::Given => None,
        UnitSource::Detected => Some(format!(
            "note: ASCII5 timestamps read in {unit}: {}",
            choice.reason
        )),
        UnitSource::Assumed => Some(format!(
            "warning: ASCII5 traces do not record their time unit: {}",
            choice.reason
        )),
    }
}

/// What the reader did to the trace besides reading it: a header row skipped, records put in
/// time order.
pub fn reading_notes(summary: &cordillera_trace::ReadSummary) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(header) = &summary.header_skipped {
        notes.push(format!("note: skipped the header row {header:?}"));
    }
    if summary.reordered > 0 {
        notes.push(format!(
            "note: {} record(s) were out of time order (the trace is in completion order?): sorted by time, times counted from the earliest",
            summary.reordered
        ));
    }
    notes
}

/// A generated workload's spec (`gen:NAME` or `gen:NAME:key=value,…`) drawing from `seed`,
/// unless it names a seed of its own or is not a generated workload (`None`).
pub fn seeded_spec(spec: &str, seed: u64) -> Option<String> {
    if !spec.starts_with("gen:") || spec.contains("seed=") {
        return None;
    }
    let sep = if spec.matches(':').count() >= 2 {
        ","
    } else {
        ":"
    };
    Some(format!("{spec}{sep}seed={seed}"))
}

/// A reader that passes only the named volumes' records; a name the trace lacks is an error
/// (found once the trace has been read, since names are learnt while reading).
pub struct OnlyVolumes {
    inner: Box<dyn cordillera_trace::RecordReader>,
    wanted: Vec<String>,
    ids: Vec<Option<bool>>,
}

impl OnlyVolumes {
    pub fn new(inner: Box<dyn cordillera_trace::RecordReader>, wanted: &[String]) -> OnlyVolumes {
        OnlyVolumes {
            inner,
            wanted: wanted.to_vec(),
            ids: Vec::new(),
        }
    }
}

impl cordillera_trace::RecordReader for OnlyVolumes {
    fn info(&self) -> &cordillera_trace::TraceInfo {
        self.inner.info()
    }
    fn volumes(&self) -> &cordillera_trace::VolumeTable {
        self.inner.volumes()
    }
    fn next_record(
        &mut self,
    ) -> Result<Option<cordillera_trace::Record>, cordillera_trace::TraceError> {
        while let Some(r) = self.inner.next_record()? {
            let i = r.volume.index();
            if self.ids.len() <= i {
                self.ids.resize(i + 1, None);
            }
            let keep = *self.ids[i].get_or_insert_with(|| {
                let name = self.inner.volumes().name(r.volume);
                self.wanted.iter().any(|w| w == name)
            });
            if keep {
                return Ok(Some(r));
            }
        }
        for w in &self.wanted {
            if self.inner.volumes().lookup(w).is_none() {
                return Err(cordillera_trace::TraceError::Incompatible(format!(
                    "--volume {w}: the trace has no such volume"
                )));
            }
        }
        Ok(None)
    }
    fn summary(&self) -> &cordillera_trace::ReadSummary {
        self.inner.summary()
    }
}

/// The records of `reader` as an iterator that ends at the first error, kept in `error` for
/// the caller to report once the iteration is over (a replay consumes records as it goes).
pub fn records_until_error<'a>(
    reader: &'a mut dyn RecordReader,
    error: &'a mut Option<TraceError>,
) -> impl Iterator<Item = Record> + 'a {
    std::iter::from_fn(move || match reader.next_record() {
        Ok(record) => record,
        Err(e) => {
            *error = Some(e);
            None
        }
    })
}
