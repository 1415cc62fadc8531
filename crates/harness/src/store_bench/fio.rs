//! fio, the informative baseline on the machine's own disk, with durability matched to the
//! store's.

use super::*;

pub(super) fn fio_json(args: &[String]) -> Result<serde_json::Value> {
    let out = Command::new("fio")
        .args(args)
        .arg("--output-format=json")
        .output()?;
    if !out.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON object.
    let start = text.find('{').context("no JSON from fio")?;
    Ok(serde_json::from_str(&text[start..])?)
}

/// A file of `bytes` zeros, written and made durable, its pages dropped from the cache: fio's
/// target, laid out as the store's log is.
pub(super) fn laid_out(path: &Path, bytes: u64) -> Result<()> {
    std::fs::remove_file(path).ok();
    let file = DiskFile::open(path, true, IoMode::Buffered)?;
    file.file.set_len(bytes)?;
    zero_fill(&file, 0, bytes)?;
    drop_cached_pages(&file.file)?;
    Ok(())
}

pub(super) fn fio_write(
    dir: &Path,
    bs: &str,
    depth: usize,
    fdatasync: u64,
    total: u64,
    new_file: bool,
) -> Result<f64> {
    let file = dir.join("bench-fio.dat");
    if !new_file {
        laid_out(&file, total)?;
    }
    let json = fio_json(&[
        "--name=write".into(),
        format!("--filename={}", file.display()),
        "--rw=write".into(),
        format!("--bs={bs}"),
        format!("--size={total}"),
        "--ioengine=libaio".into(),
        format!("--iodepth={depth}"),
        "--direct=1".into(),
        format!("--fdatasync={fdatasync}"),
    ])?;
    std::fs::remove_file(file).ok();
    Ok(json["jobs"][0]["write"]["bw_bytes"]
        .as_f64()
        .context("fio bw")?
        / 1e6)
}

/// fio's median and 99th percentile write latency plus fdatasync latency (µs) at depth 1.
pub(super) fn fio_latency(dir: &Path, requests: u64, new_file: bool) -> Result<(f64, f64)> {
    let file = dir.join("bench-fio-lat.dat");
    if !new_file {
        laid_out(&file, requests * 4096)?;
    }
    let json = fio_json(&[
        "--name=latency".into(),
        format!("--filename={}", file.display()),
        "--rw=write".into(),
        "--bs=4k".into(),
        format!("--size={}", requests * 4096),
        "--ioengine=psync".into(),
        "--direct=1".into(),
        "--fdatasync=1".into(),
    ])?;
    std::fs::remove_file(file).ok();
    let job = &json["jobs"][0];
    let sum = |q: &str| -> Result<f64> {
        let write = job["write"]["clat_ns"]["percentile"][q]
            .as_f64()
            .context("fio write percentile")?;
        let sync = job["sync"]["lat_ns"]["percentile"][q]
            .as_f64()
            .context("fio sync percentile")?;
        Ok((write + sync) / 1e3)
    };
    Ok((sum("50.000000")?, sum("99.000000")?))
}

/// Sequential 1 MiB reads of exactly the log bytes recovery scanned (the rest of the file is
/// unwritten, and reading holes would flatter fio).
pub(super) fn fio_read(path: &Path, bytes: u64) -> Result<f64> {
    let file = std::fs::File::open(path)?;
    drop_cached_pages(&file)?;
    let json = fio_json(&[
        "--name=read".into(),
        format!("--filename={}", path.display()),
        "--rw=read".into(),
        "--bs=1m".into(),
        format!("--offset={}", cordillera_vstore::format::LOG_OFFSET),
        format!("--size={bytes}"),
        "--ioengine=psync".into(),
        "--readonly".into(),
    ])?;
    Ok(json["jobs"][0]["read"]["bw_bytes"]
        .as_f64()
        .context("fio read bw")?
        / 1e6)
}
