//! The MDS's state in etcd (`cluster mds --etcd`): the same records as `mds.redb`, kept as a
//! journal under the cluster's prefix, every write conditioned on this MDS still holding the
//! leader key (its create revision), so a deposed MDS changes nothing.
//!
//! ```text
//! PREFIX leader              the active MDS (bound to its lease; see `mds_leader`)
//! PREFIX meta/spec           the cluster spec (JSON)
//! PREFIX meta/gear           a gear set by hand (one byte; absent: the plan)
//! PREFIX hours/HOUR          a measured hour of load (HourLoad as JSON; HOUR 20 digits)
//! PREFIX snapshot            "GEN PARTS LAST_STEP": the snapshot in force
//! PREFIX snap/GEN/PART       the snapshot's batches (wire::mds_journal), PART 6 digits
//! PREFIX steps/SEQ           one step's changes (one batch), SEQ 20 digits, after the snapshot
//! ```
//!
//! A step's batch is one put in one transaction (etcd's limit of operations per transaction
//! does not bound a step). Every [`SNAPSHOT_STEPS`] steps the leader writes its state as a new
//! snapshot (parts first, then the pointer together with the deletion of the steps it covers
//! and of the older snapshot, in one transaction). A restore reads the snapshot in force and
//! the steps after it, which must follow it without a gap.

use anyhow::{anyhow, bail, Context, Result};

use cordillera_gears::load::HourLoad;
use cordillera_gears::mds::persist::{Changes, Snapshot};
use cordillera_wire::mds_journal::{decode_batch, encode_batch, snapshot_batches};

use crate::etcd::{prefix_end, Compare, Etcd, EtcdError, Op};

/// Steps between snapshots.
pub const SNAPSHOT_STEPS: u64 = 1000;
/// Bytes of a snapshot's part (etcd takes requests up to 1.5 MiB by default).
const PART_BYTES: usize = 512 << 10;

/// A write refused because this MDS no longer holds the leader key.
#[derive(Debug, thiserror::Error)]
#[error("this MDS is no longer the leader (its leader key is gone or another's)")]
pub struct NotLeader;

/// A write that could not be made because etcd did not answer (no quorum, unreachable): the
/// state is as it was; the write may be tried again.
#[derive(Debug, thiserror::Error)]
#[error("etcd is unavailable: {0}")]
pub struct Unavailable(pub String);

pub struct EtcdState {
    etcd: Etcd,
    prefix: Vec<u8>,
    /// The leader key's create revision: every write is conditioned on it.
    leader_revision: i64,
    /// The state as stored (the snapshot in force and the steps after it).
    mirror: Snapshot,
    /// The next step's sequence number, and how many steps follow the snapshot.
    next_step: u64,
    steps_since_snapshot: u64,
    snapshot_gen: u64,
    /// Steps between snapshots ([`SNAPSHOT_STEPS`] unless set).
    snapshot_steps: u64,
    pub commits: u64,
}

fn key(prefix: &[u8], rest: &str) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(rest.as_bytes());
    k
}

/// An etcd error as the MDS sees it: unavailability is retried, anything else stops it.
fn etcd_error(e: EtcdError) -> anyhow::Error {
    match e {
        EtcdError::Unreachable(m) => anyhow!(Unavailable(m)),
        other => anyhow!("MDS state in etcd: {other}"),
    }
}

impl EtcdState {
    /// The state under `prefix`, for the leader whose key has `leader_revision`; reads the
    /// snapshot in force and the steps after it.
    pub fn open(etcd: Etcd, prefix: &[u8], leader_revision: i64) -> Result<EtcdState> {
        let mut state = EtcdState {
            etcd,
            prefix: prefix.to_vec(),
            leader_revision,
            mirror: Snapshot::default(),
            next_step: 0,
            steps_since_snapshot: 0,
            snapshot_gen: 0,
            snapshot_steps: SNAPSHOT_STEPS,
            commits: 0,
        };
        state.read()?;
        Ok(state)
    }

