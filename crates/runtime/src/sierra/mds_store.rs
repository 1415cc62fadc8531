//! The MDS's state on disk: an embedded database (redb) in the MDS's directory, `mds.redb`.
//!
//! ```text
//! table meta    : &str → bytes   "spec" (the cluster spec, JSON), "rng" (u64 LE),
//!                                "gear" (u8: a gear set by hand; absent: the plan),
//!                                "term" (u64 LE: starts so far; hellos carry it)
//! table groups  : u32 group  → group record      (gears::mds::persist)
//! table objects : u64 object → object record
//! table chunks  : u64 chunk  → u64 (group | slot << 32)
//! table servers : u32 server → server record
//! ```
//!
//! Every step's changes go in one transaction, committed (durable) before the MDS sends the
//! messages of that step. A record that does not decode, or state that does not fit the
//! cluster, stops the MDS with an error naming it.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use redb::{Database, ReadableTable, TableDefinition};

use cordillera_gears::load::HourLoad;
use cordillera_gears::mds::persist::{
    chunk_from_u64, chunk_to_u64, Changes, GroupRecord, ObjectRecord, ServerRecord, Snapshot,
};
use cordillera_gears::model::ObjectId;

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const GROUPS: TableDefinition<u32, &[u8]> = TableDefinition::new("groups");
const OBJECTS: TableDefinition<u64, &[u8]> = TableDefinition::new("objects");
const CHUNKS: TableDefinition<u64, u64> = TableDefinition::new("chunks");
const SERVERS: TableDefinition<u32, &[u8]> = TableDefinition::new("servers");
/// The gear scheduler's measured hours (hour since the epoch → `HourLoad` as JSON).
const LOAD_HOURS: TableDefinition<i64, &[u8]> = TableDefinition::new("load_hours");

pub struct MdsStore {
    db: Database,
    pub commits: u64,
}

fn db_error(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("MDS state: {e}")
}

