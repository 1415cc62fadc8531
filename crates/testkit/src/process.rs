//! Real processes for the tests: everything of `cordillera_procs::process` (started and waited
//! for by what they print, run within a time limit), and what only tests want — a tool that
//! must be installed ([`have`]), an export checked with qemu-io and fio.

use std::time::Duration;

pub use cordillera_procs::process::*;
use std::process::Command;

/// Whether `program` is installed. When it is not, a test skips (saying SKIPPED) outside CI
/// and fails under `CI=true` ([`crate::missing`]): the test command installs every program the
/// tests drive, so a missing one there is a broken install step, not a reason to pass.
pub fn have(program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output_within(Duration::from_secs(10))
        .is_ok_and(|o| o.status.success());
    if !found {
        crate::missing(&format!(
            "{program} is not installed (scripts/test.sh installs it)"
        ));
    }
    found
}

/// Writes 24 patterns of 4 to 64 KiB at scattered offsets of an NBD export with `qemu-io`,
/// flushes, and reads back every one that no later pattern overlaps; `Err` with qemu-io's
/// output if it fails or reads back anything else.
pub fn qemu_io_patterns(url: &str, export_bytes: u64) -> Result<(), String> {
    let mut args: Vec<String> = vec!["-f".into(), "raw".into(), url.into()];
    let places: Vec<(u64, u64, u8)> = (0..24)
        .map(|i| {
            (
                (i * 2_654_435_761u64) % (export_bytes / 4096 - 16) * 4096,
                4096 * (1 + i % 16),
                0x10 + i as u8,
            )
        })
        .collect();
    for &(at, len, p) in &places {
        args.extend(["-c".into(), format!("write -P {p} {at} {len}")]);
    }
    args.extend(["-c".into(), "flush".into()]);
    // Later writes win where places overlap: read back only what nothing later overwrote.
    for (k, &(at, len, p)) in places.iter().enumerate() {
        let later = places[k + 1..]
            .iter()
            .any(|&(a, l, _)| a < at + len && at < a + l);
        if !later {
            args.extend(["-c".into(), format!("read -P {p} {at} {len}")]);
        }
    }
    let out = Command::new("qemu-io")
        .args(&args)
        .output_within(Duration::from_secs(120))
        .map_err(|e| format!("cannot run qemu-io: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || text.contains("fail") || text.matches("read ").count() < 10 {
        return Err(text);
    }
    Ok(())
}

/// How long one fio run of a test may take.
pub const FIO_LIMIT: Duration = Duration::from_secs(300);

/// fio's NBD engine on `url` with crc32c verification (iodepth 8, the first bad block fatal)
/// and `extra` arguments; its output. Panics, with the output, on any error or bad block.
pub fn fio_verify(url: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "--name=verify".to_string(),
        "--ioengine=nbd".into(),
        format!("--uri={url}"),
        "--iodepth=8".into(),
        "--verify=crc32c".into(),
        "--verify_fatal=1".into(),
        "--verify_state_save=0".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = Command::new("fio")
        .args(&args)
        .output_within(FIO_LIMIT)
        .unwrap_or_else(|e| panic!("fio {args:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "fio {args:?} failed:\n{text}");
    assert!(!text.contains("verify: bad"), "{text}");
    text
}
