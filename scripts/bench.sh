#!/usr/bin/env bash
# Every benchmark, each against its peer in the same run where it has one (figures, not
# pass/fail: the machine is shared and noisy; docs/BENCHMARKS.md reads them). A release build,
# then: the volume against nbdkit, the store against its transport ceiling and fio, the cache
# simulator, Bonfire's overheads on real I/O, lab bonfire on a 4× longer trace, advise on a
# generated day, pgbench on ext4 on the volume, Sierra's cluster day, the storage pool, the NBD
# port with TLS against nbdkit's.
# About 30 minutes on two cores. The test command runs each of them in a smoke run of a few
# seconds (crates/cli/tests/bench_smoke.rs and the store's and trace's tests).
#
#   scripts/bench.sh [NAME…]     NAME: volume store cache warmup lab-bonfire advise pgbench
#                                cluster pool tls (default: all)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

all=(volume store cache warmup lab-bonfire advise pgbench cluster pool tls)
wanted=("$@")
((${#wanted[@]})) || wanted=("${all[@]}")
for w in "${wanted[@]}"; do
  [[ " ${all[*]} " == *" $w "* ]] || { echo "unknown benchmark $w (one of: ${all[*]})" >&2; exit 2; }
done
want() { [[ " ${wanted[*]} " == *" $1 "* ]]; }

echo "== $(date +%T) release build"
cargo build --release -p cordillera-cli --locked 2>/dev/null || cargo build --release -p cordillera-cli || exit 1
bin=target/release/cordillera
failed=()
run() {
  local name=$1
  shift
  if ! "$@"; then
    echo "FAILED benchmark $name: $*"
    failed+=("$name")
  fi
}

if want volume; then
  echo "== $(date +%T) volume benchmark: the off-loading volume against nbdkit, reads, writes, mixed, small and large"
  # It writes up to 3.25 GiB in the temporary directory (1 GiB region).
  free_mib=$(df --output=avail -m "${TMPDIR:-/tmp}" | tail -1 | tr -d ' ')
  if ! command -v fio >/dev/null 2>&1 || ! command -v nbdkit >/dev/null 2>&1; then
    echo "SKIPPED volume benchmark: fio or nbdkit is not installed"
  elif [ "${free_mib:-0}" -lt 3584 ]; then
    echo "SKIPPED volume benchmark: ${TMPDIR:-/tmp} has ${free_mib} MiB free, the bench needs 3584"
  else
    run volume "$bin" volume bench --seconds 4 --repeat 3
  fi
fi

if want store; then
  echo "== $(date +%T) store benchmark: transport ceiling, emulated device, this machine's disk"
  if command -v fio >/dev/null 2>&1 && [ -d /dev/shm ]; then
    rm -rf target/store-bench
    run store "$bin" store bench --dir target/store-bench --bytes 128m --ceiling-bytes 512m --repeat 3 --device-seconds 2
    rm -rf target/store-bench
  else
    echo "SKIPPED store benchmark: fio is not installed or there is no /dev/shm"
  fi
fi

if want cache; then
  echo "== $(date +%T) cache simulator speed, beside libCacheSim"
  . scripts/libcachesim.sh "the cache bench runs without its peer"
  if [ -f ../shared/traces/arc/P12.lis.zst ]; then
    run cache "$bin" bench cache --trace ../shared/traces/arc/P12.lis.zst --cache-size 256m --repeat 3
    run cache "$bin" bench cache --repeat 3
  else
    echo "note: ../shared/traces is absent: on the generated Zipf workload instead of ARC P12"
    run cache "$bin" bench cache --repeat 3
  fi
fi

if want warmup; then
  echo "== $(date +%T) Bonfire's overheads on real I/O"
  # Half the default trace: the metadata-only pre-warm reads every block from the emulated base
  # one by one (about 100 s at the default).
  run warmup "$bin" volume warmup-bench --trace gen:zipf:count=100000,span=1g,alpha=1
fi

if want lab-bonfire; then
  echo "== $(date +%T) lab bonfire streaming a trace 4x longer: wall time, records/s, peak memory"
  # The issue's size is: cordillera bench lab-bonfire --records 100m --sizes 1
  run lab-bonfire "$bin" bench lab-bonfire --records 300k --days 3 --volumes 2 --sizes 2 --span 256m
fi

if want advise; then
  echo "== $(date +%T) advise on one generated day of one volume, as MSR CSV"
  # A busy MSR volume's day too: cordillera bench advise --rates 7,60
  run advise "$bin" bench advise --rates 7
fi

if want pgbench; then
  echo "== $(date +%T) pgbench on ext4 on the volume"
  if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ] || ! command -v nbdfuse >/dev/null 2>&1 \
     || ! ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1; then
    echo "SKIPPED pgbench benchmark: needs root, /dev/fuse, nbdfuse and PostgreSQL"
  else
    run pgbench "$bin" volume pgbench --seconds 12 --repeat 2
  fi
fi

if want cluster; then
  echo "== $(date +%T) Sierra cluster benchmark: a compressed day, top gear vs gear shifting, Table 5, Figure 12"
  if [ ! -d /dev/shm ]; then
    echo "SKIPPED cluster benchmark: no /dev/shm for the emulated disks' files"
  else
    run cluster "$bin" cluster bench --per-rack 2 --hour-seconds 3 --wake-seconds 0.5 \
      --throughput-seconds 2 --rebuild-per-rack 2,3 --rebuild-bytes-per-server 48m
  fi
fi

if want pool; then
  echo "== $(date +%T) storage pool benchmark: narrow vs wide on emulated arrays, restripe rate under load"
  if ! command -v fio >/dev/null 2>&1; then
    echo "SKIPPED pool benchmark: fio is not installed"
  else
    run pool "$bin" pool bench --seconds 4 --rounds 2
  fi
fi

if want tls; then
  echo "== $(date +%T) TLS benchmark: the NBD port with a pre-shared key against nbdkit's, nbdcopy as the client"
  if ! command -v nbdcopy >/dev/null 2>&1 || ! command -v nbdkit >/dev/null 2>&1; then
    echo "SKIPPED tls benchmark: nbdcopy or nbdkit is not installed"
  else
    run tls "$bin" bench tls --region 512m --repeat 5
  fi
fi

echo "== $(date +%T) done"
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
