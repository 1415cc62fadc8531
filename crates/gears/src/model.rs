//! Sierra's data model (§3.1, §3.5): objects made of chunks, each chunk in a chunk group whose
//! replicas and primary it shares, servers in racks.

use serde::Serialize;

use cordillera_types::units::MIB;

/// A chunk server's index in the cluster, `0..N`.
pub type ServerId = u32;

/// A rack (fault domain) of the cluster.
pub type RackId = u32;

/// A chunk group: chunks replicated on the same servers with the same primary (§3.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct GroupId(pub u32);

/// An object, as the client library names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectId(pub u64);

/// A chunk: one chunk-sized extent of an object, numbered by the MDS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ChunkId(pub u64);

/// r: copies of every chunk (§3.1: "the default replication factor is 3").
pub const REPLICAS_DEFAULT: usize = 3;

/// The replicas a layout supports: gear groups and replica sets fit in a `u8` count, and the
/// exact layout search works on bitmasks of such sets.
pub const REPLICAS_MAX: usize = 8;

/// §3.1: "a typical value is 64 MB".
pub const CHUNK_BYTES_DEFAULT: u64 = 64 * MIB;

/// §4.3: the evaluation used 1 MB chunks to fit the traces' capacity on its testbed.
pub const CHUNK_BYTES_EVALUATION: u64 = MIB;

/// §3.5: "Sierra currently uses 64N chunk groups where N is the total number of chunk servers."
pub const GROUPS_PER_SERVER_DEFAULT: u32 = 64;

/// Where the chunk servers are: the rack of each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Topology {
    pub racks_of_servers: Vec<RackId>,
}

impl Topology {
    /// `racks` racks of `per_rack` servers, numbered rack by rack (§4.3: 3 racks of 5).
    pub fn racks(racks: u32, per_rack: u32) -> Topology {
        Topology {
            racks_of_servers: (0..racks * per_rack).map(|s| s / per_rack).collect(),
        }
    }

    /// Servers in the cluster (N).
    pub fn servers(&self) -> usize {
        self.racks_of_servers.len()
    }

    pub fn rack_count(&self) -> usize {
        self.racks_of_servers
            .iter()
            .map(|&r| r as usize + 1)
            .max()
            .unwrap_or(0)
    }

    pub fn rack_of(&self, server: ServerId) -> RackId {
        self.racks_of_servers[server as usize]
    }

    /// The servers of `rack`, in order.
    pub fn servers_in(&self, rack: RackId) -> impl Iterator<Item = ServerId> + '_ {
        self.racks_of_servers
            .iter()
            .enumerate()
            .filter(move |(_, &r)| r == rack)
            .map(|(s, _)| s as ServerId)
    }
}
