//! §3.5's disk-array experiment (Table 3) in simulation: two RAID-5 7+p arrays with a 64 KB
//! stripe unit; an OLTP-like store (small random requests, two thirds reads, many clients)
//! beside a sequential reader issuing 896 KB or 7 MB requests one at a time. Narrow: each on
//! its own array; wide: both over both arrays. Closed loop, as the benchmark ran: each client
//! issues its next request when the previous one completes.

use std::collections::HashMap;

use cordillera_models::device::{Completion, Device, IoRequest};
use cordillera_models::histogram::Histogram;
use cordillera_sim::kernel::Nanos;
use cordillera_types::rng::SimRng;
use cordillera_types::Op;
use serde::Serialize;

use super::sim::{self, VOLUME_SHIFT};
use cordillera_models::device::raid::RaidLevel;
use cordillera_striping::policy::Policy;
use cordillera_striping::pool::{ArraySpec, Pool};

/// The setup; [`Table3::paper`] is §3.5's.
#[derive(Clone, Debug)]
pub struct Table3 {
    pub array: ArraySpec,
    pub preset: String,
    pub stripe_unit_bytes: u64,
    /// Wide stores go across the two arrays by this many stripe units (7: whole stripes, as
    /// the volume manager's logical volumes).
    pub wide_chunk_units: u64,
    pub oltp_clients: usize,
    /// Mean think time of an OLTP client between a completion and its next request
    /// (exponential); 0 keeps every client's request always outstanding.
    pub oltp_think_ms: f64,
    pub oltp_request_bytes: u64,
    pub oltp_read_fraction: f64,
    pub sequential_request_bytes: u64,
    /// Bandwidth of the adapter's path to each array, MB/s (10^6 bytes), shared by every request
    /// to that array; `None`: no limit but the disks.
    pub channel_mb_per_s: Option<f64>,
    pub duration_s: f64,
    pub seed: u64,
}

/// The testbed's path to each array (§3.5: an SSA RAID adapter, two SSA loops, two arrays per
/// loop, one array of each experiment on each): an SSA link carries 20 MB/s each way and a loop
/// reaches the adapter by two links, so 40 MB/s into the adapter per array.
pub const SSA_LOOP_MB_PER_S: f64 = 40.0;

impl Table3 {
    pub fn paper(sequential_request_bytes: u64, duration_s: f64, seed: u64) -> Table3 {
        Table3 {
            array: ArraySpec {
                level: RaidLevel::Raid5,
                disks: 8,
                disk_bytes: super::experiment::FUJITSU_DISK_BYTES,
            },
            preset: "fujitsu-maj3182mc".into(),
            stripe_unit_bytes: 64 << 10,
            wide_chunk_units: 7,
            // "300 warehouses and 30 clients"; TPC-C is "approximately two-thirds reads".
            oltp_clients: 30,
            oltp_think_ms: 50.0,
            oltp_request_bytes: 8 << 10,
            oltp_read_fraction: 2.0 / 3.0,
            sequential_request_bytes,
            channel_mb_per_s: Some(SSA_LOOP_MB_PER_S),
            duration_s,
            seed,
        }
    }
}

/// One policy's throughput.
#[derive(Clone, Debug, Serialize)]
pub struct Table3Result {
    pub policy: &'static str,
    pub sequential_request_bytes: u64,
    pub sequential_mb_per_s: f64,
    pub oltp_iops: f64,
    pub oltp_mean_ms: f64,
    pub sequential_mean_ms: f64,
    /// The adapter's path to each array, MB/s (none: unlimited).
    pub channel_mb_per_s: Option<f64>,
}

/// The adapter's paths: one per array, each moving a request's bytes for that array in the
/// order requests were issued, at its bandwidth, while the disks work (a request's transfer
/// starts when it is issued and the path is free, so a large read streams as its disks deliver).
struct Channels {
    ns_per_byte: f64,
    free_at: [Nanos; 2],
}

impl Channels {
    /// When the path has moved `bytes[a]` for each array `a` of a request issued at `now`.
    fn reserve(&mut self, now: Nanos, bytes: [u64; 2]) -> Nanos {
        let mut done = now;
        for (free, b) in self.free_at.iter_mut().zip(bytes) {
            if b > 0 {
                let start = (*free).max(now);
                *free = start + (b as f64 * self.ns_per_byte).ceil() as Nanos;
                done = done.max(*free);
            }
        }
        done
    }
}

