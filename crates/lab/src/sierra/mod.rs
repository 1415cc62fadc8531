//! `cordillera lab sierra`: Sierra's evaluation (§2, §4) on the simulator.
//!
//! - [`analysis`]: the load of a trace hour by hour (Figures 1–2), the predictor's error after n
//!   days of training (Figure 8), the fraction of servers that must stay on with oracle gears
//!   (Figure 9, left), and for the two-day I/O trace the load metric, provisioning, gears and the
//!   power they imply (Figure 10, Figure 9 right).
//! - [`inputs`]: the traces it reads — the generated Hotmail-like load and I/O traces of a
//!   seed, or the user's traces merged into one.
//!
//! Server performance in the load metric is benchmarked on the simulated chunk-server disk (the
//! `sierra-1tb` preset, calibrated to Table 4) the way §4.6 benchmarks the servers.

pub mod analysis;
pub mod cluster;
pub mod headlines;
pub mod inputs;
pub mod micro;
pub mod predictors;
pub mod seeds;
pub mod table5;
pub mod testbed;

use serde::Serialize;

use cordillera_gears::layout::{Layout, LayoutKind, LayoutSpec, RackPolicy};
use cordillera_gears::load::ServerPerformance;
use cordillera_gears::mds::{Mds, MdsConfig, StateSize};
use cordillera_gears::model::{
    ObjectId, Topology, CHUNK_BYTES_EVALUATION, GROUPS_PER_SERVER_DEFAULT,
};
use cordillera_gears::protocol::{Endpoint, Message};
use cordillera_models::bench::{self, DiskBench, Pattern};
use cordillera_models::power::PowerParams;
use cordillera_models::presets;
use cordillera_trace::RecordReader;
use cordillera_types::rng::SplitMix64;
use cordillera_types::Op;

use analysis::{LoadTraceReport, ScheduleReport};

/// The chunk servers' disk.
pub const SERVER_PRESET: &str = "sierra-1tb";

/// Opens an input again each time it is read.
pub type Opener = Box<dyn FnMut() -> Result<Box<dyn RecordReader>, String>>;

/// A trace the lab reads.
pub struct Input {
    pub name: String,
    pub open: Opener,
    /// Hours of day run in the top gear and left out of provisioning.
    pub maintenance_hours: Vec<usize>,
    /// From the trace's wall clock (UTC) to the service's local time.
    pub utc_offset_hours: i64,
    /// Analysed as a load trace (§2, §4.1: about a week).
    pub load_trace: bool,
    /// Analysed as an I/O trace (§4.4: the schedule and its power).
    pub io_trace: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Options {
    /// r.
    pub replicas: usize,
    /// Policies compared (§4.4: 1 and 2).
    pub g_mins: Vec<usize>,
    /// Dedicated loggers (§4.3: one per rack).
    pub loggers: usize,
    pub power: PowerSettings,
    /// The analyses from the traces alone: the load traces' figures and the MDS state (the
    /// I/O traces' schedule is made either way).
    pub analysis: bool,
    /// The testbed experiments (§4.4–4.5) on each I/O trace; none skips them.
    pub testbed: Option<testbed::TestbedOptions>,
    /// §4.6's microbenchmarks (Table 5, Figure 12); none skips them.
    pub micro: Option<micro::MicroOptions>,
    /// The predictor against baselines on the generated weekly workloads of this seed (and on
    /// the load traces); none skips them.
    pub predictors: Option<u64>,
}

/// The power model's figures, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct PowerSettings {
    pub active_w: f64,
    pub idle_w: f64,
    pub standby_w: f64,
    pub wake_from_standby_s: f64,
}

impl PowerSettings {
    pub fn params(&self) -> PowerParams {
        PowerParams {
            active_w: self.active_w,
            idle_w: self.idle_w,
            standby_w: self.standby_w,
            wake_from_standby_ns: (self.wake_from_standby_s * 1e9) as u64,
            ..PowerParams::default()
        }
    }
}

