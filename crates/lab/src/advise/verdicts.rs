//! One verdict per mechanism, each from its lab run on the trace with settings derived from the
//! characterization.

use cordillera_types::units::{MIB, NS_PER_S};

use super::*;
use crate::render::format::duration;
use crate::spread::{self, Figure};

/// Below this mean speed-up in the peaks, off-loading is not worth its stores.
pub const OFFLOAD_MIN_SPEEDUP: f64 = 1.2;
/// A trace at least this long counts as two days (a generated or cut trace of two days ends
/// a little before its 48th hour).
pub const TWO_DAYS_S: f64 = 1.9 * 86_400.0;
/// A trace at least this long counts as a day (a day's trace ends a little before its 24th
/// hour).
pub const ONE_DAY_S: f64 = 0.95 * 86_400.0;
/// Writes a peak off-load verdict needs at least: fewer make no peak worth replaying.
pub const OFFLOAD_MIN_WRITES: u64 = 1000;
/// Reads a warm-up verdict needs at least, and the share of requests below which a read cache
/// cannot matter (even a perfect one serves only that share).
pub const WARMUP_MIN_READS: u64 = 5000;
pub const WARMUP_MIN_READ_PCT: f64 = 2.0;
/// A warmed cache that serves this many more points of the reads than a cold one is worth its
/// log (or one that converges sooner).
pub const WARMUP_MIN_GAIN_POINTS: f64 = 5.0;
/// Below this energy saving, gears are not worth their complexity.
pub const GEARS_MIN_SAVING: f64 = 0.10;

/// How the trace argument reads in a shell command.
pub(super) fn arg(o: &Options) -> String {
    let a = &o.trace_arg;
    if a.is_empty() {
        return "TRACE (the built-in workload: run advise with --out DIR to save it as DIR/workload.cdt)"
            .to_owned();
    }
    let word = |w: &str| {
        if !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-:=,+".contains(c))
        {
            w.to_owned()
        } else {
            format!("'{}'", w.replace('\'', "'\\''"))
        }
    };
    std::iter::once(a.as_str())
        .chain(o.trace_flags.iter().map(|f| f.as_str()))
        .map(word)
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn verdict(
    mechanism: &'static str,
    paper: &'static str,
    outcome: Outcome,
    summary: String,
    why: Vec<String>,
) -> Verdict {
    Verdict {
        mechanism,
        paper,
        outcome,
        summary,
        why,
        figures: Vec::new(),
        commands: Vec::new(),
        next_step: match outcome {
            Outcome::CannotJudge => "bring a trace that shows what is missing, e.g. a longer one recorded on the volume itself (`cordillera volume serve … --record-trace FILE`)".to_owned(),
            _ => String::new(),
        },
        confidence: None,
        alternatives: Vec::new(),
    }
}

/// The verdict on a trace without timestamps: `what` says why time matters to the mechanism.
fn no_time(mechanism: &'static str, paper: &'static str, what: &str) -> Verdict {
    verdict(
        mechanism,
        paper,
        Outcome::CannotJudge,
        format!("the trace has no timestamps: {what}"),
        vec![],
    )
}

/// "12.3 ms (10.1–14.0 over 3 seeds)", "12.3 ms (the same in all 3 seeds)" or "12.3 ms".
pub fn with_spread(s: &spread::Spread) -> String {
    let v = spread::number;
    let unit = if s.unit.is_empty() || s.unit == "×" {
        s.unit.to_owned()
    } else {
        format!(" {}", s.unit)
    };
    match s.values.len() {
        0 | 1 => format!("{}{unit}", v(s.mean)),
        n if v(s.min) == v(s.max) => format!("{}{unit} (the same in all {n} seeds)", v(s.mean)),
        n => format!(
            "{}{unit} ({}–{} over {n} seeds)",
            v(s.mean),
            v(s.min),
            v(s.max)
        ),
    }
}

pub(super) fn find<'a>(rows: &'a [spread::Spread], key: &str) -> Option<&'a spread::Spread> {
    rows.iter().find(|r| r.key == key)
}

