//! The small formatters the reports share: optional figures, CSV cells, durations.

use crate::spread::number;

/// A figure with `digits` decimals, or "-" when there is none.
pub fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A CSV cell: four decimals, or empty when there is no figure.
pub fn cell(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v:.4}"))
}

/// A duration in the unit that reads best: "0.4 s", "12.5 min", "3.2 h", "2.5 days".
pub fn duration(s: f64) -> String {
    if s >= 2.0 * 86_400.0 {
        format!("{:.1} days", s / 86_400.0)
    } else if s >= 2.0 * 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 120.0 {
        format!("{:.1} min", s / 60.0)
    } else if s >= 10.0 || s == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{} s", number(s))
    }
}

/// "512 KiB", "64 MiB", "1.5 GiB" (binary units, as cache sizes are given).
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.2} {}", UNITS[unit])
    }
}
