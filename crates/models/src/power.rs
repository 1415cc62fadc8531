//! Server power: each server is active, idle, in standby or off, with a power draw per state and
//! a transition time into each state (during which it draws active power). The model integrates
//! energy and the fraction of servers powered (not off or in standby) over time — Sierra's
//! measure of power proportionality.

use cordillera_types::Nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerState {
    Active,
    Idle,
    Standby,
    Off,
}

#[derive(Clone, Copy, Debug)]
pub struct PowerParams {
    pub active_w: f64,
    pub idle_w: f64,
    pub standby_w: f64,
    pub off_w: f64,
    /// Time to reach a powered state from standby or off, and to go down.
    pub wake_from_standby_ns: Nanos,
    pub boot_from_off_ns: Nanos,
    pub power_down_ns: Nanos,
}

impl Default for PowerParams {
    /// A commodity server of Sierra's era: 200 W active, 150 W idle, 10 W standby, 5 W off
    /// (management controller); 10 s out of standby, 120 s boot, 10 s to power down.
    fn default() -> PowerParams {
        PowerParams {
            active_w: 200.0,
            idle_w: 150.0,
            standby_w: 10.0,
            off_w: 5.0,
            wake_from_standby_ns: 10_000_000_000,
            boot_from_off_ns: 120_000_000_000,
            power_down_ns: 10_000_000_000,
        }
    }
}

impl PowerParams {
    fn watts(&self, state: PowerState) -> f64 {
        match state {
            PowerState::Active => self.active_w,
            PowerState::Idle => self.idle_w,
            PowerState::Standby => self.standby_w,
            PowerState::Off => self.off_w,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Server {
    state: PowerState,
    /// In a transition to `state` until this time.
    transition_until: Nanos,
    since: Nanos,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PowerReport {
    pub energy_j: f64,
    pub mean_power_w: f64,
    /// Time-weighted mean of the fraction of servers powered (in transition counts as powered).
    pub fraction_powered: f64,
    pub duration_s: f64,
}

pub struct PowerModel {
    params: PowerParams,
    servers: Vec<Server>,
    energy_j: f64,
    powered_ns: f64,
    start: Nanos,
}

impl PowerModel {
    /// `servers` servers, all idle at `now`.
    pub fn new(params: PowerParams, servers: usize, now: Nanos) -> PowerModel {
        PowerModel {
            params,
            servers: vec![
                Server {
                    state: PowerState::Idle,
                    transition_until: now,
                    since: now
                };
                servers
            ],
            energy_j: 0.0,
            powered_ns: 0.0,
            start: now,
        }
    }

    /// Charges server `i` from its last change up to `now`.
    fn settle(&mut self, i: usize, now: Nanos) {
        let s = self.servers[i];
        assert!(now >= s.since, "time goes forward");
        let transition_end = s.transition_until.clamp(s.since, now);
        let in_transition = (transition_end - s.since) as f64;
        let steady = (now - transition_end) as f64;
        self.energy_j +=
            (in_transition * self.params.active_w + steady * self.params.watts(s.state)) / 1e9;
        let powered = matches!(s.state, PowerState::Active | PowerState::Idle);
        self.powered_ns += in_transition + if powered { steady } else { 0.0 };
        self.servers[i].since = now;
    }

    /// Server `i` moves to `state` at `now`; waking or powering down takes its transition time.
    pub fn set_state(&mut self, now: Nanos, i: usize, state: PowerState) {
        self.settle(i, now);
        let from = self.servers[i].state;
        let delay = match (from, state) {
            (a, b) if a == b => 0,
            (PowerState::Standby, PowerState::Active | PowerState::Idle) => {
                self.params.wake_from_standby_ns
            }
            (PowerState::Off, PowerState::Active | PowerState::Idle) => {
                self.params.boot_from_off_ns
            }
            (PowerState::Active | PowerState::Idle, PowerState::Standby | PowerState::Off) => {
                self.params.power_down_ns
            }
            _ => 0,
        };
        let server = &mut self.servers[i];
        server.state = state;
        server.transition_until = now + delay;
    }

    /// When server `i` can serve requests (its transition's end).
    pub fn ready_at(&self, i: usize) -> Nanos {
        self.servers[i].transition_until
    }

    pub fn state(&self, i: usize) -> PowerState {
        self.servers[i].state
    }

    pub fn report(&mut self, now: Nanos) -> PowerReport {
        for i in 0..self.servers.len() {
            self.settle(i, now);
        }
        let duration_ns = (now - self.start) as f64;
        PowerReport {
            energy_j: self.energy_j,
            mean_power_w: if duration_ns > 0.0 {
                self.energy_j / (duration_ns / 1e9)
            } else {
                0.0
            },
            fraction_powered: if duration_ns > 0.0 {
                self.powered_ns / (duration_ns * self.servers.len() as f64)
            } else {
                1.0
            },
            duration_s: duration_ns / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    #[test]
    fn energy_and_fraction_powered_integrate_over_time() {
        let params = PowerParams::default();
        let mut m = PowerModel::new(params, 2, 0);
        // Server 0 busy for 100 s; server 1 goes to standby at once (10 s at active power).
        m.set_state(0, 0, PowerState::Active);
        m.set_state(0, 1, PowerState::Standby);
        let r = m.report(100 * S);
        let expected = 100.0 * 200.0 + 10.0 * 200.0 + 90.0 * 10.0;
        assert!((r.energy_j - expected).abs() < 1e-6, "{}", r.energy_j);
        assert!((r.fraction_powered - (100.0 + 10.0) / 200.0).abs() < 1e-9);
        // Waking takes 10 s at active power, after which it idles.
        m.set_state(100 * S, 1, PowerState::Idle);
        assert_eq!(m.ready_at(1), 110 * S);
        let r = m.report(120 * S);
        let expected = expected + 20.0 * 200.0 + 10.0 * 200.0 + 10.0 * 150.0;
        assert!((r.energy_j - expected).abs() < 1e-6);
        assert!((r.mean_power_w - expected / 120.0).abs() < 1e-9);
    }

    #[test]
    fn off_costs_a_boot() {
        let mut m = PowerModel::new(PowerParams::default(), 1, 0);
        m.set_state(0, 0, PowerState::Off);
        m.set_state(1_000 * S, 0, PowerState::Active);
        assert_eq!(m.ready_at(0), 1_120 * S);
        let r = m.report(1_120 * S);
        assert!((r.energy_j - (10.0 * 200.0 + 990.0 * 5.0 + 120.0 * 200.0)).abs() < 1e-6);
    }
}
