//! Which text format a trace is in, judged from its first lines.

use crate::format::{Format, TimeUnit};
use crate::parse::{parse_line, Line, ParseOptions};

/// Lines of a sample that detection looks at.
const DETECT_LINES_MAX: usize = 64;

/// The text format of a trace, judged from its first bytes (already decompressed): the format
/// under which the most sampled lines are records, provided malformed lines are fewer than a
/// tenth of them (so one bad line does not hide the format); ties go to the earlier format in
/// a fixed order. `at_eof` says whether `sample` is the whole input (so its last line is
/// complete even without a newline).
pub fn detect_text(sample: &[u8], at_eof: bool) -> Option<Format> {
    const ORDER: [Format; 8] = [
        Format::CloudPhysics,
        Format::Systor17,
        Format::Msr,
        Format::Spc,
        Format::Tencent,
        Format::Blkparse,
        Format::Ascii5,
        Format::Arc,
    ];
    let complete = if at_eof {
        sample
    } else {
        match memchr::memrchr(b'\n', sample) {
            Some(end) => &sample[..end],
            None => return None,
        }
    };
    let mut lines: Vec<&[u8]> = complete
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(|b| b.is_ascii_whitespace()))
        .take(DETECT_LINES_MAX)
        .collect();
    // A header row counts for no format (the formats that have one ignore it themselves).
    if lines.first().is_some_and(|l| looks_like_header(l)) {
        lines.remove(0);
    }
    let options = ParseOptions::default();
    let mut best: Option<(Format, usize)> = None;
    for format in ORDER {
        let (mut records, mut malformed) = (0, 0);
        for line in &lines {
            match parse_line(format, line, &options) {
                Ok(Line::Record(_)) => records += 1,
                Ok(Line::Ignore) => {}
                Ok(Line::End) => break,
                Err(_) => malformed += 1,
            }
        }
        let plausible = records > 0 && malformed * 10 <= records;
        if plausible && best.is_none_or(|(_, most)| records > most) {
            best = Some((format, records));
        }
    }
    best.map(|(format, _)| format)
}

/// Whether a line reads as a header row: every field (split on commas, semicolons, tabs and
/// spaces) a word, starting with a letter or a quote, none a number.
pub fn looks_like_header(line: &[u8]) -> bool {
    let mut fields = line
        .split(|b| matches!(b, b',' | b';' | b'\t' | b' ' | b'\r'))
        .filter(|f| !f.is_empty())
        .peekable();
    fields.peek().is_some() && fields.all(|f| f[0].is_ascii_alphabetic() || f[0] == b'"')
}

/// How the unit of an ASCII5 trace's timestamps was chosen (the format does not record it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeUnitChoice {
    pub unit: TimeUnit,
    pub how: UnitSource,
    /// Why, in words: the evidence, and for an assumed unit the alternatives it leaves.
    pub reason: String,
}

/// Where a time unit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitSource {
    /// `--time-unit`.
    Given,
    /// The sample admits one unit.
    Detected,
    /// The sample admits several: DiskSim's milliseconds, a warning, and the flag to pass.
    Assumed,
}

/// The slowest and fastest median request rates a unit may imply to be plausible: a trace whose
/// typical gap between requests is over 10 s or under 1 µs under some unit is not in that unit.
const PLAUSIBLE_RATE_PER_S: (f64, f64) = (0.1, 1e6);