/// The verdict when the trace cannot show write peaks: no timestamps, no writes, too few.
fn offload_evidence(c: &Characterization, m: &'static str, p: &'static str) -> Option<Verdict> {
    let total = &c.stats.total;
    if !c.has_time {
        return Some(no_time(m, p, "peaks are bursts in time"));
    }
    if total.writes == 0 {
        return Some(verdict(
            m,
            p,
            Outcome::DoesNotApply,
            "no writes: off-loading moves writes, and this trace has none".into(),
            vec![format!("{} requests, all reads", total.records)],
        ));
    }
    (total.writes < OFFLOAD_MIN_WRITES).then(|| {
        verdict(
            m,
            p,
            Outcome::CannotJudge,
            format!(
                "{} writes: too few to find write peaks (a verdict needs {OFFLOAD_MIN_WRITES})",
                total.writes
            ),
            vec![],
        )
    })
}

/// Everest: the busiest episodes replayed without and with peak off-loading.
pub fn peak_offload(
    c: &Characterization,
    device: &crate::devices::DeviceChoice,
    open: &Open,
    o: &Options,
    details: &mut Details,
    progress: &(dyn Fn(&str) + Sync),
) -> Verdict {
    const M: &str = "peak off-load";
    const P: &str = "Everest (FAST'08)";
    if let Some(v) = offload_evidence(c, M, P) {
        return v;
    }
    let mut settings = c.peaks_options;
    if o.quick {
        settings.episodes = 1;
    }
    // One run: the simulator's seed sets store identities and the network's draws, and with
    // no faults and a fixed network latency a fixed trace replays the same whatever the seed
    // (identical figures in every seed on every trace tried). The spread worth showing is
    // across the peaks.
    let options = crate::everest::Options {
        peaks: settings.options(),
        parts: crate::everest::Parts::default(),
        seed: o.seed,
        device: device.spec.kind.preset.to_owned(),
        array: device.spec.array,
        ..crate::everest::Options::default()
    };
    progress(&format!(
        "peak off-load: {} episode(s) × 3 configurations",
        settings.episodes
    ));
    let mut open_once = || open();
    let mut say = |line: &str| progress(&format!("peak off-load: {line}"));
    let report = match crate::everest::run(&mut open_once, &c.source, &options, &mut say) {
        Ok(r) => r,
        Err(e) => {
            return verdict(
                M,
                P,
                Outcome::CannotJudge,
                format!("the peak replay failed: {e}"),
                vec![],
            )
        }
    };
    let rows = spread::spread(&[(o.seed, offload_figures(&report, c))]);
    let mut why = vec![format!(
        "judged on {}, with a store on the last 2.9 % of each volume ({})",
        device.description,
        match device.chosen {
            crate::devices::Chosen::Given => "given",
            crate::devices::Chosen::Fitted => "fitted from the trace's response times",
            crate::devices::Chosen::Assumed => "assumed: the trace records no response times",
        }
    )];
    why.extend(peak_reasons(&report, c));
    let mut v = verdict(M, P, Outcome::CannotJudge, String::new(), why);
    v.commands.push(format!(
        "cordillera lab everest --trace {} --main-only --episodes {} --align centred --rate-window-s {} --segment-s {} --seed {} {}",
        arg(o),
        settings.episodes,
        settings.rate_window_s,
        settings.segment_s,
        o.seed,
        device.spec.flags(),
    ));
    let (Some(base), Some(peak), Some(speedup)) = (
        find(&rows, "offload/baseline_ms"),
        find(&rows, "offload/peak_ms"),
        find(&rows, "offload/speedup"),
    ) else {
        v.summary = "no peak held requests to replay".into();
        v.figures = rows;
        details.everest = vec![report];
        return v;
    };
    let per_peak: Vec<f64> = report
        .episodes
        .iter()
        .filter_map(|e| e.peak_speedup)
        .filter(|x| x.is_finite())
        .collect();
    let store = find(&rows, "offload/store_pct_of_working_set");
    let store_mb = find(&rows, "offload/store_mb");
    v.outcome = if speedup.mean >= OFFLOAD_MIN_SPEEDUP {
        Outcome::Applies
    } else {
        Outcome::DoesNotApply
    };
    v.summary = format!(
        "mean response in the top {} peak(s) {} ms → {} ms: {}×{}{}",
        report.episodes.len(),
        spread::number(base.mean),
        spread::number(peak.mean),
        spread::number(speedup.mean),
        if per_peak.len() > 1 {
            format!(
                " ({}–{}× across the {} peaks)",
                spread::number(per_peak.iter().copied().fold(f64::INFINITY, f64::min)),
                spread::number(per_peak.iter().copied().fold(0.0, f64::max)),
                per_peak.len()
            )
        } else {
            String::new()
        },
        match (store_mb, store) {
            (Some(mb), Some(pct)) => format!(
                "; needs {} MB of store space, {} % of the trace's working set",
                spread::number(mb.max),
                spread::number(pct.max)
            ),
            _ => String::new(),
        }
    );
    if v.outcome == Outcome::DoesNotApply {
        v.why.push(format!(
            "the peaks do not overload the disks enough: peak off-load acts only when a volume has more than T_base = {} requests in flight; mean speed-up below {OFFLOAD_MIN_SPEEDUP}×",
            report.t_base
        ));
    } else {
        v.why.push(format!(
            "writes in the peaks queue behind each other on the busy volumes; off-loaded to idle volumes' logs they no longer do (T_base = {})",
            report.t_base
        ));
    }
    v.why.push(
        "one replay: a fixed trace replays the same whatever the simulator's seed (no faults, a fixed network latency), so the spread is across the peaks".into(),
    );
    super::guidance::offload_guidance(
        &mut v,
        &report,
        &per_peak,
        (base.mean, speedup.mean),
        store_mb,
    );
    v.figures = rows;
    details.everest = vec![report];
    v
}

