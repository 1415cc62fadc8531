//! The campaign's workload: the ledger of what every block may hold, a blocking NBD client,
//! the random load, and the read-back that checks every block.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cordillera_wire::nbd;

const BLOCK: u64 = super::BLOCK;
/// Longest wait for a reply before the server counts as stalled.
const STALL: Duration = Duration::from_secs(60);

pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub(super) fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    pub(super) fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

pub(super) fn pattern(block: u64, version: u64) -> Vec<u8> {
    let fill = (block.wrapping_mul(0x9e37_79b9) ^ version.wrapping_mul(31)) as u8;
    let mut data = vec![fill; BLOCK as usize];
    data[..8].copy_from_slice(&version.to_le_bytes());
    data[8..16].copy_from_slice(&block.to_le_bytes());
    data
}

// ---------------------------------------------------------------------------------------------
// The ledger: what every block may hold.

#[derive(Default)]
pub(super) struct Ledger {
    /// Per block: the last acknowledged version (0: never written) and every version sent
    /// since that may have landed.
    pub(super) acked: Vec<u64>,
    pub(super) maybe: Vec<BTreeSet<u64>>,
    pub(super) next_version: u64,
}

impl Ledger {
    pub(super) fn new(blocks: u64) -> Ledger {
        Ledger {
            acked: vec![0; blocks as usize],
            maybe: vec![BTreeSet::new(); blocks as usize],
            next_version: 1,
        }
    }

    /// Why `data` is not an acceptable content of `block`, if it is not.
    pub(super) fn check(&self, block: u64, data: &[u8]) -> Option<String> {
        let b = block as usize;
        let version = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
        if version == 0 && data.iter().all(|x| *x == 0) {
            return (self.acked[b] != 0).then(|| {
                format!(
                    "block {block}: reads as zeros; acknowledged version {} lost",
                    self.acked[b]
                )
            });
        }
        if data != pattern(block, version) {
            return Some(format!(
                "block {block}: torn or foreign data (header says version {version})"
            ));
        }
        if version == self.acked[b] || (version > self.acked[b] && self.maybe[b].contains(&version))
        {
            return None;
        }
        Some(format!(
            "block {block}: reads version {version}; acknowledged version {} {}",
            self.acked[b],
            if version < self.acked[b] {
                "lost (an older write came back)"
            } else {
                "superseded by a version never written"
            }
        ))
    }

    /// After a full read-back: what was read is what the block holds from now on.
    pub(super) fn settle(&mut self, block: u64, data: &[u8]) {
        let b = block as usize;
        let version = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
        self.acked[b] = self.acked[b].max(version);
        let acked = self.acked[b];
        self.maybe[b].retain(|v| *v > acked);
    }
}

// ---------------------------------------------------------------------------------------------
// A blocking NBD client (fixed newstyle, NBD_OPT_GO, simple replies).

pub(super) struct Nbd {
    s: TcpStream,
}

/// An NBD export: a server's address and the export's name (`""`: the default export).
#[derive(Clone, Copy, Debug)]
pub(super) struct Target {
    pub(super) addr: SocketAddr,
    pub(super) export: &'static str,
}

impl From<SocketAddr> for Target {
    fn from(addr: SocketAddr) -> Target {
        Target { addr, export: "" }
    }
}

