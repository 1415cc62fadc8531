//! Units. Every quantity in Cordillera carries its unit in its name (`length_bytes`, `time_ns`);
//! these are the conversions between them.

/// The block size of the papers' analyses: working sets, reaccesses and cache blocks are counted
/// in 4 KiB blocks (Bonfire §3, Everest §3.1).
pub const BLOCK_BYTES: u64 = 4096;

/// The sector size of the trace formats that count in sectors (SPC, ASCII5, Tencent,
/// CloudPhysics, blkparse).
pub const SECTOR_BYTES: u64 = 512;

pub const NS_PER_US: i64 = 1_000;
pub const NS_PER_MS: i64 = 1_000_000;
pub const NS_PER_S: i64 = 1_000_000_000;
pub const NS_PER_HOUR: i64 = 3_600 * NS_PER_S;
pub const NS_PER_DAY: i64 = 24 * NS_PER_HOUR;

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;

/// Windows FILETIME ticks (100 ns since 1601-01-01 UTC) at the Unix epoch.
pub const FILETIME_TICKS_AT_UNIX_EPOCH: i64 = 116_444_736_000_000_000;

/// Nanoseconds as seconds, for reports.
pub fn ns_to_s(ns: i64) -> f64 {
    ns as f64 / NS_PER_S as f64
}

/// Seconds (possibly fractional, possibly from a trace) to nanoseconds, or `None` when the value
/// is not finite or out of range.
pub fn s_to_ns(s: f64) -> Option<i64> {
    let ns = (s * NS_PER_S as f64).round();
    if ns.is_finite() && ns.abs() < i64::MAX as f64 {
        Some(ns as i64)
    } else {
        None
    }
}

/// Formats a Unix time in ns as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn format_unix_ns(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(NS_PER_S);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
/// (H. Hinnant's `civil_from_days`.)
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msr_first_record_is_the_published_wall_clock_time() {
        // INVENTORY.md: 128166481075232275 = 2007-02-22 20:01:47 UTC.
        let ticks: i64 = 128_166_481_075_232_275;
        let unix_ns = (ticks - FILETIME_TICKS_AT_UNIX_EPOCH) * 100;
        assert_eq!(format_unix_ns(unix_ns), "2007-02-22 20:01:47");
        assert_eq!(format_unix_ns(0), "1970-01-01 00:00:00");
        assert_eq!(format_unix_ns(-1), "1969-12-31 23:59:59");
    }

    #[test]
    fn seconds_round_trip() {
        assert_eq!(s_to_ns(1.5), Some(1_500_000_000));
        assert_eq!(s_to_ns(f64::NAN), None);
        assert_eq!(s_to_ns(1e300), None);
    }
}