/// One Everest run's figures: requests-weighted means over the episodes.
fn offload_figures(r: &crate::everest::Report, c: &Characterization) -> Vec<Figure> {
    let mut out = Vec::new();
    let (mut n, mut base, mut peak, mut max_bytes) = (0u64, 0.0, 0.0, 0u64);
    for e in &r.episodes {
        let (Some(b), Some(p)) = (e.configs.baseline.mean_ms, e.configs.peak.mean_ms) else {
            continue;
        };
        let k = e.configs.baseline.requests;
        n += k;
        base += b * k as f64;
        peak += p * k as f64;
        max_bytes = max_bytes.max(e.configs.peak.offloaded_max_bytes);
    }
    if n == 0 || peak <= 0.0 {
        return out;
    }
    let (base, peak) = (base / n as f64, peak / n as f64);
    out.push(Figure::new(
        "offload/baseline_ms",
        "mean response in the peaks, no off-load",
        "ms",
        base,
        "",
    ));
    out.push(Figure::new(
        "offload/peak_ms",
        "mean response in the peaks, peak off-load",
        "ms",
        peak,
        "",
    ));
    out.push(Figure::new(
        "offload/speedup",
        "speed-up of the mean response in the peaks",
        "×",
        base / peak,
        "\"almost two orders of magnitude\" (Exchange, §4.1)",
    ));
    out.push(Figure::new(
        "offload/store_mb",
        "largest off-loaded data at once",
        "MB",
        max_bytes as f64 / 1e6,
        "",
    ));
    if c.working_set_bytes > 0 {
        out.push(Figure::new(
            "offload/store_pct_of_working_set",
            "largest off-loaded data over the working set",
            "%",
            max_bytes as f64 * 100.0 / c.working_set_bytes as f64,
            "",
        ));
    }
    out
}

