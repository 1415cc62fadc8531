//! Which trace hours §4.5's experiments replay.

use crate::sierra::analysis::ScheduledHour;

/// The hours §4.5's windows are about: the steady hour, and the hours an up-shift and a
/// down-shift take effect.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Windows {
    pub(super) steady: Option<i64>,
    pub(super) upshift: Option<i64>,
    pub(super) downshift: Option<i64>,
}

/// Whether a trace hour may be chosen.
type HourFilter<'a> = &'a dyn Fn(i64) -> bool;

/// §4.5's choice on the oracle schedule (`hours`, gears of policy `g_index`); `written` is each
/// trace hour's bytes written. Each window is chosen outside the `maintenance` hours of day when
/// one of its kind qualifies there (unless `allow_maintenance`), else among all hours: §4.3
/// provisions N for the peak outside maintenance, so in it the top gear is below the load by
/// design, yet a trace whose gears change only around maintenance still gets its experiments.
pub(super) fn choose_windows(
    hours: &[ScheduledHour],
    g_index: usize,
    written: &[(i64, u64)],
    maintenance: &[usize],
    allow_maintenance: bool,
) -> Windows {
    let gear_of = |h: i64| {
        hours
            .iter()
            .find(|x| x.hour == h)
            .map_or(3, |x| x.gears[g_index])
    };
    let known = |h: i64| hours.iter().any(|x| x.hour == h);
    let top = hours.iter().map(|x| x.gears[g_index]).max().unwrap_or(3);
    let lowest = hours.iter().map(|x| x.gears[g_index]).min().unwrap_or(3);
    let outside = |h: i64| !maintenance.contains(&(h.rem_euclid(24) as usize));
    let choose = |pick: &dyn Fn(HourFilter) -> Option<i64>| {
        let chosen = pick(&outside);
        if allow_maintenance || chosen.is_none() {
            pick(&|_| true)
        } else {
            chosen
        }
    };
    Windows {
        // Of the hours in the lowest gear, the one with the highest peak load.
        steady: choose(&|allowed| {
            hours
                .iter()
                .filter(|x| x.gears[g_index] == lowest && lowest < top && allowed(x.hour))
                .max_by(|a, b| a.peak_servers.total_cmp(&b.peak_servers))
                .map(|x| x.hour)
        }),
        // The transition into the top gear with the most data logged: chosen by the bytes
        // written in the stretch below the top gear before it.
        upshift: choose(&|allowed| {
            let mut upshift: Option<(i64, u64)> = None;
            let mut stretch = 0u64;
            for &(hour, bytes) in written {
                if gear_of(hour) < top {
                    stretch += bytes;
                } else {
                    if known(hour - 1)
                        && gear_of(hour - 1) < top
                        && allowed(hour)
                        && upshift.is_none_or(|u| stretch > u.1)
                    {
                        upshift = Some((hour, stretch));
                    }
                    stretch = 0;
                }
            }
            upshift.map(|u| u.0)
        }),
        // The down-transition with the highest load just after it (the hour's mean load).
        downshift: choose(&|allowed| {
            hours
                .iter()
                .filter(|x| {
                    known(x.hour - 1)
                        && x.gears[g_index] < gear_of(x.hour - 1)
                        && allowed(x.hour)
                        && allowed(x.hour - 1)
                })
                .max_by(|a, b| a.mean_servers.total_cmp(&b.mean_servers))
                .map(|x| x.hour)
        }),
    }
}