    fn read(&mut self) -> Result<()> {
        let pointer = self
            .etcd
            .get(&key(&self.prefix, "snapshot"))
            .map_err(etcd_error)?;
        let mut mirror = Snapshot::default();
        let mut next_step = 0;
        if let Some(p) = pointer {
            let text = String::from_utf8_lossy(&p.value).to_string();
            let fields: Vec<u64> = text
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|_| anyhow!("MDS state in etcd: snapshot pointer {text:?}"))?;
            let [gen, parts, last] = fields[..] else {
                bail!("MDS state in etcd: snapshot pointer {text:?}");
            };
            let found = self
                .etcd
                .get_prefix(&key(&self.prefix, &format!("snap/{gen:020}/")))
                .map_err(etcd_error)?;
            if found.len() as u64 != parts {
                bail!(
                    "MDS state in etcd: snapshot {gen} has {} of its {parts} parts",
                    found.len()
                );
            }
            for (i, kv) in found.iter().enumerate() {
                let changes = decode_batch(&kv.value)
                    .with_context(|| format!("MDS state in etcd: snapshot {gen} part {i}"))?;
                mirror
                    .apply(&changes)
                    .with_context(|| format!("MDS state in etcd: snapshot {gen} part {i}"))?;
            }
            self.snapshot_gen = gen;
            next_step = last + 1;
        }
        let steps = self
            .etcd
            .get_prefix(&key(&self.prefix, "steps/"))
            .map_err(etcd_error)?;
        let mut applied = 0;
        for kv in steps {
            let name = String::from_utf8_lossy(&kv.key[self.prefix.len() + 6..]).to_string();
            let seq: u64 = name
                .parse()
                .map_err(|_| anyhow!("MDS state in etcd: step key {name:?}"))?;
            if seq < next_step {
                continue; // covered by the snapshot (left by a compaction cut short)
            }
            if seq != next_step {
                bail!("MDS state in etcd: step {next_step} is missing (found {seq})");
            }
            let changes = decode_batch(&kv.value)
                .with_context(|| format!("MDS state in etcd: step {seq}"))?;
            mirror
                .apply(&changes)
                .with_context(|| format!("MDS state in etcd: step {seq}"))?;
            next_step += 1;
            applied += 1;
        }
        self.mirror = mirror;
        self.next_step = next_step;
        self.steps_since_snapshot = applied;
        Ok(())
    }

    /// Takes a snapshot every `steps` steps instead.
    pub fn set_snapshot_steps(&mut self, steps: u64) {
        self.snapshot_steps = steps.max(1);
    }

    /// The snapshot in force (0: none yet) and the steps after it.
    pub fn journal(&self) -> (u64, u64) {
        (self.snapshot_gen, self.steps_since_snapshot)
    }

    fn leader_is_me(&self) -> Compare {
        Compare::CreateRevision(key(&self.prefix, "leader"), self.leader_revision)
    }

    /// Runs `ops` if this MDS still leads.
    fn write(&mut self, ops: &[Op]) -> Result<()> {
        let (led, _) = self
            .etcd
            .txn(&[self.leader_is_me()], ops, &[])
            .map_err(etcd_error)?;
        if !led {
            return Err(anyhow!(NotLeader));
        }
        self.commits += 1;
        Ok(())
    }

    pub fn meta(&mut self, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .etcd
            .get(&key(&self.prefix, &format!("meta/{name}")))
            .map_err(etcd_error)?
            .map(|kv| kv.value))
    }

    pub fn set_meta(&mut self, name: &str, value: Option<&[u8]>) -> Result<()> {
        let k = key(&self.prefix, &format!("meta/{name}"));
        let op = match value {
            Some(v) => Op::Put {
                key: k,
                value: v.to_vec(),
                lease: 0,
            },
            None => Op::Delete {
                key: k,
                end: Vec::new(),
            },
        };
        self.write(&[op])
    }

    pub fn load_hours(&mut self) -> Result<Vec<HourLoad>> {
        let found = self
            .etcd
            .get_prefix(&key(&self.prefix, "hours/"))
            .map_err(etcd_error)?;
        found
            .iter()
            .map(|kv| {
                serde_json::from_slice(&kv.value).map_err(|e| {
                    anyhow!(
                        "MDS state in etcd: measured hour {}: {e}",
                        String::from_utf8_lossy(&kv.key)
                    )
                })
            })
            .collect()
    }

    pub fn store_load_hours(&mut self, hours: &[HourLoad]) -> Result<()> {
        if hours.is_empty() {
            return Ok(());
        }
        let ops: Vec<Op> = hours
            .iter()
            .map(|h| {
                Ok(Op::Put {
                    key: key(&self.prefix, &format!("hours/{:020}", h.hour.max(0))),
                    value: serde_json::to_vec(h)?,
                    lease: 0,
                })
            })
            .collect::<Result<_>>()?;
        for chunk in ops.chunks(64) {
            self.write(chunk)?;
        }
        Ok(())
    }

    /// The stored state, `None` before the first commit of a cluster.
    pub fn snapshot(&self) -> Option<Snapshot> {
        (!self.mirror.groups.is_empty()).then(|| self.mirror.clone())
    }

    /// Makes one step's changes durable (one put, conditioned on leading), and now and then
    /// a new snapshot.
    pub fn store(&mut self, changes: &Changes) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut next = self.mirror.clone();
        next.apply(changes)
            .context("MDS state: a step that does not apply to the stored state")?;
        let seq = self.next_step;
        self.write(&[Op::Put {
            key: key(&self.prefix, &format!("steps/{seq:020}")),
            value: encode_batch(changes),
            lease: 0,
        }])?;
        self.mirror = next;
        self.next_step += 1;
        self.steps_since_snapshot += 1;
        if self.steps_since_snapshot >= self.snapshot_steps {
            self.compact()?;
        }
        Ok(())
    }

    /// Writes the state as a new snapshot and drops the steps and the snapshot it replaces.
    fn compact(&mut self) -> Result<()> {
        let gen = self.snapshot_gen + 1;
        let parts = snapshot_batches(&self.mirror, PART_BYTES);
        // Parts of a compaction cut short before its pointer went in go first (etcd takes no
        // put inside a range deleted in the same transaction).
        let dir = key(&self.prefix, &format!("snap/{gen:020}/"));
        self.write(&[Op::Delete {
            end: prefix_end(&dir),
            key: dir,
        }])?;
        for (i, part) in parts.iter().enumerate() {
            self.write(&[Op::Put {
                key: key(&self.prefix, &format!("snap/{gen:020}/{i:06}")),
                value: part.clone(),
                lease: 0,
            }])?;
        }
        let last = self.next_step - 1;
        let steps_from = key(&self.prefix, "steps/");
        let old = key(&self.prefix, &format!("snap/{:020}/", self.snapshot_gen));
        self.write(&[
            Op::Put {
                key: key(&self.prefix, "snapshot"),
                value: format!("{gen} {} {last}", parts.len()).into_bytes(),
                lease: 0,
            },
            Op::Delete {
                key: steps_from,
                end: key(&self.prefix, &format!("steps/{:020}", last + 1)),
            },
            Op::Delete {
                end: prefix_end(&old),
                key: old,
            },
        ])?;
        tracing::info!(
            snapshot = gen,
            parts = parts.len(),
            steps = self.steps_since_snapshot,
            "MDS state compacted in etcd"
        );
        self.snapshot_gen = gen;
        self.steps_since_snapshot = 0;
        Ok(())
    }
}