/// Sierra: the hourly load, its gears and their energy; with two days, the prediction.
pub fn gears(
    c: &Characterization,
    open: &Open,
    o: &Options,
    details: &mut Details,
    progress: &(dyn Fn(&str) + Sync),
) -> Verdict {
    const M: &str = "gears";
    const P: &str = "Sierra (EuroSys'11)";
    if !c.has_time {
        return no_time(M, P, "gears follow the load over the day");
    }
    if c.duration_s < ONE_DAY_S {
        return verdict(
            M,
            P,
            Outcome::CannotJudge,
            format!(
                "the trace covers {}: gears follow a diurnal pattern, which takes a day or more to see",
                duration(c.duration_s)
            ),
            vec!["run advise on a trace of a day or more (two or more to judge the prediction)".into()],
        );
    }
    let two_days = c.duration_s >= TWO_DAYS_S;
    let open_one = open.clone();
    let input = crate::sierra::Input {
        name: c.source.clone(),
        open: Box::new(move || open_one()),
        maintenance_hours: Vec::new(),
        utc_offset_hours: 0,
        load_trace: two_days,
        io_trace: true,
    };
    progress("gears: the hourly load, the oracle gears and their power");
    let options = crate::sierra::Options::default();
    let mut say = |line: &str| progress(&format!("gears: {line}"));
    let report = match crate::sierra::run(vec![input], &options, &mut say) {
        Ok(r) => r,
        Err(e) => {
            return verdict(
                M,
                P,
                Outcome::CannotJudge,
                format!("the load analysis failed: {e}"),
                vec![],
            )
        }
    };
    let mut figures = Vec::new();
    let mut why = Vec::new();
    if let Some((min, max)) = c.diurnal_swing() {
        why.push(format!(
            "by hour of day the quietest hour carries {:.0} % of the busiest hour's bytes",
            if max > 0.0 { min * 100.0 / max } else { 0.0 }
        ));
    }
    let Some(s) = report.schedules.first() else {
        let reason = report.skipped.join("; ");
        return verdict(
            M,
            P,
            Outcome::CannotJudge,
            format!("no schedule: {reason}"),
            why,
        );
    };
    for p in &s.power {
        figures.push(Figure::new(
            format!("gears/g_min{}/saving_pct", p.g_min),
            format!("energy saved by the chunk servers, g_min = {}", p.g_min),
            "%",
            (1.0 - p.chunk_servers_over_baseline) * 100.0,
            if p.g_min == 1 {
                "\"at least 23 %\" (Hotmail, 48 h)"
            } else {
                ""
            },
        ));
        figures.push(Figure::new(
            format!("gears/g_min{}/servers_on_pct", p.g_min),
            format!("mean chunk servers powered, g_min = {}", p.g_min),
            "%",
            p.chunk_servers_on * 100.0,
            "",
        ));
    }
    let mut correct = None;
    if let Some(l) = report.load_traces.first() {
        if let Some(best) = l.prediction.iter().max_by_key(|p| p.training_days) {
            let f = best.gears_correct_fraction() * 100.0;
            correct = Some((f, best.training_days, best.test_days));
            figures.push(Figure::new(
                "gears/prediction_correct_pct",
                format!(
                    "hours whose predicted gear was right ({} training day(s))",
                    best.training_days
                ),
                "%",
                f,
                "",
            ));
        }
    }
    let rows = spread::spread(&[(o.seed, figures)]);
    let saving = find(&rows, "gears/g_min1/saving_pct").map_or(0.0, |r| r.mean);
    let outcome = if saving >= GEARS_MIN_SAVING * 100.0 {
        Outcome::Applies
    } else {
        Outcome::DoesNotApply
    };
    why.push(format!(
        "{} chunk servers provisioned for the busiest hour ({:.1} servers of load); each hour runs the fewest gear groups that carry its load",
        s.chunk_servers, s.peak_servers_max
    ));
    if s.peak_servers_max <= 1.0 {
        why.push(format!(
            "the busiest hour needs {:.1} server(s) of load: most of the saving comes from the replicas' minimum of {} servers being more than the load needs at any hour, not from the day's swing",
            s.peak_servers_max, s.chunk_servers
        ));
    }
    if outcome == Outcome::DoesNotApply {
        why.push(format!(
            "the load stays near its peak: below {:.0} % saved, powering servers down is not worth the migrations",
            GEARS_MIN_SAVING * 100.0
        ));
    }
    let mut summary = format!("{saving:.0} % of the chunk servers' energy saved with g_min = 1");
    match correct {
        Some((f, train, test)) => summary.push_str(&format!(
            ", the gear predicted right {f:.0} % of hours ({train} day(s) of training, {test} tested)"
        )),
        None => summary.push_str(" (the prediction not judged: it trains on whole days and tests on the next)"),
    }
    for skipped in &report.skipped {
        why.push(format!("not judged: {skipped}"));
    }
    let mut v = verdict(M, P, outcome, summary, why);
    super::guidance::gears_guidance(&mut v, s, saving, c.days());
    v.figures = rows;
    v.commands.push(format!(
        "cordillera lab sierra --trace {} --parts analysis",
        arg(o)
    ));
    details.sierra = Some(report);
    v
}