impl Nbd {
    pub(super) fn connect(target: impl Into<Target>) -> Result<Nbd> {
        let Target { addr, export } = target.into();
        let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(STALL))?;
        let mut greeting = [0u8; 18];
        s.read_exact(&mut greeting)?;
        s.write_all(&(nbd::FLAG_C_FIXED_NEWSTYLE | nbd::FLAG_C_NO_ZEROES).to_be_bytes())?;
        let mut h = nbd::IHAVEOPT.to_be_bytes().to_vec();
        h.extend_from_slice(&nbd::OPT_GO.to_be_bytes());
        h.extend_from_slice(&(6 + export.len() as u32).to_be_bytes());
        h.extend_from_slice(&(export.len() as u32).to_be_bytes());
        h.extend_from_slice(export.as_bytes());
        h.extend_from_slice(&[0; 2]);
        s.write_all(&h)?;
        loop {
            let mut h = [0u8; 20];
            s.read_exact(&mut h)?;
            let kind = u32::from_be_bytes(h[12..16].try_into().expect("4 bytes"));
            let mut data = vec![0u8; u32::from_be_bytes(h[16..20].try_into().expect("4")) as usize];
            s.read_exact(&mut data)?;
            match kind {
                nbd::REP_ACK => return Ok(Nbd { s }),
                nbd::REP_INFO => {}
                other => bail!("NBD option refused ({other:#x})"),
            }
        }
    }

    pub(super) fn send(
        &mut self,
        command: nbd::Command,
        flags: u16,
        handle: u64,
        offset: u64,
        data: &[u8],
        length: u32,
    ) -> std::io::Result<()> {
        let r = nbd::Request {
            flags,
            command,
            handle,
            offset,
            length,
        };
        let mut frame = nbd::encode_request(&r).to_vec();
        frame.extend_from_slice(data);
        self.s.write_all(&frame)
    }

    /// The next reply header: (handle, error).
    pub(super) fn receive(&mut self) -> std::io::Result<(u64, u32)> {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h)?;
        if u32::from_be_bytes(h[..4].try_into().expect("4 bytes")) != nbd::SIMPLE_REPLY_MAGIC {
            return Err(std::io::Error::other("bad NBD reply magic"));
        }
        Ok((
            u64::from_be_bytes(h[8..16].try_into().expect("8 bytes")),
            u32::from_be_bytes(h[4..8].try_into().expect("4 bytes")),
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// The workload.

pub(super) enum Op {
    Write { first: u64, versions: Vec<u64> },
    Read { first: u64, count: u64 },
    Flush,
}

#[derive(Default)]
pub(super) struct Figures {
    pub(super) writes_acked: u64,
    pub(super) fua_writes: u64,
    pub(super) flushes: u64,
    pub(super) reads_checked: u64,
    pub(super) refused_writes: u64,
    pub(super) blocks_verified: u64,
}

/// Random requests until `until`, then waits for those in flight. Returns `Ok(false)` when the
/// connection broke (the server died), `Err` on a wrong read or a stall.
pub(super) fn drive(
    addr: impl Into<Target>,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    until: Instant,
    figures: &mut Figures,
) -> Result<bool> {
    let Ok(mut nbd) = Nbd::connect(addr) else {
        return Ok(false);
    };
    let blocks = ledger.acked.len() as u64;
    let mut in_flight: HashMap<u64, Op> = HashMap::new();
    let mut busy = vec![false; blocks as usize];
    let mut handle = 0u64;
    let mut since_flush = 0;
    loop {
        while in_flight.len() < depth && Instant::now() < until {
            handle += 1;
            let count = 1 + rng.below(16);
            let first = rng.below(blocks - count + 1);
            let range = first as usize..(first + count) as usize;
            if since_flush >= 64 {
                since_flush = 0;
                if nbd.send(nbd::Command::Flush, 0, handle, 0, &[], 0).is_err() {
                    return Ok(false);
                }
                in_flight.insert(handle, Op::Flush);
                continue;
            }
            if busy[range.clone()].iter().any(|b| *b) {
                break;
            }
            if rng.chance(0.3) {
                if nbd
                    .send(
                        nbd::Command::Read,
                        0,
                        handle,
                        first * BLOCK,
                        &[],
                        (count * BLOCK) as u32,
                    )
                    .is_err()
                {
                    return Ok(false);
                }
                // Reads too hold their blocks: what they may return is then fixed.
                busy[range].iter_mut().for_each(|b| *b = true);
                in_flight.insert(handle, Op::Read { first, count });
                continue;
            }
            let mut data = Vec::with_capacity((count * BLOCK) as usize);
            let mut versions = Vec::with_capacity(count as usize);
            for b in first..first + count {
                let v = ledger.next_version;
                ledger.next_version += 1;
                ledger.maybe[b as usize].insert(v);
                versions.push(v);
                data.extend_from_slice(&pattern(b, v));
            }
            let fua = rng.chance(0.1);
            let flags = if fua { nbd::CMD_FLAG_FUA } else { 0 };
            figures.fua_writes += fua as u64;
            since_flush += 1;
            if nbd
                .send(
                    nbd::Command::Write,
                    flags,
                    handle,
                    first * BLOCK,
                    &data,
                    data.len() as u32,
                )
                .is_err()
            {
                return Ok(false);
            }
            busy[range].iter_mut().for_each(|b| *b = true);
            in_flight.insert(handle, Op::Write { first, versions });
        }
        if in_flight.is_empty() {
            return Ok(true);
        }
        let (h, error) = match nbd.receive() {
            Ok(r) => r,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                bail!(
                    "stall: {} requests unanswered for {STALL:?}",
                    in_flight.len()
                )
            }
            Err(_) => return Ok(false),
        };
        let Some(op) = in_flight.remove(&h) else {
            bail!("a reply to handle {h}, which is not in flight");
        };
        match op {
            Op::Flush => {
                if error != 0 {
                    bail!("flush failed with error {error}");
                }
                figures.flushes += 1;
            }
            Op::Write { first, versions } => {
                for (i, v) in versions.iter().enumerate() {
                    let b = first as usize + i;
                    busy[b] = false;
                    if error == 0 {
                        ledger.acked[b] = ledger.acked[b].max(*v);
                        let acked = ledger.acked[b];
                        ledger.maybe[b].retain(|x| *x > acked);
                    }
                }
                if error == 0 {
                    figures.writes_acked += 1;
                } else {
                    // ENOSPC from full stores, EIO with fewer than N stores: not acknowledged,
                    // may or may not have landed.
                    figures.refused_writes += 1;
                }
            }
            Op::Read { first, count } => {
                let mut data = vec![0u8; (count * BLOCK) as usize];
                if error == 0 && nbd.s.read_exact(&mut data).is_err() {
                    return Ok(false);
                }
                for i in 0..count {
                    busy[(first + i) as usize] = false;
                }
                if error != 0 {
                    bail!("read of {count} blocks at block {first} failed with error {error}");
                }
                for i in 0..count {
                    let at = (i * BLOCK) as usize;
                    if let Some(why) = ledger.check(first + i, &data[at..at + BLOCK as usize]) {
                        bail!("read during the load: {why}");
                    }
                }
                figures.reads_checked += 1;
            }
        }
    }
}

/// Reads the whole region back and checks every block; then what was read is the new baseline.
pub(super) fn verify(
    addr: impl Into<Target>,
    ledger: &mut Ledger,
    figures: &mut Figures,
) -> Result<()> {
    let mut nbd = Nbd::connect(addr)?;
    let blocks = ledger.acked.len() as u64;
    let chunk = 16u64;
    let mut next = 0u64;
    let mut in_flight = 0;
    let mut bad = Vec::new();
    let mut replies = 0;
    while replies < blocks.div_ceil(chunk) {
        while next < blocks && in_flight < 8 {
            let count = chunk.min(blocks - next);
            nbd.send(
                nbd::Command::Read,
                0,
                next,
                next * BLOCK,
                &[],
                (count * BLOCK) as u32,
            )
            .context("verify: sending a read")?;
            next += count;
            in_flight += 1;
        }
        let (first, error) = nbd.receive().context("verify: waiting for a read")?;
        in_flight -= 1;
        replies += 1;
        if error != 0 {
            bail!("verify: read at block {first} failed with error {error}");
        }
        let count = chunk.min(blocks - first);
        let mut data = vec![0u8; (count * BLOCK) as usize];
        nbd.s
            .read_exact(&mut data)
            .context("verify: reading data")?;
        for i in 0..count {
            let at = (i * BLOCK) as usize;
            let block = &data[at..at + BLOCK as usize];
            match ledger.check(first + i, block) {
                Some(why) => bad.push(why),
                None => ledger.settle(first + i, block),
            }
        }
    }
    figures.blocks_verified += blocks;
    if !bad.is_empty() {
        bail!(
            "{} blocks wrong after the restart; first: {}",
            bad.len(),
            bad[..bad.len().min(5)].join("; ")
        );
    }
    Ok(())
}
