//! A daemon's power by the simulator's server power model (`cordillera_models::power`): the time
//! it spends up (busy while its disk has requests in flight, else idle), waking and in standby,
//! and the energy that time costs.

use std::time::Instant;

use serde::Serialize;

use cordillera_models::power::PowerParams;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PowerState {
    Up,
    Standby,
    Waking,
}

pub struct PowerMeter {
    params: PowerParams,
    state: PowerState,
    since: Instant,
    busy_since: Option<Instant>,
    up_s: f64,
    busy_s: f64,
    standby_s: f64,
    waking_s: f64,
    standbys: u64,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct PowerReport {
    pub state: PowerState,
    pub up_s: f64,
    /// Of `up_s`, with disk requests in flight.
    pub busy_s: f64,
    pub standby_s: f64,
    pub waking_s: f64,
    pub standbys: u64,
    /// By the model: active watts while busy, idle watts while up or waking, standby watts.
    pub energy_j: f64,
}

impl PowerMeter {
    pub fn new(params: PowerParams) -> PowerMeter {
        PowerMeter {
            params,
            state: PowerState::Up,
            since: Instant::now(),
            busy_since: None,
            up_s: 0.0,
            busy_s: 0.0,
            standby_s: 0.0,
            waking_s: 0.0,
            standbys: 0,
        }
    }

    pub fn params(&self) -> &PowerParams {
        &self.params
    }

    pub fn state(&self) -> PowerState {
        self.state
    }

    fn close(&mut self, now: Instant) {
        let s = now.duration_since(self.since).as_secs_f64();
        match self.state {
            PowerState::Up => self.up_s += s,
            PowerState::Standby => self.standby_s += s,
            PowerState::Waking => self.waking_s += s,
        }
        self.since = now;
        if let Some(b) = self.busy_since.as_mut() {
            self.busy_s += now.duration_since(*b).as_secs_f64();
            *b = now;
        }
    }

    pub fn set(&mut self, state: PowerState) {
        let now = Instant::now();
        self.close(now);
        if state == PowerState::Standby && self.state != PowerState::Standby {
            self.standbys += 1;
        }
        self.state = state;
    }

    /// The disk has requests in flight (`true`) or none.
    pub fn busy(&mut self, busy: bool) {
        let now = Instant::now();
        match (busy, self.busy_since) {
            (true, None) => self.busy_since = Some(now),
            (false, Some(b)) => {
                self.busy_s += now.duration_since(b).as_secs_f64();
                self.busy_since = None;
            }
            _ => {}
        }
    }

    pub fn report(&mut self) -> PowerReport {
        self.close(Instant::now());
        let p = &self.params;
        let busy = self.busy_s.min(self.up_s);
        let energy_j = p.active_w * busy
            + p.idle_w * (self.up_s - busy + self.waking_s)
            + p.standby_w * self.standby_s;
        PowerReport {
            state: self.state,
            up_s: self.up_s,
            busy_s: busy,
            standby_s: self.standby_s,
            waking_s: self.waking_s,
            standbys: self.standbys,
            energy_j,
        }
    }
}

/// A disk's operations in flight, for the power model: the meter counts the machine busy while
/// there are any.
pub struct DiskBusy {
    pub meter: PowerMeter,
    in_flight: u64,
}

impl DiskBusy {
    pub fn new(params: PowerParams) -> DiskBusy {
        DiskBusy {
            meter: PowerMeter::new(params),
            in_flight: 0,
        }
    }

    /// `ops` operations went to the disk (none: nothing changes).
    pub fn started(&mut self, ops: usize) {
        if ops > 0 {
            self.in_flight += ops as u64;
            self.meter.busy(true);
        }
    }

    /// `ops` of them completed; idle once none is left.
    pub fn finished(&mut self, ops: usize) {
        self.in_flight = self.in_flight.saturating_sub(ops as u64);
        if self.in_flight == 0 {
            self.meter.busy(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Busy from the first operation started to the last finished; starting none (an inline
    /// step with no flush to do) is no disk time.
    #[test]
    fn the_disk_is_busy_while_operations_are_in_flight() {
        let mut d = DiskBusy::new(PowerParams::default());
        d.started(0);
        std::thread::sleep(std::time::Duration::from_millis(30));
        d.finished(0);
        assert_eq!(d.meter.report().busy_s, 0.0, "no operation, no disk time");
        d.started(2);
        d.finished(1);
        std::thread::sleep(std::time::Duration::from_millis(30));
        d.finished(1);
        let busy = d.meter.report().busy_s;
        assert!(
            busy >= 0.025,
            "busy while one of two was in flight: {busy} s"
        );
        std::thread::sleep(std::time::Duration::from_millis(30));
        let after = d.meter.report().busy_s;
        assert!(
            after - busy < 0.005,
            "idle after the last finished: {busy} → {after} s"
        );
    }
}