/// The verdict when the trace cannot show a cache warming: no timestamps, no or few reads.
fn warmup_evidence(c: &Characterization, m: &'static str, p: &'static str) -> Option<Verdict> {
    if !c.has_time {
        return Some(no_time(m, p, "warm-up is judged day by day"));
    }
    if c.stats.total.reads == 0 {
        return Some(verdict(
            m,
            p,
            Outcome::DoesNotApply,
            "no reads: a read cache has nothing to serve, warm or cold".into(),
            vec![format!("{} requests, all writes", c.stats.total.records)],
        ));
    }
    let (reads, records) = (c.stats.total.reads, c.stats.total.records);
    let read_pct = reads as f64 * 100.0 / records.max(1) as f64;
    if read_pct < WARMUP_MIN_READ_PCT {
        return Some(verdict(
            m,
            p,
            Outcome::DoesNotApply,
            format!(
                "reads are {read_pct:.1} % of the requests ({reads} of {records}): even a perfect read cache would serve no more than that"
            ),
            vec![format!("a read cache matters from {WARMUP_MIN_READ_PCT} % reads")],
        ));
    }
    if reads < WARMUP_MIN_READS {
        return Some(verdict(
            m,
            p,
            Outcome::CannotJudge,
            format!(
                "{reads} reads: too few to judge how a cache warms (a verdict needs {WARMUP_MIN_READS})"
            ),
            vec![],
        ));
    }
    None
}