impl MdsStore {
    /// Opens (or creates) `dir/mds.redb`.
    pub fn open(dir: &Path) -> Result<MdsStore> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("mds.redb");
        let db = Database::create(&path)
            .map_err(|e| anyhow!("opening the MDS state {}: {e}", path.display()))?;
        let store = MdsStore { db, commits: 0 };
        // The tables exist from the first start on.
        let txn = store.db.begin_write().map_err(db_error)?;
        {
            txn.open_table(META).map_err(db_error)?;
            txn.open_table(GROUPS).map_err(db_error)?;
            txn.open_table(OBJECTS).map_err(db_error)?;
            txn.open_table(CHUNKS).map_err(db_error)?;
            txn.open_table(SERVERS).map_err(db_error)?;
            txn.open_table(LOAD_HOURS).map_err(db_error)?;
        }
        txn.commit().map_err(db_error)?;
        Ok(store)
    }

    pub fn meta(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let table = txn.open_table(META).map_err(db_error)?;
        Ok(table
            .get(key)
            .map_err(db_error)?
            .map(|v| v.value().to_vec()))
    }

    pub fn set_meta(&mut self, key: &str, value: Option<&[u8]>) -> Result<()> {
        let txn = self.db.begin_write().map_err(db_error)?;
        {
            let mut table = txn.open_table(META).map_err(db_error)?;
            match value {
                Some(v) => {
                    table.insert(key, v).map_err(db_error)?;
                }
                None => {
                    table.remove(key).map_err(db_error)?;
                }
            }
        }
        txn.commit().map_err(db_error)?;
        self.commits += 1;
        Ok(())
    }

    /// The gear scheduler's hours measured so far, in order.
    pub fn load_hours(&self) -> Result<Vec<HourLoad>> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let table = txn.open_table(LOAD_HOURS).map_err(db_error)?;
        let mut hours = Vec::new();
        for entry in table.iter().map_err(db_error)? {
            let (k, v) = entry.map_err(db_error)?;
            let hour: HourLoad = serde_json::from_slice(v.value())
                .map_err(|e| anyhow!("MDS state: measured hour {}: {e}", k.value()))?;
            if hour.hour != k.value() {
                bail!(
                    "MDS state: measured hour {} is stored under {}",
                    hour.hour,
                    k.value()
                );
            }
            hours.push(hour);
        }
        Ok(hours)
    }

    /// Keeps hours the gear scheduler finished measuring (one commit).
    pub fn store_load_hours(&mut self, hours: &[HourLoad]) -> Result<()> {
        if hours.is_empty() {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(db_error)?;
        {
            let mut table = txn.open_table(LOAD_HOURS).map_err(db_error)?;
            for h in hours {
                let bytes = serde_json::to_vec(h)?;
                table.insert(h.hour, &bytes[..]).map_err(db_error)?;
            }
        }
        txn.commit().map_err(db_error)?;
        self.commits += 1;
        Ok(())
    }

    /// The stored state, `None` before the first commit of an MDS.
    pub fn snapshot(&self) -> Result<Option<Snapshot>> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let mut s = Snapshot::default();
        let groups = txn.open_table(GROUPS).map_err(db_error)?;
        for (i, entry) in groups.iter().map_err(db_error)?.enumerate() {
            let (k, v) = entry.map_err(db_error)?;
            if k.value() as usize != i {
                return Err(anyhow!("MDS state: group {} is missing", i));
            }
            s.groups.push(
                GroupRecord::decode(v.value())
                    .with_context(|| format!("MDS state: group {}", k.value()))?,
            );
        }
        if s.groups.is_empty() {
            return Ok(None);
        }
        let objects = txn.open_table(OBJECTS).map_err(db_error)?;
        for entry in objects.iter().map_err(db_error)? {
            let (k, v) = entry.map_err(db_error)?;
            let r = ObjectRecord::decode(v.value())
                .with_context(|| format!("MDS state: object {}", k.value()))?;
            s.objects.insert(ObjectId(k.value()), r);
        }
        let chunks = txn.open_table(CHUNKS).map_err(db_error)?;
        for (i, entry) in chunks.iter().map_err(db_error)?.enumerate() {
            let (k, v) = entry.map_err(db_error)?;
            if k.value() != i as u64 {
                return Err(anyhow!("MDS state: chunk {i} is missing"));
            }
            s.chunks.push(chunk_from_u64(v.value()));
        }
        let servers = txn.open_table(SERVERS).map_err(db_error)?;
        for (i, entry) in servers.iter().map_err(db_error)?.enumerate() {
            let (k, v) = entry.map_err(db_error)?;
            if k.value() as usize != i {
                return Err(anyhow!("MDS state: server {i} is missing"));
            }
            s.servers.push(
                ServerRecord::decode(v.value())
                    .with_context(|| format!("MDS state: server {}", k.value()))?,
            );
        }
        let table = txn.open_table(META).map_err(db_error)?;
        if let Some(v) = table.get("rng").map_err(db_error)? {
            let b: [u8; 8] = v
                .value()
                .try_into()
                .map_err(|_| anyhow!("MDS state: the rng entry is not 8 bytes"))?;
            s.rng = u64::from_le_bytes(b);
        }
        Ok(Some(s))
    }

    /// Makes one step's changes durable (one transaction).
    pub fn store(&mut self, changes: &Changes) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(db_error)?;
        {
            let mut groups = txn.open_table(GROUPS).map_err(db_error)?;
            for (g, r) in &changes.groups {
                groups.insert(*g, r.encode().as_slice()).map_err(db_error)?;
            }
            let mut objects = txn.open_table(OBJECTS).map_err(db_error)?;
            for (o, r) in &changes.objects {
                match r {
                    Some(r) => {
                        objects
                            .insert(o.0, r.encode().as_slice())
                            .map_err(db_error)?;
                    }
                    None => {
                        objects.remove(o.0).map_err(db_error)?;
                    }
                }
            }
            let mut chunks = txn.open_table(CHUNKS).map_err(db_error)?;
            for &(c, chunk) in &changes.chunks {
                chunks.insert(c, chunk_to_u64(chunk)).map_err(db_error)?;
            }
            let mut servers = txn.open_table(SERVERS).map_err(db_error)?;
            for (s, r) in &changes.servers {
                servers
                    .insert(*s, r.encode().as_slice())
                    .map_err(db_error)?;
            }
            if let Some(rng) = changes.rng {
                let mut meta = txn.open_table(META).map_err(db_error)?;
                meta.insert("rng", rng.to_le_bytes().as_slice())
                    .map_err(db_error)?;
            }
        }
        txn.commit().map_err(db_error)?;
        self.commits += 1;
        Ok(())
    }
}
