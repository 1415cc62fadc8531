//! The pool's durable layout record: its arrays, its volumes' placements, and each restripe's
//! target and durable cursor. One record describes the whole pool; the runtime replaces it
//! atomically (a new file, synced, renamed over the old, the folder synced).
//!
//! Format (little-endian), documented in `docs/FORMATS.md`:
//!
//! ```text
//! magic "CRDLPOOL" (8) | version u32 (1) | payload length u32 | crc32c of the payload u32 |
//! payload: UTF-8 JSON (at most 16 MiB)
//! ```
//!
//! Decoding rejects a short or oversized record, another magic, an unknown version, a length
//! that is not the payload's, a checksum mismatch, JSON that is not a layout, and a layout the
//! pool refuses (overlapping extents, a volume larger than its extents, a cursor past the end).

use serde::{Deserialize, Serialize};

use crate::pool::{ArraySpec, Extent, Pool, PoolError, VolumeId};
use cordillera_models::device::raid::RaidLevel;

pub const MAGIC: &[u8; 8] = b"CRDLPOOL";
pub const VERSION: u32 = 1;
pub const HEADER_BYTES: usize = 20;
pub const PAYLOAD_MAX: usize = 16 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolLayout {
    /// Bumped by every change; a record with a lower generation is older.
    pub generation: u64,
    pub arrays: Vec<ArrayRecord>,
    pub volumes: Vec<VolumeRecord>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayRecord {
    /// The file or block device holding the array's logical device ("" for member arrays).
    pub path: String,
    /// Member files or devices, one per disk, on which the pool runs the RAID itself (empty:
    /// the array is `path`).
    #[serde(default)]
    pub members: Vec<String>,
    /// The member array's stripe unit.
    #[serde(default)]
    pub unit_bytes: Option<u64>,
    /// `raid0`, `raid1`, `raid10` or `raid5`.
    pub level: String,
    pub disks: usize,
    pub disk_bytes: u64,
    /// The device model pacing it (`fujitsu-maj3182mc@raid5:5`), if any.
    pub emulate: Option<String>,
    /// A member array's id (32 hex digits), in every member's label: a member of another
    /// array is never taken for one of this.
    #[serde(default)]
    pub id: Option<String>,
}

impl ArrayRecord {
    /// The member array's id, if it has one.
    pub fn member_array_id(&self) -> Result<u128, String> {
        let id = self.id.as_deref().ok_or(
            "the member array has no id: it was created before members carried labels (recreate it)",
        )?;
        u128::from_str_radix(id, 16).map_err(|_| format!("bad array id {id:?}"))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeRecord {
    pub name: String,
    pub size_bytes: u64,
    pub stripe_unit_bytes: u64,
    pub chunk_units: u64,
    /// `wide`, `narrow`: what the volume was placed as (a wide volume follows added arrays).
    pub policy: String,
    pub extents: Vec<ExtentRecord>,
    pub restripe: Option<RestripeRecord>,
    /// Declared load (reads + 4 × writes per second), for placing narrow volumes.
    #[serde(default)]
    pub weighted_iops: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtentRecord {
    pub array: usize,
    pub disk_offset: u64,
    pub disk_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestripeRecord {
    pub chunk_units: u64,
    pub extents: Vec<ExtentRecord>,
    /// Volume bytes durably on the new layout.
    pub cursor: u64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LayoutError {
    #[error("a layout record is at least {HEADER_BYTES} bytes; this one is {0}")]
    Short(usize),
    #[error("not a pool layout record (magic {0:02x?})")]
    BadMagic([u8; 8]),
    #[error("layout record version {0}; this build reads version {VERSION}")]
    Version(u32),
    #[error("the layout record says {declared} payload bytes but holds {actual}")]
    Length { declared: usize, actual: usize },
    #[error("the layout payload is {0} bytes, over the {PAYLOAD_MAX}-byte limit")]
    TooLarge(usize),
    #[error("layout record checksum mismatch (stored {stored:08x}, computed {computed:08x}): the record is damaged")]
    Checksum { stored: u32, computed: u32 },
    #[error("the layout payload is not a pool layout: {0}")]
    Payload(String),
    #[error("the layout is inconsistent: {0}")]
    Invalid(String),
}

impl From<PoolError> for LayoutError {
    fn from(e: PoolError) -> LayoutError {
        LayoutError::Invalid(e.to_string())
    }
}

pub fn level_name(level: RaidLevel) -> &'static str {
    match level {
        RaidLevel::Raid0 => "raid0",
        RaidLevel::Raid1 => "raid1",
        RaidLevel::Raid10 => "raid10",
        RaidLevel::Raid5 => "raid5",
    }
}

pub fn parse_level(s: &str) -> Result<RaidLevel, String> {
    Ok(match s {
        "raid0" => RaidLevel::Raid0,
        "raid1" => RaidLevel::Raid1,
        "raid10" => RaidLevel::Raid10,
        "raid5" => RaidLevel::Raid5,
        other => return Err(format!("unknown RAID level {other:?}")),
    })
}

impl ArrayRecord {
    /// A member array's layout (`None` for a logical device), checked: one member per disk,
    /// a stripe unit that divides each disk.
    pub fn geometry(&self) -> Result<Option<crate::members::Members>, String> {
        if self.members.is_empty() {
            if self.path.is_empty() {
                return Err("neither a device path nor members".into());
            }
            return Ok(None);
        }
        if !self.path.is_empty() {
            return Err("both a device path and members".into());
        }
        if self.members.len() != self.disks {
            return Err(format!(
                "{} members for {} disks",
                self.members.len(),
                self.disks
            ));
        }
        let unit = self.unit_bytes.ok_or("members without a stripe unit")?;
        if unit == 0 || !self.disk_bytes.is_multiple_of(unit) {
            return Err(format!(
                "the stripe unit {unit} does not divide each disk's {} bytes",
                self.disk_bytes
            ));
        }
        crate::members::Members::new(parse_level(&self.level)?, self.disks, unit, self.disk_bytes)
            .map(Some)
    }
}

impl ExtentRecord {
    fn extent(&self) -> Extent {
        Extent {
            array: self.array,
            disk_offset: self.disk_offset,
            disk_bytes: self.disk_bytes,
        }
    }
    pub fn of(e: &Extent) -> ExtentRecord {
        ExtentRecord {
            array: e.array,
            disk_offset: e.disk_offset,
            disk_bytes: e.disk_bytes,
        }
    }
}

impl PoolLayout {
    pub fn encode(&self) -> Vec<u8> {
        let payload = serde_json::to_vec_pretty(self).expect("a layout serializes");
        let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// Decodes and checks a record, and the pool it describes.
    pub fn decode(bytes: &[u8]) -> Result<(PoolLayout, Pool), LayoutError> {
        if bytes.len() < HEADER_BYTES {
            return Err(LayoutError::Short(bytes.len()));
        }
        let magic: [u8; 8] = bytes[..8].try_into().expect("8 bytes");
        if &magic != MAGIC {
            return Err(LayoutError::BadMagic(magic));
        }
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let version = word(8);
        if version != VERSION {
            return Err(LayoutError::Version(version));
        }
        let declared = word(12) as usize;
        let payload = &bytes[HEADER_BYTES..];
        if declared > PAYLOAD_MAX {
            return Err(LayoutError::TooLarge(declared));
        }
        if declared != payload.len() {
            return Err(LayoutError::Length {
                declared,
                actual: payload.len(),
            });
        }
        let stored = word(16);
        let computed = crc32c::crc32c(payload);
        if stored != computed {
            return Err(LayoutError::Checksum { stored, computed });
        }
        let layout: PoolLayout =
            serde_json::from_slice(payload).map_err(|e| LayoutError::Payload(e.to_string()))?;
        let pool = layout.pool()?;
        Ok((layout, pool))
    }

    /// The pool this layout describes, every placement checked.
    pub fn pool(&self) -> Result<Pool, LayoutError> {
        let specs = self
            .arrays
            .iter()
            .enumerate()
            .map(|(i, a)| {
                Ok(ArraySpec {
                    level: parse_level(&a.level)
                        .map_err(|e| LayoutError::Invalid(format!("array {i}: {e}")))?,
                    disks: a.disks,
                    disk_bytes: a.disk_bytes,
                })
            })
            .collect::<Result<Vec<_>, LayoutError>>()?;
        for (i, a) in self.arrays.iter().enumerate() {
            a.geometry()
                .map_err(|e| LayoutError::Invalid(format!("array {i}: {e}")))?;
        }
        let mut pool = Pool::new(&specs)?;
        for v in &self.volumes {
            if !matches!(v.policy.as_str(), "wide" | "narrow") {
                return Err(LayoutError::Invalid(format!(
                    "volume {:?}: policy {:?} (wide or narrow)",
                    v.name, v.policy
                )));
            }
            let id = pool.restore(
                &v.name,
                v.size_bytes,
                v.stripe_unit_bytes,
                v.chunk_units,
                v.extents.iter().map(ExtentRecord::extent).collect(),
            )?;
            if let Some(r) = &v.restripe {
                if r.cursor > v.size_bytes || !r.cursor.is_multiple_of(512) {
                    return Err(LayoutError::Invalid(format!(
                        "volume {:?}: restripe cursor {} outside its {} bytes",
                        v.name, r.cursor, v.size_bytes
                    )));
                }
                pool.restore_restripe(
                    id,
                    r.chunk_units,
                    r.extents.iter().map(ExtentRecord::extent).collect(),
                )?;
            }
        }
        Ok(pool)
    }

    /// The volume's id in [`pool`](Self::pool)'s numbering (volumes in record order).
    pub fn volume_id(&self, name: &str) -> Option<VolumeId> {
        self.volumes
            .iter()
            .position(|v| v.name == name)
            .map(|i| VolumeId(i as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PoolLayout {
        let array = |i: usize| ArrayRecord {
            members: Vec::new(),
            unit_bytes: None,
            path: format!("/srv/pool/array{i}"),
            level: "raid5".into(),
            disks: 5,
            disk_bytes: 64 << 20,
            emulate: None,
            id: None,
        };
        PoolLayout {
            generation: 7,
            arrays: vec![array(0), array(1), array(2)],
            volumes: vec![
                VolumeRecord {
                    name: "wide".into(),
                    size_bytes: 64 << 20,
                    stripe_unit_bytes: 64 << 10,
                    chunk_units: 1,
                    policy: "wide".into(),
                    extents: vec![
                        ExtentRecord {
                            array: 0,
                            disk_offset: 0,
                            disk_bytes: 8 << 20,
                        },
                        ExtentRecord {
                            array: 1,
                            disk_offset: 0,
                            disk_bytes: 8 << 20,
                        },
                    ],
                    restripe: Some(RestripeRecord {
                        chunk_units: 1,
                        extents: vec![
                            ExtentRecord {
                                array: 0,
                                disk_offset: 8 << 20,
                                disk_bytes: 6 << 20,
                            },
                            ExtentRecord {
                                array: 1,
                                disk_offset: 8 << 20,
                                disk_bytes: 6 << 20,
                            },
                            ExtentRecord {
                                array: 2,
                                disk_offset: 0,
                                disk_bytes: 6 << 20,
                            },
                        ],
                        cursor: 1 << 20,
                    }),
                    weighted_iops: None,
                },
                VolumeRecord {
                    name: "narrow".into(),
                    size_bytes: 16 << 20,
                    stripe_unit_bytes: 32 << 10,
                    chunk_units: 1,
                    policy: "narrow".into(),
                    extents: vec![ExtentRecord {
                        array: 2,
                        disk_offset: 6 << 20,
                        disk_bytes: 4 << 20,
                    }],
                    restripe: None,
                    weighted_iops: Some(120.0),
                },
            ],
        }
    }

    #[test]
    fn a_layout_round_trips_and_describes_its_pool() {
        let l = sample();
        let bytes = l.encode();
        let (back, pool) = PoolLayout::decode(&bytes).unwrap();
        assert_eq!(back, l);
        assert_eq!(pool.volumes().count(), 2);
        let id = l.volume_id("wide").unwrap();
        assert_eq!(pool.restripe_target(id).unwrap().extents.len(), 3);
    }

    #[test]
    fn damaged_records_are_refused_by_name() {
        let bytes = sample().encode();
        assert_eq!(
            PoolLayout::decode(&bytes[..10]).unwrap_err(),
            LayoutError::Short(10)
        );
        let mut b = bytes.clone();
        b[0] = b'X';
        assert!(matches!(
            PoolLayout::decode(&b),
            Err(LayoutError::BadMagic(_))
        ));
        let mut b = bytes.clone();
        b[8] = 2;
        assert_eq!(PoolLayout::decode(&b).unwrap_err(), LayoutError::Version(2));
        assert!(matches!(
            PoolLayout::decode(&bytes[..bytes.len() - 1]),
            Err(LayoutError::Length { .. })
        ));
        let mut b = bytes.clone();
        let last = b.len() - 3;
        b[last] ^= 1;
        assert!(matches!(
            PoolLayout::decode(&b),
            Err(LayoutError::Checksum { .. })
        ));
        // Overlapping volumes, a cursor past the end, an unknown level: checked after the CRC.
        let mut l = sample();
        l.volumes[1].extents[0].disk_offset = 0;
        let e = PoolLayout::decode(&l.encode()).unwrap_err();
        assert!(
            matches!(&e, LayoutError::Invalid(m) if m.contains("overlap")),
            "{e}"
        );
        let mut l = sample();
        l.volumes[0].restripe.as_mut().unwrap().cursor = 65 << 20;
        assert!(matches!(
            PoolLayout::decode(&l.encode()),
            Err(LayoutError::Invalid(_))
        ));
        let mut l = sample();
        l.arrays[0].level = "raid6".into();
        assert!(matches!(
            PoolLayout::decode(&l.encode()),
            Err(LayoutError::Invalid(_))
        ));
        // JSON that is not a layout.
        let payload = b"{\"generation\": 1}";
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        b.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        b.extend_from_slice(payload);
        assert!(matches!(
            PoolLayout::decode(&b),
            Err(LayoutError::Payload(_))
        ));
    }
}

/// The deterministic smoke run of the decoder (the coverage-guided target `pool_layout` in
/// `fuzz/` runs it longer): mutated records, bytes flipped, cut and inserted, each refused
/// with a typed error or decoded into a consistent pool; never a panic.
#[cfg(test)]
mod smoke {
    use super::*;
    use cordillera_types::rng::SplitMix64;

    #[test]
    fn mutated_layout_records_never_panic() {
        let record = tests_sample().encode();
        let mut rng = SplitMix64(0x5eed);
        let (mut refused, mut decoded) = (0, 0);
        for _ in 0..20_000 {
            let mut b = record.clone();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(b.len() as u64 + 1) as usize;
                match rng.below(3) {
                    0 if at < b.len() => b[at] ^= 1 << rng.below(8),
                    1 => b.truncate(at),
                    _ => b.insert(at.min(b.len()), rng.next_u64() as u8),
                }
            }
            // Some with the checksum fixed, so the payload's own checks are reached.
            if rng.below(2) == 0 && b.len() >= HEADER_BYTES {
                let payload_len = (b.len() - HEADER_BYTES) as u32;
                b[12..16].copy_from_slice(&payload_len.to_le_bytes());
                let crc = crc32c::crc32c(&b[HEADER_BYTES..]);
                b[16..20].copy_from_slice(&crc.to_le_bytes());
            }
            match PoolLayout::decode(&b) {
                Ok((l, pool)) => {
                    decoded += 1;
                    assert_eq!(pool.volumes().count(), l.volumes.len());
                }
                Err(e) => {
                    refused += 1;
                    assert!(!e.to_string().is_empty());
                }
            }
        }
        assert!(refused > 10_000, "{refused} refused, {decoded} decoded");
    }

    fn tests_sample() -> PoolLayout {
        PoolLayout {
            generation: 1,
            arrays: vec![ArrayRecord {
                members: Vec::new(),
                unit_bytes: None,
                path: "a0".into(),
                level: "raid5".into(),
                disks: 5,
                disk_bytes: 16 << 20,
                emulate: Some("fujitsu-maj3182mc@raid5:5".into()),
                id: None,
            }],
            volumes: vec![VolumeRecord {
                name: "v".into(),
                size_bytes: 8 << 20,
                stripe_unit_bytes: 64 << 10,
                chunk_units: 1,
                policy: "narrow".into(),
                extents: vec![ExtentRecord {
                    array: 0,
                    disk_offset: 0,
                    disk_bytes: 2 << 20,
                }],
                restripe: None,
                weighted_iops: None,
            }],
        }
    }
}
