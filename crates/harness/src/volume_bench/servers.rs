//! The processes `volume bench` starts and the files they serve: stores, volume servers and
//! `nbdkit file` (each on the servers' CPU when the bench pins, `crate::cpus`), the filled and
//! fresh base files, and what a volume's status says about its off-loaded data. Shared with
//! `volume worst-case` and `volume pgbench`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::Proc;
use crate::cpus::{on_cpu, SERVER_CPU};

/// Runs `program args…` and waits for each line starting with one of `wanted` on its standard
/// error; returns the rest of each.
pub(crate) fn spawn_until(
    program: &Path,
    args: &[String],
    wanted: &[&str],
) -> Result<(Proc, Vec<String>)> {
    Proc::spawn_until(program, args, wanted).map_err(|e| anyhow!(e))
}

/// `r`, and on failure what the servers behind the run printed on standard error: an fio error
/// (an EIO, say) says what the client saw, their logs why.
pub(crate) fn explained<T>(r: Result<T>, servers: &[Proc]) -> Result<T> {
    r.map_err(|e| {
        let mut said = format!("{e:#}");
        for p in servers {
            said.push_str(&format!(
                "\n--- server {} said on standard error:\n{}",
                p.id(),
                p.log()
            ));
        }
        anyhow!(said)
    })
}

pub(crate) fn free_port() -> Result<u16> {
    Ok(cordillera_procs::process::free_addr()?.port())
}

pub(crate) struct Setup<'a> {
    pub me: PathBuf,
    pub dir: &'a Path,
    pub region: u64,
}