/// The unit of ASCII5 timestamps judged from a sample of the trace (its first lines):
///
/// 1. integer timestamps that are all multiples of 1000, at a plausible rate in nanoseconds, are
///    nanoseconds (MQSim writes nanoseconds from a microsecond clock): detected;
/// 2. otherwise the units under which the median gap between consecutive requests gives a
///    plausible rate (0.1/s to 10^6/s): one such unit is detected; several leave DiskSim's
///    milliseconds (or the finest plausible unit when milliseconds are not among them), assumed,
///    with each alternative's span named; none (all timestamps equal) assumes milliseconds.
pub fn detect_time_unit(sample: &[u8], at_eof: bool) -> TimeUnitChoice {
    const UNITS: [(TimeUnit, &str); 4] = [
        (TimeUnit::Ns, "ns"),
        (TimeUnit::Us, "us"),
        (TimeUnit::Ms, "ms"),
        (TimeUnit::S, "s"),
    ];
    let complete = if at_eof {
        sample
    } else {
        memchr::memrchr(b'\n', sample).map_or(&sample[..0], |end| &sample[..end])
    };
    // Raw timestamps in thousandths of the file's unit, and whether any has a fraction.
    let mut stamps: Vec<f64> = Vec::new();
    let (mut fractional, mut all_thousands) = (false, true);
    for line in complete.split(|b| *b == b'\n') {
        let Some(first) = line
            .split(|b| b.is_ascii_whitespace())
            .find(|w| !w.is_empty())
        else {
            continue;
        };
        let Some(text) = std::str::from_utf8(first).ok() else {
            continue;
        };
        let Ok(value) = text.parse::<f64>() else {
            continue;
        };
        if !value.is_finite() || value < 0.0 {
            continue;
        }
        if text.contains(['.', 'e', 'E']) {
            fractional = true;
        } else if text.parse::<u64>().map_or(true, |v| v % 1000 != 0) {
            all_thousands = false;
        }
        stamps.push(value);
    }
    let mut gaps: Vec<f64> = stamps
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 0.0)
        .collect();
    let assumed = |reason: String| TimeUnitChoice {
        unit: TimeUnit::Ms,
        how: UnitSource::Assumed,
        reason,
    };
    if gaps.is_empty() {
        return assumed(
            "no two sampled timestamps differ: assuming ms, DiskSim's convention (pass --time-unit)"
                .into(),
        );
    }
    gaps.sort_by(f64::total_cmp);
    let median = gaps[gaps.len() / 2];
    let span = stamps.iter().copied().fold(f64::MIN, f64::max)
        - stamps.iter().copied().fold(f64::MAX, f64::min);
    let rate = |unit: TimeUnit| 1e9 / (median * unit.ns_per_unit() as f64);
    let plausible: Vec<(TimeUnit, &str)> = UNITS
        .into_iter()
        .filter(|(u, _)| {
            let r = rate(*u);
            !(fractional && *u == TimeUnit::Ns)
                && r >= PLAUSIBLE_RATE_PER_S.0
                && r <= PLAUSIBLE_RATE_PER_S.1
        })
        .collect();
    let describe = |unit: TimeUnit, name: &str| {
        format!(
            "{name}: a median gap of {}, {} over the first {} requests",
            human_s(median * unit.ns_per_unit() as f64 / 1e9),
            human_s(span * unit.ns_per_unit() as f64 / 1e9),
            stamps.len()
        )
    };
    if !fractional && all_thousands && plausible.iter().any(|(u, _)| *u == TimeUnit::Ns) {
        return TimeUnitChoice {
            unit: TimeUnit::Ns,
            how: UnitSource::Detected,
            reason: format!(
                "integer timestamps, all multiples of 1000 (MQSim's nanoseconds) — {}",
                describe(TimeUnit::Ns, "ns")
            ),
        };
    }
    match plausible.as_slice() {
        [(unit, name)] => TimeUnitChoice {
            unit: *unit,
            how: UnitSource::Detected,
            reason: format!(
                "the only unit giving a plausible request rate — {}",
                describe(*unit, name)
            ),
        },
        [] => assumed(format!(
            "no unit gives a plausible request rate (median gap {median} in the file's unit): assuming ms, DiskSim's convention (pass --time-unit)"
        )),
        several => {
            let (unit, name) = several
                .iter()
                .find(|(u, _)| *u == TimeUnit::Ms)
                .copied()
                .unwrap_or(several[0]);
            let others: Vec<String> = several
                .iter()
                .filter(|(u, _)| *u != unit)
                .map(|(u, n)| describe(*u, n))
                .collect();
            TimeUnitChoice {
                unit,
                how: UnitSource::Assumed,
                reason: format!(
                    "assuming {} ({}); equally plausible: {} — pass --time-unit to say which",
                    name,
                    describe(unit, name),
                    others.join("; ")
                ),
            }
        }
    }
}

/// "143 s", "2.4 ms", "37.9 h".
fn human_s(s: f64) -> String {
    if s >= 7200.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else {
        format!("{:.0} ns", s * 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_units_are_detected_or_assumed_with_the_alternatives() {
        let mqsim = b"938513000 4 264719034 16 0\n938828000 3 197570570 16 0\n938944000 13 93230992 32 0\n939010000 5 2 16 0\n";
        let c = detect_time_unit(mqsim, true);
        assert_eq!(
            (c.unit, c.how),
            (TimeUnit::Ns, UnitSource::Detected),
            "{}",
            c.reason
        );
        let disksim = b"0.000 5 1 16 1\n0.221 5 2 16 1\n0.594 5 3 16 1\n0.958 5 4 16 1\n";
        let c = detect_time_unit(disksim, true);
        assert_eq!(
            (c.unit, c.how),
            (TimeUnit::Ms, UnitSource::Assumed),
            "{}",
            c.reason
        );
        assert!(c.reason.contains("s: a median gap"), "{}", c.reason);
        // Integer gaps of about 2 million, not multiples of 1000: ns (500/s) and us (0.5/s)
        // are both plausible; ms is not, so the finest plausible unit is assumed.
        let ints = b"11413001 0 1 16 1\n13565003 1 2 64 1\n15721007 1 3 16 1\n";
        let c = detect_time_unit(ints, true);
        assert_eq!(
            (c.unit, c.how),
            (TimeUnit::Ns, UnitSource::Assumed),
            "{}",
            c.reason
        );
        let same = b"5 0 1 16 1\n5 0 2 16 1\n";
        assert_eq!(detect_time_unit(same, true).how, UnitSource::Assumed);
        // A cut last line is not read unless the sample is the whole input.
        let cut = b"1000 0 1 16 1\n2000 0 2 16 1\n3000 0 3 16 1\n40";
        assert_eq!(
            detect_time_unit(cut, false).unit,
            detect_time_unit(&cut[..42], true).unit
        );
    }
}
