#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the Debian packages the tests drive
# (fio, nbdkit, libnbd-bin with nbdfuse, qemu-utils, e2fsprogs, postgresql, chromium for the
# advise report's browser test) when missing, then builds and runs every test.
# Tests that need ../shared/traces/ say SKIPPED when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v fio >/dev/null 2>&1 || missing+=(fio)
command -v nbdkit >/dev/null 2>&1 || missing+=(nbdkit)
command -v nbdinfo >/dev/null 2>&1 || missing+=(libnbd-bin)
command -v qemu-io >/dev/null 2>&1 || missing+=(qemu-utils)
command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.ext4 ] || missing+=(e2fsprogs)
# PostgreSQL's programs live under /usr/lib/postgresql/VERSION/bin (pgbench for the benchmark).
compgen -G "/usr/lib/postgresql/*/bin/pgbench" >/dev/null || missing+=(postgresql)
# Headless Chromium renders advise's HTML report in a test (fonts for its text).
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-liberation)
if ((${#missing[@]})); then
  echo "== installing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -d ../shared/traces ] && [ -z "${CORDILLERA_TRACES:-}" ]; then
  echo "== note: ../shared/traces/ is absent: the real-trace tests will report SKIPPED"
fi

echo "== $(date +%T) fuzz smoke (coverage-guided, a few seconds per target)"
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --quiet || true
fi
if command -v cargo-fuzz >/dev/null 2>&1; then
  scripts/fuzz.sh "${FUZZ_SECONDS:-3}"
else
  echo "SKIPPED coverage-guided fuzz smoke: cargo-fuzz could not be installed (the deterministic smoke run in the tests still runs)"
fi

# The tests build what they need (the test profile); a separate build of the dev profile first
# cost 89 s of a 29-minute clean-clone run and saved the tests' build only 52 s.
echo "== $(date +%T) build and tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi

echo "== $(date +%T) chaos campaign: SIGKILLs of real volume servers and stores under load (fails on any loss)"
cargo build --release -p cordillera-cli --locked 2>/dev/null || cargo build --release -p cordillera-cli
target/release/cordillera chaos --minutes "${CHAOS_MINUTES:-1}"

echo "== $(date +%T) volume benchmark (figures, not pass/fail: the machine is shared and noisy)"
# It writes up to 3.25 GiB in the temporary directory (1 GiB region); on a shared machine whose
# disk is nearly full it is skipped, with the figures, rather than fail for want of space.
bench_free_mib=$(df --output=avail -m "${TMPDIR:-/tmp}" | tail -1 | tr -d ' ')
if ! command -v fio >/dev/null 2>&1 || ! command -v nbdkit >/dev/null 2>&1; then
  echo "SKIPPED volume benchmark: fio or nbdkit is not installed"
elif [ "${bench_free_mib:-0}" -lt 3584 ]; then
  echo "SKIPPED volume benchmark: ${TMPDIR:-/tmp} has ${bench_free_mib} MiB free, the bench needs 3584"
else
  cargo build --release -p cordillera-cli --locked 2>/dev/null || cargo build --release -p cordillera-cli
  target/release/cordillera volume bench --seconds 4 --repeat 3
fi

echo "== $(date +%T) store benchmark: transport ceiling, emulated device, this machine's disk (figures, not pass/fail)"
if command -v fio >/dev/null 2>&1 && [ -d /dev/shm ]; then
  rm -rf target/store-bench
  target/release/cordillera store bench --dir target/store-bench --bytes 128m --ceiling-bytes 512m --repeat 3 --device-seconds 2
  rm -rf target/store-bench
else
  echo "SKIPPED store benchmark: fio is not installed or there is no /dev/shm"
fi

echo "== $(date +%T) cache simulator speed and Bonfire's overheads on real I/O (figures, not pass/fail)"
cargo build --release -p cordillera-cli --locked 2>/dev/null || cargo build --release -p cordillera-cli
if [ -f ../shared/traces/arc/P12.lis.zst ]; then
  target/release/cordillera bench cache --trace ../shared/traces/arc/P12.lis.zst --cache-size 256m --repeat 3
else
  echo "SKIPPED cache benchmark on ARC P12: ../shared/traces is absent; on the generated Zipf workload instead"
  target/release/cordillera bench cache --repeat 3
fi
# Half the default trace: the metadata-only pre-warm reads every block from the emulated base
# one by one (about 100 s at the default), the longest figure of the suite.
target/release/cordillera volume warmup-bench --trace gen:zipf:count=100000,span=1g,alpha=1

echo "== $(date +%T) lab bonfire streaming a trace 4x longer: wall time, records/s, peak memory (figures, not pass/fail)"
# The short version; the issue's size is: cordillera bench lab-bonfire --records 100m --sizes 1
target/release/cordillera bench lab-bonfire --records 300k --days 3 --volumes 2 --sizes 2 --span 256m

echo "== $(date +%T) advise on one generated day of one volume, as MSR CSV (figures, not pass/fail)"
# The short version; a busy MSR volume's day: cordillera bench advise --rates 7,60
target/release/cordillera bench advise --rates 7

echo "== $(date +%T) pgbench on ext4 on the volume (figures, not pass/fail)"
if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ] || ! command -v nbdfuse >/dev/null 2>&1 \
   || ! ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1; then
  echo "SKIPPED pgbench benchmark: needs root, /dev/fuse, nbdfuse and PostgreSQL"
else
  cargo build --release -p cordillera-cli --locked 2>/dev/null || cargo build --release -p cordillera-cli
  target/release/cordillera volume pgbench --seconds 12 --repeat 2
fi

echo "== $(date +%T) Sierra cluster benchmark: a compressed day, top gear vs gear shifting, Table 5, Figure 12 (figures, not pass/fail)"
if [ ! -d /dev/shm ]; then
  echo "SKIPPED cluster benchmark: no /dev/shm for the emulated disks' files"
else
  cargo build --release -p cordillera-cli --locked 2>/dev/null || cargo build --release -p cordillera-cli
  target/release/cordillera cluster bench --per-rack 2 --hour-seconds 3 --wake-seconds 0.5 \
    --throughput-seconds 2 --rebuild-per-rack 2,3 --rebuild-bytes-per-server 48m
fi

echo "== $(date +%T) storage pool benchmark: narrow vs wide on emulated arrays, restripe rate under load (figures, not pass/fail)"
if ! command -v fio >/dev/null 2>&1; then
  echo "SKIPPED pool benchmark: fio is not installed"
else
  cargo build --release -p cordillera-cli --locked 2>/dev/null || cargo build --release -p cordillera-cli
  target/release/cordillera pool bench --seconds 4 --rounds 2
fi