/// Bonfire: days warmed from the day before at the paper's middle setting.
pub fn warmup(
    c: &Characterization,
    open: &Open,
    o: &Options,
    details: &mut Details,
    progress: &(dyn Fn(&str) + Sync),
) -> Verdict {
    const M: &str = "warm-up";
    const P: &str = "Bonfire (FAST'13)";
    if let Some(v) = warmup_evidence(c, M, P) {
        return v;
    }
    // Days of 24 h with two or more; else three periods over the trace.
    let (day_s, interval_s) = if c.duration_s >= TWO_DAYS_S {
        (86_400u64, 600u64)
    } else {
        let interval = ((c.duration_s / 90.0).floor() as u64).max(1);
        if c.duration_s < 90.0 {
            return verdict(
                M,
                P,
                Outcome::CannotJudge,
                format!(
                    "the trace covers {}: too short to cut into periods that warm one another (90 s or more)",
                    duration(c.duration_s)
                ),
                vec![],
            );
        }
        (interval * 30, interval)
    };
    let regions = if o.quick { vec![MIB] } else { vec![4096, MIB] };
    let options = crate::bonfire::Options {
        day_ns: day_s as i64 * NS_PER_S,
        interval_ns: interval_s as i64 * NS_PER_S,
        cache_pcts: vec![50.0],
        warmup_pcts: vec![10.0],
        region_bytes: regions.clone(),
        th_vs: vec![0.8],
        th_ns: vec![0.03],
        seed: o.seed,
        threads: o.threads,
        ..crate::bonfire::Options::default()
    };
    progress(&format!(
        "warm-up: {} of {} s, each warmed from the one before",
        if day_s == 86_400 { "days" } else { "periods" },
        day_s
    ));
    // One run per seed: Random-K, one of the schemes each case's best is chosen from, is seeded.
    let mut reports = Vec::new();
    for seed in o.seed_list() {
        let mut open_once = || open();
        let options = crate::bonfire::Options {
            seed,
            ..options.clone()
        };
        let say = |line: &str| progress(&format!("warm-up, seed {seed}: {line}"));
        match crate::bonfire::run_stream(&c.source, &mut open_once, &options, &say) {
            Ok(r) => reports.push(r),
            Err(e) => return verdict(M, P, Outcome::CannotJudge, e, vec![]),
        }
    }
    let report = &reports[0];
    let why = warmup_reasons(report, day_s);
    let h = &report.headline;
    let best = h
        .algorithms
        .iter()
        .max_by_key(|t| (t.best_converge, t.reduces_more_load_than_cold))
        .map(|t| t.algorithm);
    // Convergence times (the lab's are in hours) in the unit that fits the period.
    let (unit, per_unit_s) = if day_s >= 86_400 {
        ("h", 3600.0)
    } else if day_s >= 7200 {
        ("min", 60.0)
    } else {
        ("s", 1.0)
    };
    let runs: Vec<(u64, Vec<Figure>)> = o
        .seed_list()
        .into_iter()
        .zip(&reports)
        .map(|(seed, r)| (seed, warmup_figures(r, unit, per_unit_s)))
        .collect();
    let rows = spread::spread(&runs);
    let cold = find(&rows, "warmup/cold_converge").map(|r| r.mean * per_unit_s);
    let warm = find(&rows, "warmup/bonfire_converge").map(|r| r.mean * per_unit_s);
    let gain = find(&rows, "warmup/load_gain_points").map(|r| r.mean);
    let sooner = match (cold, warm) {
        (Some(c), Some(w)) => c > w,
        (None, Some(_)) => true,
        _ => false,
    };
    let applies = sooner || gain.is_some_and(|g| g >= WARMUP_MIN_GAIN_POINTS);
    let name = best.map_or("the best scheme".to_owned(), |a| a.to_string());
    let period = if day_s == 86_400 { "day" } else { "period" };
    let gain_row = find(&rows, "warmup/load_gain_points");
    let gain_text = match gain_row {
        Some(g) => with_spread(g),
        None => "nothing measurable".to_owned(),
    };
    let summary = warmup_summary(h.cases, applies, &name, period, (warm, cold), &gain_text);
    let outcome = if h.cases == 0 {
        Outcome::CannotJudge
    } else if applies {
        Outcome::Applies
    } else {
        Outcome::DoesNotApply
    };
    let mut v = verdict(M, P, outcome, summary, why);
    super::guidance::warmup_guidance(&mut v, gain_row, h, (period, sooner), &name);
    v.figures = rows;
    v.commands.push(format!(
        "cordillera lab bonfire --trace {} --parts days --day-s {day_s} --interval-s {interval_s} --cache-pct 50 --warmup-pct 10 --region {} --th-v 0.8 --th-n 0.03 --seed {}",
        arg(o),
        if regions.len() == 2 { "4k,1m" } else { "1m" },
        o.seed
    ));
    details.bonfire = reports.into_iter().next();
    v
}

/// The headline figures of one warm-up run: the convergence times (in `unit`, of
/// `per_unit_s` seconds) and the load gain of the 1 MiB region (or the first).
fn warmup_figures(
    report: &crate::bonfire::Report,
    unit: &'static str,
    per_unit_s: f64,
) -> Vec<Figure> {
    let mut figures = Vec::new();
    let row = report
        .table
        .iter()
        .find(|r| r.region_bytes == MIB)
        .or_else(|| report.table.first());
    if let Some(r) = row {
        let scaled = |x: Option<f64>| x.map(|h| h * 3600.0 / per_unit_s);
        if let Some(x) = scaled(r.cold_converge_h) {
            figures.push(Figure::new(
                "warmup/cold_converge",
                "cold cache converges after (median)",
                unit,
                x,
                "",
            ));
        }
        if let Some(x) = scaled(r.bonfire_converge_h) {
            figures.push(Figure::new(
                "warmup/bonfire_converge",
                "warmed cache converges after (median)",
                unit,
                x,
                "",
            ));
        }
        if let Some(x) = r.load_reduction_gain_points {
            figures.push(Figure::new(
                "warmup/load_gain_points",
                "server load reduction, warmed minus cold (median)",
                "points",
                x,
                "",
            ));
        }
        if let Some(x) = r.converge_improvement_pct {
            figures.push(Figure::new(
                "warmup/converge_improvement_pct",
                "convergence sooner than cold (median)",
                "%",
                x,
                "\"44–228 %\" improvement in T_converge (abstract)",
            ));
        }
    }
    figures
}