impl Setup<'_> {
    /// Removes the files `names` (each case's base and store once it is measured: the
    /// bench's peak disk use is one case's files beside the shared filled base).
    pub(crate) fn discard(&self, names: &[&str]) {
        for name in names {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }

    pub(crate) fn base(&self, name: &str) -> Result<PathBuf> {
        let path = self.dir.join(name);
        let _ = std::fs::remove_file(&path);
        std::fs::File::create(&path)?.set_len(self.region + (64 << 10))?;
        Ok(path)
    }

    /// The file the read cases share: its region filled with data on first use (written
    /// through the page cache, as a volume's data would be after use), its last 8 KiB (a
    /// volume's label and store set) zeroed on every use so that a volume formats it afresh.
    pub(super) fn filled(&self, name: &str) -> Result<PathBuf> {
        use std::io::{Seek, SeekFrom, Write};
        let path = self.dir.join(name);
        let size = self.region + (64 << 10);
        let fresh = std::fs::metadata(&path).map_or(true, |m| m.len() != size);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(fresh)
            .write(true)
            .open(&path)?;
        if fresh {
            eprintln!(
                "volume bench: filling {} bytes of {} for the read cases",
                self.region,
                path.display()
            );
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut chunk = vec![0u8; 1 << 20];
            let mut done = 0;
            while done < self.region {
                for word in chunk.chunks_exact_mut(8) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    word.copy_from_slice(&x.to_le_bytes());
                }
                let n = (self.region - done).min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n])?;
                done += n as u64;
            }
            f.set_len(size)?;
        }
        f.seek(SeekFrom::Start(size - 8192))?;
        f.write_all(&[0u8; 8192])?;
        Ok(path)
    }

    pub(super) fn store(&self, name: &str, emulate: bool) -> Result<(Proc, String)> {
        let path = self.dir.join(name);
        let _ = std::fs::remove_file(&path);
        let mut args: Vec<String> = [
            "store",
            "serve",
            "--size",
            "2g",
            "--sparse",
            "--io",
            "buffered",
            "--listen",
            "127.0.0.1:0",
            "--path",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(path.to_string_lossy().into());
        if emulate {
            args.extend(["--emulate".into(), "cheetah-15k".into()]);
        }
        let (p, found) = on_cpu(SERVER_CPU, || {
            spawn_until(&self.me, &args, &["cordillera store: listening on "])
        })?;
        Ok((p, found[0].clone()))
    }

    /// A freshly formatted volume with one store; returns (processes, NBD URI, metrics addr).
    pub(crate) fn volume(
        &self,
        name: &str,
        extra: &[&str],
        emulate: bool,
    ) -> Result<(Vec<Proc>, String, String)> {
        let base = self.base(&format!("{name}.base"))?;
        self.volume_on(name, &base, extra, emulate)
    }

    /// A volume formatted on `base` (which must have no label) with a fresh store `NAME.store`.
    pub(crate) fn volume_on(
        &self,
        name: &str,
        base: &Path,
        extra: &[&str],
        emulate: bool,
    ) -> Result<(Vec<Proc>, String, String)> {
        let (store, store_addr) = self.store(&format!("{name}.store"), emulate)?;
        let (v, uri, metrics) = self.volume_server(base, &store_addr, extra, emulate, true)?;
        Ok((vec![v, store], uri, metrics))
    }

    /// A volume server on `base` with the store at `store_addr`: formatting `base` first, or
    /// (`format` false) recovering the volume it holds; returns (process, NBD URI, metrics
    /// address).
    pub(super) fn volume_server(
        &self,
        base: &Path,
        store_addr: &str,
        extra: &[&str],
        emulate: bool,
        format: bool,
    ) -> Result<(Proc, String, String)> {
        let mut args: Vec<String> = ["volume", "serve"].iter().map(|s| s.to_string()).collect();
        if format {
            args.push("--format".into());
        }
        args.extend(
            [
                "--nbd",
                "127.0.0.1:0",
                "--metrics",
                "127.0.0.1:0",
                "--store",
                store_addr,
                "--base",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        args.push(base.to_string_lossy().into());
        args.extend(extra.iter().map(|s| s.to_string()));
        if emulate {
            args.extend(["--emulate".into(), "cheetah-15k".into()]);
        }
        let (v, found) = on_cpu(SERVER_CPU, || {
            spawn_until(
                &self.me,
                &args,
                &[
                    "cordillera volume: NBD export at ",
                    "cordillera volume: metrics at http://",
                ],
            )
        })?;
        let metrics = found[1].trim_end_matches("/metrics").to_string();
        Ok((v, found[0].clone(), metrics))
    }

    pub(super) fn nbdkit(&self, name: &str) -> Result<(Proc, String)> {
        let base = self.base(name)?;
        self.nbdkit_on(&base)
    }

    /// `nbdkit file` serving `base` as it is.
    pub(super) fn nbdkit_on(&self, base: &Path) -> Result<(Proc, String)> {
        nbdkit_serving(base, false)
    }

    /// `nbdkit file` serving `base` with every write durable before its reply (the `fua`
    /// filter's `fuamode=force`: each write carries FUA, which the file plugin makes durable
    /// with a flush), as an off-loaded write is: the store acknowledges an append only once
    /// its log is durable.
    pub(super) fn nbdkit_durable_on(&self, base: &Path) -> Result<(Proc, String)> {
        nbdkit_serving(base, true)
    }
}

/// glibc's allocator for nbdkit: buffers up to this size come from its heap, not each mapped
/// and unmapped on its own. Left to itself, glibc maps every buffer over 128 KiB until its
/// threshold adapts, and a fresh `nbdkit file` serves its first 5 s of 1 MiB reads at about
/// two thirds of its rate 10 s later (docs/BENCHMARKS.md); with it, at that rate from the
/// start. Our servers allocate with mimalloc, which has no such phase.
pub(crate) const NBDKIT_MALLOC: &str = "glibc.malloc.mmap_threshold=4194304";

/// `nbdkit file` on `base`, with the `fua` filter forcing FUA on every write if `durable`.
fn nbdkit_serving(base: &Path, durable: bool) -> Result<(Proc, String)> {
    let port = free_port()?;
    let mut command = Command::new("nbdkit");
    command.env("GLIBC_TUNABLES", NBDKIT_MALLOC);
    command.args([
        "--foreground",
        "--exit-with-parent",
        "--port",
        &port.to_string(),
    ]);
    if durable {
        command.arg("--filter=fua");
    }
    command.arg("file").arg(base);
    if durable {
        command.arg("fuamode=force");
    }
    let child = on_cpu(SERVER_CPU, || command.stderr(Stdio::null()).spawn())
        .context("cannot run nbdkit (install it: apt-get install nbdkit)")?;
    let proc = Proc::adopt(child);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok((proc, format!("nbd://127.0.0.1:{port}")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("nbdkit did not start listening on {port}")
}

/// The benchmark's directory: `given` (created if missing), else a fresh one under `parent`,
/// removed when the returned guard drops.
pub(crate) fn work_dir(
    given: &Option<PathBuf>,
    parent: &Path,
    prefix: &str,
) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    if let Some(d) = given {
        std::fs::create_dir_all(d)?;
        return Ok((d.clone(), None));
    }
    let scratch = tempfile::Builder::new().prefix(prefix).tempdir_in(parent)?;
    Ok((scratch.path().to_path_buf(), Some(scratch)))
}

/// Bytes an unprivileged writer may still use on the file system holding `path`.
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a zeroed statvfs for the kernel to fill.
    let ok = unsafe { libc::statvfs(c_path.as_ptr(), &mut stats) } == 0;
    ok.then(|| stats.f_bavail as u64 * stats.f_frsize as u64)
}

/// The bytes whose latest version is off-loaded, from the volume's status.
pub(crate) fn offloaded_bytes(metrics: &str) -> Result<u64> {
    let addr = metrics.parse().context("metrics address")?;
    let v: serde_json::Value =
        serde_json::from_str(&cordillera_runtime::http::http_get(addr, "/status")?)?;
    v["offloaded_bytes"]
        .as_u64()
        .ok_or_else(|| anyhow!("no offloaded_bytes in the volume's status"))
}

pub(crate) fn offloaded_fraction(metrics: &str) -> Result<f64> {
    let addr = metrics.parse().context("metrics address")?;
    let v: serde_json::Value =
        serde_json::from_str(&cordillera_runtime::http::http_get(addr, "/status")?)?;
    let off = v["offloaded_writes"].as_f64().unwrap_or(0.0);
    let base = v["base_writes"].as_f64().unwrap_or(0.0);
    Ok(if off + base > 0.0 {
        off / (off + base)
    } else {
        0.0
    })
}
