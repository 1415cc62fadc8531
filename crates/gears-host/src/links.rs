//! Link faults of Sierra's nodes: messages of Sierra's protocol dropped or delayed at random,
//! and stalls — windows in which everything a node sends (or sends to one peer) is held, as a
//! stalled link or NIC or a paused process would, longer than a lease. Links stay FIFO (TCP):
//! behind a held message to a node, later ones to it wait. Log traffic is never dropped (it runs
//! on connections lost only with a crash of either end, as the versioned store's protocol
//! assumes), but it is held by stalls.

use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::NodeId;
use cordillera_sim::rng::SimRng;

/// A node's outgoing messages held from `from` until `until`: all of them (`to` `None`: a
/// paused process or a stalled NIC), or those to one peer (a stalled link).
#[derive(Clone, Copy, Debug)]
pub struct Stall {
    pub from: Nanos,
    pub until: Nanos,
    pub to: Option<NodeId>,
}

/// The faults, and what they did.
#[derive(Debug)]
pub struct LinkFaults {
    /// Draws for drops and delays (`None`: neither).
    rng: Option<SimRng>,
    /// Chance a message of Sierra's protocol is dropped, or delayed (exponential, mean
    /// `delay_mean_ns`).
    drop: f64,
    delay: f64,
    delay_mean_ns: f64,
    /// Per node: its stalls.
    stalls: Vec<Vec<Stall>>,
    pub dropped: u64,
    pub delayed: u64,
    pub stalled: u64,
}

/// What becomes of a message.
pub(super) enum Fate {
    Send,
    Drop,
    /// Held until then.
    Hold(Nanos),
}

impl LinkFaults {
    pub fn none() -> LinkFaults {
        LinkFaults {
            rng: None,
            drop: 0.0,
            delay: 0.0,
            delay_mean_ns: 0.0,
            stalls: Vec::new(),
            dropped: 0,
            delayed: 0,
            stalled: 0,
        }
    }

    /// Drops and delays drawn from `rng`, and the given stalls (per node).
    pub fn new(
        rng: SimRng,
        drop: f64,
        delay: f64,
        delay_mean_ns: f64,
        stalls: Vec<Vec<Stall>>,
    ) -> LinkFaults {
        assert!((0.0..=1.0).contains(&drop) && (0.0..=1.0).contains(&delay));
        LinkFaults {
            rng: Some(rng),
            drop,
            delay,
            delay_mean_ns,
            stalls,
            ..LinkFaults::none()
        }
    }

    /// The fate of a message `from` → `to` sent at `now` (`droppable`: one of Sierra's).
    pub(super) fn fate(&mut self, now: Nanos, from: NodeId, to: NodeId, droppable: bool) -> Fate {
        if let Some(stall) = self.stalls.get(from).and_then(|s| {
            s.iter()
                .find(|s| (s.from..s.until).contains(&now) && s.to.is_none_or(|t| t == to))
        }) {
            self.stalled += 1;
            return Fate::Hold(stall.until);
        }
        if droppable {
            if let Some(rng) = self.rng.as_mut() {
                if rng.chance(self.drop) {
                    self.dropped += 1;
                    return Fate::Drop;
                }
                if rng.chance(self.delay) {
                    self.delayed += 1;
                    return Fate::Hold(now + 1 + rng.exponential(self.delay_mean_ns) as Nanos);
                }
            }
        }
        Fate::Send
    }
}