/// The warm-up verdict in a sentence: over `cases` volume-periods, the new cache's
/// convergence (`warm`, `cold` in seconds) and its gain.
fn warmup_summary(
    cases: usize,
    applies: bool,
    name: &str,
    period: &str,
    (warm, cold): (Option<f64>, Option<f64>),
    gain_text: &str,
) -> String {
    if cases == 0 {
        format!("no {period} had reads after one to warm from")
    } else if applies {
        let when = match (warm, cold) {
            (Some(0.0), Some(c)) => format!("converges at once, a cold one after {}", duration(c)),
            (Some(w), Some(c)) => format!(
                "converges {} sooner than a cold one ({} against {})",
                duration(c - w),
                duration(w),
                duration(c)
            ),
            (Some(w), None) => format!(
                "converges after {} where a cold one does not converge within its {period}",
                duration(w)
            ),
            _ => "converges no sooner than a cold one".to_owned(),
        };
        format!(
            "{name}: the new cache {when}, and serves {} more of the reads (median over {} volume-{period}(s))",
            gain_text,
            cases
        )
    } else {
        format!(
            "{}; warming gains {} of the reads",
            match cold {
                Some(c) => format!("a cold cache converges on its own after {}", duration(c)),
                None => format!("neither a cold nor a warmed cache converges within its {period}"),
            },
            gain_text
        )
    }
}

/// Why the warm-up verdict is what it is: the periods used when the trace is short, and each
/// volume's reaccess classes with the decision tree's choice (or why it was not judged).
fn warmup_reasons(report: &crate::bonfire::Report, day_s: u64) -> Vec<String> {
    let mut why = Vec::new();
    if day_s != 86_400 {
        why.push(format!(
            "the trace is shorter than two days: cut into periods of {day_s} s (each warmed from the one before) instead of days"
        ));
    }
    for v in &report.volumes {
        if let (Some(rec), Some(cls)) = (&v.recommendation, &v.reaccess) {
            why.push(format!(
                "{}: reaccessed blocks {:.0} % hourly, {:.0} % daily, {:.0} % other → the decision tree says {} ({})",
                v.volume,
                cls.hourly_block_pct,
                cls.daily_block_pct,
                cls.other_block_pct,
                rec.algorithm,
                rec.because
            ));
        }
        if let Some(s) = &v.skipped {
            why.push(format!("{}: not judged: {s}", v.volume));
        }
    }
    why
}

/// Each peak replayed: when, how busy beside the trace's mean, its reads, and its response
/// times without and with off-loading.
fn peak_reasons(report: &crate::everest::Report, c: &Characterization) -> Vec<String> {
    let total = &c.stats.total;
    let mut why = Vec::new();
    for e in &report.episodes {
        why.push(format!(
            "peak {}: {}–{} s, {:.0} requests/s at its busiest{}, {:.0} % reads{}",
            e.rank,
            spread::number(e.peak_start_s),
            spread::number(e.peak_end_s),
            e.peak_rate_per_s,
            match total.mean_rate_per_s {
                Some(m) if m > 0.0 && c.peak_to_mean().is_some() => format!(
                    " ({}× the trace's mean rate)",
                    spread::number(e.peak_rate_per_s / m)
                ),
                _ => String::new(),
            },
            e.read_pct.unwrap_or(0.0),
            match (
                e.configs.baseline.mean_ms,
                e.configs.peak.mean_ms,
                e.peak_speedup
            ) {
                (Some(b), Some(p), Some(x)) => format!(
                    "; mean response {} → {} ms, {}×",
                    spread::number(b),
                    spread::number(p),
                    spread::number(x)
                ),
                _ => String::new(),
            }
        ));
    }
    why
}