impl Options {
    /// Every value checked, in the words of the command line's flags.
    pub fn validate(&self) -> Result<(), String> {
        if self.g_mins.is_empty() || self.g_mins.contains(&0) {
            return Err(
                "--g-min 0 would leave chunks with no replica on (§3.7); use 1 or more".into(),
            );
        }
        if let Some(t) = &self.testbed {
            if let Some(e) = t
                .experiments
                .iter()
                .find(|e| !["steady", "up-shift", "down-shift"].contains(&e.as_str()))
            {
                return Err(format!(
                    "--experiments: {e:?} is not one of steady, up-shift, down-shift, none"
                ));
            }
            if !self.g_mins.contains(&t.g_min) {
                return Err(format!(
                    "--testbed-g-min {} must be in --g-min {:?}",
                    t.g_min, self.g_mins
                ));
            }
        }
        if let Some(m) = &self.micro {
            let bytes_ok =
                m.data_per_server_bytes > 0 && m.data_per_server_bytes <= 1_000_000_000_000;
            if m.measure_s == 0 || !bytes_ok || m.max_write_servers == 0 {
                return Err("--table5-seconds and --rebuild-servers must be at least 1, --rebuild-gb in (0, 1000]".into());
            }
        }
        Ok(())
    }
}

impl Default for Options {
    fn default() -> Options {
        let p = PowerParams::default();
        Options {
            replicas: 3,
            g_mins: vec![1, 2],
            loggers: 3,
            power: PowerSettings {
                active_w: p.active_w,
                idle_w: p.idle_w,
                standby_w: p.standby_w,
                wake_from_standby_s: p.wake_from_standby_ns as f64 / 1e9,
            },
            analysis: true,
            testbed: None,
            micro: None,
            predictors: None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub options: Options,
    /// Table 4's measurements on the simulated disk (64 KB I/O, 64 outstanding for IOPS).
    pub server: ServerPerformance,
    pub server_preset: &'static str,
    /// §2 and §4.1: one per load trace.
    pub load_traces: Vec<LoadTraceReport>,
    /// §4.4: one per I/O trace.
    pub schedules: Vec<ScheduleReport>,
    /// Inputs that could not be judged, and why.
    pub skipped: Vec<String>,
    /// The MDS's state at the paper's scale (§4.5: 4.6 M chunks; 23 bytes per chunk).
    pub mds_state: Option<MdsStateReport>,
    /// §4.4–4.5 on the simulated testbed, per I/O trace.
    pub testbed: Vec<testbed::TestbedReport>,
    /// The hour-of-day predictor against baselines: the generated weekly workloads, then each
    /// load trace of two whole days or more.
    pub predictors: Vec<predictors::WorkloadScores>,
    /// §4.6: Table 5 and Figure 12.
    pub micro: Option<micro::MicroReport>,
}

/// The MDS holding the paper's up-shift experiment's metadata.
#[derive(Clone, Debug, Serialize)]
pub struct MdsStateReport {
    pub servers: usize,
    pub objects: u64,
    pub chunk_bytes: u64,
    pub size: StateSize,
}

/// Builds an MDS for 15 chunk servers (3 racks, power-aware rack-aligned, 64·N groups) and
/// creates `chunks` 1 MB chunks in 8 objects (the 8 traced volumes), then counts its state.
pub fn mds_state(chunks: u64) -> Result<MdsStateReport, String> {
    let mds = mds_with_chunks(chunks)?;
    Ok(MdsStateReport {
        servers: 15,
        objects: 8,
        chunk_bytes: CHUNK_BYTES_EVALUATION,
        size: mds.state_size(),
    })
}

/// [`mds_state`]'s MDS itself (for measuring its memory from the allocator).
pub fn mds_with_chunks(chunks: u64) -> Result<Mds, String> {
    let servers = 15;
    let topology = Topology::racks(3, 5);
    let spec = LayoutSpec {
        kind: LayoutKind::PowerAware,
        racks: RackPolicy::Aligned,
        replicas: 3,
    };
    let groups = servers * GROUPS_PER_SERVER_DEFAULT as usize;
    let layout =
        Layout::generate(spec, &topology, groups, &mut SplitMix64(1)).map_err(|e| e.to_string())?;
    let mut mds = Mds::new(MdsConfig::new(CHUNK_BYTES_EVALUATION), &layout, 0);
    let objects = 8u64;
    for o in 0..objects {
        let size_bytes = chunks / objects * CHUNK_BYTES_EVALUATION;
        mds.handle_message(
            0,
            Endpoint::Client(0),
            Message::Create {
                id: o,
                object: ObjectId(o),
                size_bytes,
            },
        );
        match mds.poll_message() {
            Some((_, Message::Created { result: Ok(_), .. })) => {}
            other => return Err(format!("the MDS refused an object: {other:?}")),
        }
    }
    Ok(mds)
}

/// Table 4 on the simulated disk: 64 KB streaming reads and writes, and 64 KB random reads and
/// writes with 64 outstanding.
pub fn benchmark_server(preset: &str) -> Result<ServerPerformance, String> {
    let measure = |pattern, op, queue_depth| -> Result<f64, String> {
        let mut device = presets::device(preset)?;
        let spec = DiskBench {
            pattern,
            op,
            block_bytes: 64 * 1024,
            queue_depth,
            count: 20_000,
            span_bytes: None,
            seed: 1,
        };
        let result = bench::run(device.as_mut(), &spec)?;
        Ok(match pattern {
            Pattern::Sequential => result.throughput_mb_per_s * 1e6,
            _ => result.iops,
        })
    };
    Ok(ServerPerformance {
        read_iops: measure(Pattern::Random, Op::Read, 64)?,
        write_iops: measure(Pattern::Random, Op::Write, 64)?,
        read_bytes_per_s: measure(Pattern::Sequential, Op::Read, 1)?,
        write_bytes_per_s: measure(Pattern::Sequential, Op::Write, 1)?,
    })
}

/// Reads each input once and runs the load analysis, the schedule, or both on it, as the input
/// says.
pub fn run(
    inputs: Vec<Input>,
    options: &Options,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, String> {
    options.validate()?;
    let server = benchmark_server(SERVER_PRESET)?;
    progress(&format!(
        "server ({SERVER_PRESET}): {:.0} read / {:.0} write IOPS, {:.0} / {:.0} MB/s",
        server.read_iops,
        server.write_iops,
        server.read_bytes_per_s / 1e6,
        server.write_bytes_per_s / 1e6
    ));
    let mut skipped = Vec::new();
    let mut load_reports = Vec::new();
    let mut schedules = Vec::new();
    let mut testbeds = Vec::new();
    for mut input in inputs {
        if !options.analysis && (options.testbed.is_none() || !input.io_trace) {
            continue;
        }
        progress(&format!("trace {}", input.name));
        // Read once, whatever it is used for.
        let mut reader = (input.open)()?;
        let measured = analysis::measure(
            &input.name,
            reader.as_mut(),
            server,
            options.replicas,
            input.utc_offset_hours,
            input.maintenance_hours.clone(),
            progress,
        )?;
        if input.load_trace && options.analysis {
            match analysis::load_trace_report(&measured, options.replicas, &options.g_mins) {
                Ok(report) => load_reports.push(report),
                Err(why) => skipped.push(why),
            }
        }
        if !input.io_trace {
            continue;
        }
        if measured.hours.is_empty() {
            skipped.push(format!("{}: no records", input.name));
            continue;
        }
        let schedule = analysis::schedule_report(
            &measured,
            options.replicas,
            options.loggers,
            &options.g_mins,
            &options.power.params(),
            server,
        )?;
        if let Some(t) = &options.testbed {
            testbeds.push(testbed::run(
                &mut input.open,
                &measured,
                &schedule,
                t,
                &options.power.params(),
                progress,
            )?);
        }
        schedules.push(schedule);
    }
    let micro = match &options.micro {
        Some(m) => Some(micro::run(m, &server, progress)?),
        None => None,
    };
    let mds_state = if options.analysis {
        progress("MDS state at the paper's scale (4.6 M chunks)");
        Some(mds_state(4_600_000)?)
    } else {
        None
    };
    let mut predictor_scores = Vec::new();
    if let Some(seed) = options.predictors {
        let g_min = options.g_mins[0];
        predictor_scores = predictors::generated_scores(seed, options.replicas, g_min)?;
        predictor_scores.extend(load_reports.iter().filter_map(|t| t.predictors.clone()));
    }
    Ok(Report {
        predictors: predictor_scores,
        mds_state,
        options: options.clone(),
        server,
        server_preset: SERVER_PRESET,
        load_traces: load_reports,
        schedules,
        skipped,
        testbed: testbeds,
        micro,
    })
}
