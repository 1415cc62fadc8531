//! Trace formats, their names on the command line, and detection from content.

use std::fmt;
use std::str::FromStr;

/// Every trace format Cordillera reads. `../shared/traces/INVENTORY.md` and `docs/FORMATS.md`
/// describe each line layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    Msr,
    /// SPC / UMass: `ASU,LBA,Size,Opcode,Timestamp[,…]`.
    Spc,
    /// DiskSim / MQSim ASCII: `time dev lba sectors type`, time unit given separately.
    Ascii5,
    /// CloudPhysics vscsi CSV with header `version,time,op,size,lbn`.
    CloudPhysics,
    /// Tencent CBS: `Timestamp,Offset,Size,IOType,VolumeID`.
    Tencent,
    /// SYSTOR'17 VDI with header `Timestamp,Response,IOType,LUN,Offset,Size`.
    Systor17,
    /// ARC `.lis`: `start_block num_blocks ignore ignore`, no time, no direction.
    Arc,
    /// Linux `blkparse` default text output; dispatch (`D`) events are the I/Os.
    Blkparse,
    /// Cordillera's compact binary trace (`docs/FORMATS.md`).
    Binary,
    /// libCacheSim's `oracleGeneral` binary requests ([`crate::oracle`]); no magic number: named
    /// by `--format oraclegeneral` or a file name containing `oracleGeneral`.
    OracleGeneral,
}

impl Format {
    pub const ALL: [Format; 10] = [
        Format::Msr,
        Format::Spc,
        Format::Ascii5,
        Format::CloudPhysics,
        Format::Tencent,
        Format::Systor17,
        Format::Arc,
        Format::Blkparse,
        Format::Binary,
        Format::OracleGeneral,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Msr => "msr",
            Format::Spc => "spc",
            Format::Ascii5 => "ascii5",
            Format::CloudPhysics => "cloudphysics",
            Format::Tencent => "tencent",
            Format::Systor17 => "systor17",
            Format::Arc => "arc",
            Format::Blkparse => "blkparse",
            Format::Binary => "binary",
            Format::OracleGeneral => "oraclegeneral",
        }
    }

    /// A stable one-byte tag, stored in binary trace headers.
    pub fn tag(self) -> u8 {
        Format::ALL.iter().position(|f| *f == self).unwrap() as u8
    }

    pub fn from_tag(tag: u8) -> Option<Format> {
        Format::ALL.get(tag as usize).copied()
    }

    /// Whether lines carry wall-clock (Unix or FILETIME) timestamps.
    pub fn has_wall_clock(self) -> bool {
        matches!(self, Format::Msr | Format::Tencent | Format::Systor17)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = Format::ALL.iter().map(|f| f.name()).collect();
                format!("unknown trace format {s:?}; one of {}", names.join(", "))
            })
    }
}

/// The unit of ASCII5 timestamps, which the format does not record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimeUnit {
    Ns,
    Us,
    /// DiskSim's convention, and the default.
    #[default]
    Ms,
    S,
}

impl TimeUnit {
    pub fn ns_per_unit(self) -> i64 {
        match self {
            TimeUnit::Ns => 1,
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
        }
    }
}

impl FromStr for TimeUnit {
    type Err = String;

    fn from_str(s: &str) -> Result<TimeUnit, String> {
        match s {
            "ns" => Ok(TimeUnit::Ns),
            "us" => Ok(TimeUnit::Us),
            "ms" => Ok(TimeUnit::Ms),
            "s" => Ok(TimeUnit::S),
            _ => Err(format!("unknown time unit {s:?}; one of ns, us, ms, s")),
        }
    }
}
