//! Where the MDS keeps its state: `mds.redb` in its directory (one MDS, the default), or etcd
//! (`--etcd`: several MDS processes, one active). The daemon sees one interface; etcd's calls
//! block on the network, so they run in place of the daemon's async work (each step's changes
//! are durable before its messages leave, whichever store holds them).

use anyhow::Result;

use cordillera_gears::load::HourLoad;
use cordillera_gears::mds::persist::{Changes, Snapshot};

use super::mds_etcd::EtcdState;
use super::mds_store::MdsStore;

pub enum State {
    Redb(MdsStore),
    Etcd(EtcdState),
}

/// Runs a blocking etcd call without stalling the runtime's other tasks.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl State {
    pub fn meta(&mut self, key: &str) -> Result<Option<Vec<u8>>> {
        match self {
            State::Redb(s) => s.meta(key),
            State::Etcd(s) => blocking(|| s.meta(key)),
        }
    }

    pub fn set_meta(&mut self, key: &str, value: Option<&[u8]>) -> Result<()> {
        match self {
            State::Redb(s) => s.set_meta(key, value),
            State::Etcd(s) => blocking(|| s.set_meta(key, value)),
        }
    }

    pub fn load_hours(&mut self) -> Result<Vec<HourLoad>> {
        match self {
            State::Redb(s) => s.load_hours(),
            State::Etcd(s) => blocking(|| s.load_hours()),
        }
    }

    pub fn store_load_hours(&mut self, hours: &[HourLoad]) -> Result<()> {
        match self {
            State::Redb(s) => s.store_load_hours(hours),
            State::Etcd(s) => blocking(|| s.store_load_hours(hours)),
        }
    }

    pub fn snapshot(&mut self) -> Result<Option<Snapshot>> {
        match self {
            State::Redb(s) => s.snapshot(),
            State::Etcd(s) => Ok(s.snapshot()),
        }
    }

    pub fn store(&mut self, changes: &Changes) -> Result<()> {
        match self {
            State::Redb(s) => s.store(changes),
            State::Etcd(s) => blocking(|| s.store(changes)),
        }
    }

    pub fn commits(&self) -> u64 {
        match self {
            State::Redb(s) => s.commits,
            State::Etcd(s) => s.commits,
        }
    }
}