/// A store's bytes on each of the two arrays for `length` bytes at `offset`: all on `array`
/// (narrow), or chunks of `chunk` bytes alternating between the arrays (wide).
fn bytes_per_array(narrow: Option<usize>, chunk: u64, offset: u64, length: u64) -> [u64; 2] {
    let mut out = [0u64; 2];
    if let Some(a) = narrow {
        out[a] = length;
        return out;
    }
    let mut at = offset;
    while at < offset + length {
        let end = ((at / chunk + 1) * chunk).min(offset + length);
        out[(at / chunk % 2) as usize] += end - at;
        at = end;
    }
    out
}

/// The two arrays with the OLTP store (volume 0) and the sequential one (volume 1) placed by
/// `policy`, and each store's size.
fn arrays(t: &Table3, policy: Policy) -> Result<(sim::PoolDevice, u64), String> {
    let mut pool = Pool::new(&[t.array; 2]).map_err(|e| e.to_string())?;
    let data = t.array.disk_bytes * t.array.data_disks() as u64;
    let step = (16u64 << 20) * 2 * t.array.data_disks() as u64 * t.wide_chunk_units;
    // Each store the size of one array: narrow fills both, wide takes half of each.
    let size = data.saturating_sub(step) / step * step;
    for (name, array) in [("oltp", 0usize), ("sequential", 1)] {
        let (arrays, chunk) = match policy {
            Policy::Narrow => (vec![array], 1),
            Policy::Wide => (vec![0, 1], t.wide_chunk_units),
        };
        pool.create_chunked(name, size, t.stripe_unit_bytes, chunk, &arrays)
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok((sim::device(pool, &t.preset)?, size))
}

/// Runs one policy.
pub fn run(t: &Table3, policy: Policy) -> Result<Table3Result, String> {
    let (mut device, size) = arrays(t, policy)?;
    let end: Nanos = (t.duration_s * 1e9) as Nanos;
    let mut rng = SimRng::new(t.seed, 1);
    let mut next_id = 0u64;
    // id → (client, issued at, the path's transfer done); client 0 is the sequential reader.
    let mut inflight: HashMap<u64, (usize, Nanos, Nanos)> = HashMap::new();
    let mut channels = t.channel_mb_per_s.map(|mb| Channels {
        ns_per_byte: 1e3 / mb,
        free_at: [0; 2],
    });
    let chunk = t.wide_chunk_units * t.stripe_unit_bytes;
    let mut sequential_offset = 0u64;
    let (mut oltp, mut seq) = (Histogram::new(), Histogram::new());
    let mut sequential_bytes = 0u64;
    let oltp_blocks = size / t.oltp_request_bytes;
    let mut issue = |client: usize,
                     now: Nanos,
                     device: &mut sim::PoolDevice,
                     rng: &mut SimRng,
                     inflight: &mut HashMap<u64, (usize, Nanos, Nanos)>,
                     channels: &mut Option<Channels>| {
        let (volume, op, offset, length) = if client == 0 {
            if sequential_offset + t.sequential_request_bytes > size {
                sequential_offset = 0;
            }
            let o = sequential_offset;
            sequential_offset += t.sequential_request_bytes;
            (1u64, Op::Read, o, t.sequential_request_bytes)
        } else {
            let op = if rng.chance(t.oltp_read_fraction) {
                Op::Read
            } else {
                Op::Write
            };
            let o = rng.below(oltp_blocks) * t.oltp_request_bytes;
            (0u64, op, o, t.oltp_request_bytes)
        };
        let id = next_id;
        next_id += 1;
        let narrow = (policy == Policy::Narrow).then_some(volume as usize);
        let moved = channels.as_mut().map_or(now, |c| {
            c.reserve(now, bytes_per_array(narrow, chunk, offset, length))
        });
        inflight.insert(id, (client, now, moved));
        device.submit(
            now,
            IoRequest {
                id,
                op,
                offset_bytes: (volume << VOLUME_SHIFT) + offset,
                length_bytes: length,
            },
        );
    };
    for client in 0..=t.oltp_clients {
        issue(
            client,
            0,
            &mut device,
            &mut rng,
            &mut inflight,
            &mut channels,
        );
    }
    let mut completions: Vec<Completion> = Vec::new();
    // OLTP clients thinking: (due, client), earliest first; requests whose disks are done
    // and whose bytes are still crossing the path: (due, id).
    let mut thinking: std::collections::BinaryHeap<std::cmp::Reverse<(Nanos, usize)>> =
        Default::default();
    let mut crossing: std::collections::BinaryHeap<std::cmp::Reverse<(Nanos, u64)>> =
        Default::default();
    loop {
        let think = thinking.peek().map(|r| r.0 .0);
        let cross = crossing.peek().map(|r| r.0 .0);
        let Some(at) = [device.poll_timeout(), think, cross]
            .into_iter()
            .flatten()
            .min()
        else {
            break;
        };
        if at > end {
            break;
        }
        if think == Some(at) {
            let std::cmp::Reverse((_, client)) = thinking.pop().expect("peeked");
            issue(
                client,
                at,
                &mut device,
                &mut rng,
                &mut inflight,
                &mut channels,
            );
            continue;
        }
        if cross == Some(at) {
            let std::cmp::Reverse((_, id)) = crossing.pop().expect("peeked");
            completions.push(Completion { id, time_ns: at });
        } else {
            device.advance(at, &mut completions);
        }
        for c in completions.drain(..) {
            let &(client, issued, moved) = inflight.get(&c.id).expect("one completion per request");
            if moved > c.time_ns {
                crossing.push(std::cmp::Reverse((moved, c.id)));
                continue;
            }
            inflight.remove(&c.id);
            if client == 0 {
                seq.record(c.time_ns - issued);
                sequential_bytes += t.sequential_request_bytes;
            } else {
                oltp.record(c.time_ns - issued);
            }
            if client > 0 && t.oltp_think_ms > 0.0 {
                let wait = rng.exponential(t.oltp_think_ms * 1e6) as Nanos;
                thinking.push(std::cmp::Reverse((c.time_ns + wait, client)));
            } else if c.time_ns < end {
                issue(
                    client,
                    c.time_ns,
                    &mut device,
                    &mut rng,
                    &mut inflight,
                    &mut channels,
                );
            }
        }
    }
    Ok(Table3Result {
        policy: match policy {
            Policy::Narrow => "narrow",
            Policy::Wide => "wide",
        },
        sequential_request_bytes: t.sequential_request_bytes,
        sequential_mb_per_s: sequential_bytes as f64 / t.duration_s / 1e6,
        oltp_iops: oltp.count() as f64 / t.duration_s,
        oltp_mean_ms: oltp.mean_ns().unwrap_or(f64::NAN) / 1e6,
        sequential_mean_ms: seq.mean_ns().unwrap_or(f64::NAN) / 1e6,
        channel_mb_per_s: t.channel_mb_per_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table 3's directions on our models: the OLTP store gains from the second array under
    /// wide striping beside 896 KB sequential requests and loses beside 7 MB ones; larger
    /// sequential requests favour wide striping for the sequential reader.
    #[test]
    fn table_3_oltp_gains_wide_beside_small_sequential_requests_and_loses_beside_large() {
        let ratios = |bytes: u64| {
            let t = Table3::paper(bytes, 60.0, 1);
            let narrow = run(&t, Policy::Narrow).unwrap();
            let wide = run(&t, Policy::Wide).unwrap();
            for r in [&narrow, &wide] {
                assert!(r.oltp_iops > 100.0 && r.sequential_mb_per_s > 5.0, "{r:?}");
            }
            (
                wide.oltp_iops / narrow.oltp_iops,
                wide.sequential_mb_per_s / narrow.sequential_mb_per_s,
            )
        };
        let (oltp_896k, seq_896k) = ratios(896 << 10);
        let (oltp_7m, seq_7m) = ratios(7 << 20);
        assert!(oltp_896k > 1.03, "{oltp_896k}");
        assert!(
            oltp_7m < oltp_896k && oltp_7m < 1.0,
            "{oltp_7m} vs {oltp_896k}"
        );
        assert!(seq_7m > seq_896k, "{seq_7m} vs {seq_896k}");
    }
    /// The adapter's path: a narrow sequential reader gets at most its array's path (40 MB/s)
    /// however many disks stream, a wide 7 MB reader both paths; without the limit the narrow
    /// reader streams from its seven disks far faster.
    #[test]
    fn the_adapter_path_caps_each_array_and_wide_reads_use_both() {
        let seq = |channel: Option<f64>, policy: Policy| {
            let mut t = Table3::paper(7 << 20, 30.0, 1);
            t.channel_mb_per_s = channel;
            run(&t, policy).unwrap().sequential_mb_per_s
        };
        let limit = Some(SSA_LOOP_MB_PER_S);
        let (narrow, wide) = (seq(limit, Policy::Narrow), seq(limit, Policy::Wide));
        assert!(narrow <= SSA_LOOP_MB_PER_S * 1.001, "narrow {narrow} MB/s");
        assert!(wide > narrow, "wide {wide} MB/s, narrow {narrow}");
        let free = seq(None, Policy::Narrow);
        assert!(free > 2.0 * SSA_LOOP_MB_PER_S, "no limit: {free} MB/s");
        assert_eq!(
            bytes_per_array(None, 448 << 10, 0, 7 << 20),
            [7 << 19, 7 << 19]
        );
        assert_eq!(bytes_per_array(Some(1), 448 << 10, 0, 8192), [0, 8192]);
    }
}
