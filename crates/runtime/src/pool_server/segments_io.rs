//! The pool's I/O on its arrays: a request's segments grouped into one I/O per contiguous run
//! of an array, the arrays served at once.

use std::io;

use cordillera_striping::pool::Segment;

use super::PoolServer;

impl PoolServer {
    /// Reads segments into `buf` (byte `base` of the volume at `buf[0]`): one I/O per
    /// contiguous run of an array, the arrays in parallel.
    pub(super) fn read_segments(
        &self,
        segs: &[Segment],
        buf: &mut [u8],
        base: u64,
    ) -> io::Result<()> {
        let devices = self.devices();
        let runs = runs(segs);
        let read = |run: &Run| -> io::Result<Vec<u8>> {
            let mut data = vec![0u8; run.length as usize];
            devices[run.array].read(run.lun_offset, &mut data)?;
            Ok(data)
        };
        let results: Vec<io::Result<Vec<u8>>> = per_device(&runs, |r| r.array, read);
        for (run, data) in runs.iter().zip(results) {
            let data = data?;
            for s in &run.pieces {
                let at = (s.volume_offset - base) as usize;
                let from = (s.lun_offset - run.lun_offset) as usize;
                buf[at..at + s.length as usize]
                    .copy_from_slice(&data[from..from + s.length as usize]);
            }
        }
        Ok(())
    }

    /// Writes segments from `data` (byte `base` of the volume at `data[0]`), synced if asked:
    /// one I/O per contiguous run of an array, the arrays in parallel.
    pub(super) fn write_segments(
        &self,
        segs: &[Segment],
        data: &[u8],
        base: u64,
        sync: bool,
    ) -> io::Result<()> {
        let devices = self.devices();
        let runs = runs(segs);
        let write = |run: &Run| -> io::Result<()> {
            let mut bytes = Vec::with_capacity(run.length as usize);
            for s in &run.pieces {
                let at = (s.volume_offset - base) as usize;
                bytes.extend_from_slice(&data[at..at + s.length as usize]);
            }
            devices[run.array].write(run.lun_offset, &bytes)?;
            if sync {
                devices[run.array].sync()?;
            }
            Ok(())
        };
        per_device(&runs, |r| r.array, write).into_iter().collect()
    }
}

/// Segments of one array that are contiguous there, as one I/O.
struct Run {
    array: usize,
    lun_offset: u64,
    length: u64,
    pieces: Vec<Segment>,
}

/// Segments grouped into runs: per array, in address order, adjacent ones merged.
fn runs(segs: &[Segment]) -> Vec<Run> {
    let mut sorted = segs.to_vec();
    sorted.sort_by_key(|s| (s.array, s.lun_offset));
    let mut out: Vec<Run> = Vec::new();
    for s in sorted {
        match out.last_mut() {
            Some(r) if r.array == s.array && r.lun_offset + r.length == s.lun_offset => {
                r.length += s.length;
                r.pieces.push(s);
            }
            _ => out.push(Run {
                array: s.array,
                lun_offset: s.lun_offset,
                length: s.length,
                pieces: vec![s],
            }),
        }
    }
    out
}

/// `f` on every item; items of different devices (`device(item)`) at once, a thread per
/// device beyond the first, those of one device in order.
pub(crate) fn per_device<I: Sync, T: Send>(
    items: &[I],
    device: impl Fn(&I) -> usize + Sync,
    f: impl Fn(&I) -> T + Sync,
) -> Vec<T> {
    let mut devices: Vec<usize> = items.iter().map(&device).collect();
    devices.sort_unstable();
    devices.dedup();
    if devices.len() <= 1 {
        return items.iter().map(&f).collect();
    }
    let (f, device) = (&f, &device);
    let mut results: Vec<Option<T>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = devices
            .iter()
            .map(|&d| {
                scope.spawn(move || {
                    items
                        .iter()
                        .enumerate()
                        .filter(|(_, i)| device(i) == d)
                        .map(|(k, i)| (k, f(i)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (k, t) in h.join().expect("an I/O thread") {
                results[k] = Some(t);
            }
        }
    });
    results
        .into_iter()
        .map(|t| t.expect("every item done"))
        .collect()
}
