#!/usr/bin/env bash
# The whole test suite, from a fresh clone, in about 25 minutes on two cores (docs/TESTING.md):
# installs the Debian packages the tests drive when missing, builds the tests once, runs every
# test (each family of seeded schedules for its time budget, every benchmark in a smoke run),
# the coverage-guided fuzz smoke and a one-minute chaos campaign with the same build, then
# prints the 15 slowest tests and each phase's time. Every phase runs even when one before it
# failed; the exit status says whether all passed.
#
# With CI=true (as CI sets it) a test that would skip for a missing tool or a missing
# ../shared/traces fails instead, naming it. The full benchmarks are scripts/bench.sh, the
# long schedule campaigns scripts/campaign.sh, long fuzzing scripts/fuzz.sh.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

started=$(date +%s)
phases=()
failed=()
# The last lines of each failed phase, printed again at the very end: CI keeps only the tail.
causes=()
phase_start=$started
# Ends the current phase: its time, and whether it failed.
finish() {
  local name=$1 rc=$2 now
  now=$(date +%s)
  phases+=("$(printf '%-28s %5d s  %s' "$name" $((now - phase_start)) "$([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  [ "$rc" = 0 ] || failed+=("$name")
  if [ "$rc" != 0 ] && [ -n "${3:-}" ] && [ -f "$3" ]; then
    causes+=("-- the last lines of $name ($3):" "$(grep -v '^ *\(PASS\|SLOW\|START\)' "$3" | tail -n 12)")
  fi
  phase_start=$now
}

echo "== $(date +%T) Debian packages the tests drive"
# program, package
tools=(
  "fio fio" "nbdkit nbdkit" "nbdinfo libnbd-bin" "nbdcopy libnbd-bin" "nbdfuse libnbd-bin"
  "qemu-io qemu-utils" "mkfs.ext4 e2fsprogs" "losetup mount" "chromium chromium"
  "etcd etcd-server"
)
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
missing=()
for t in "${tools[@]}"; do
  read -r program package <<<"$t"
  have "$program" || missing+=("$package")
done
# PostgreSQL's programs live under /usr/lib/postgresql/VERSION/bin (pgbench for its tests).
compgen -G "/usr/lib/postgresql/*/bin/pgbench" >/dev/null || missing+=(postgresql)
# Chromium renders advise's HTML report in a test (fonts for its text).
have chromium || missing+=(fonts-liberation)
# The build links OpenSSL (TLS with pre-shared keys on every port): its headers and pkg-config.
have pkg-config || missing+=(pkg-config)
pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev)
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
still=()
for t in "${tools[@]}"; do
  read -r program package <<<"$t"
  have "$program" || still+=("$program ($package)")
done
if ((${#still[@]})); then
  echo "not installed: ${still[*]}"
  # Under CI the tests that need them fail, naming them; elsewhere they say SKIPPED.
  [ -n "${CI:-}" ] && [ "${CI}" != false ] && echo "CI=true: the tests that need them will fail"
fi
if [ ! -d ../shared/traces ] && [ -z "${CORDILLERA_TRACES:-}" ]; then
  echo "note: ../shared/traces/ is absent: the real-trace tests say SKIPPED (and fail under CI=true)"
fi
# libCacheSim's Python bindings (PyPI), the peer the oracleGeneral interop test and the cache
# bench's smoke test run.
. scripts/libcachesim.sh "its interop test says SKIPPED (fails under CI=true)"
finish "packages" 0

# Each seeded-schedule family's time here (PREFIX_SECONDS, docs/TESTING.md), about two thirds of
# its test's own budget: the families take the whole machine while they run, so their budgets
# add up directly to the run's time. Fresh schedules every run still; the 10^5 per family come
# from scripts/campaign.sh. Set one beforehand to run it longer.
export SIM_SECONDS=${SIM_SECONDS:-6} VSTORE_SECONDS=${VSTORE_SECONDS:-12}
export OFFLOAD_SECONDS=${OFFLOAD_SECONDS:-25} VOLUME_PATH_SECONDS=${VOLUME_PATH_SECONDS:-12}
export SIERRA_SECONDS=${SIERRA_SECONDS:-20} SIERRA_SHORT_SECONDS=${SIERRA_SHORT_SECONDS:-20}
export WARM_SECONDS=${WARM_SECONDS:-10} RESTRIPE_SECONDS=${RESTRIPE_SECONDS:-10}
export MEMBERS_SECONDS=${MEMBERS_SECONDS:-12}

# A clean build gains nothing from incremental compilation and pays for it.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
log=target/test-run.log
mkdir -p target
echo "== $(date +%T) build and tests (.config/nextest.toml ends any test that hangs)"
if cargo nextest --version >/dev/null 2>&1; then
  # One test more than there are cores: most tests of real processes wait on them (a cluster
  # bench smoke uses 31 % of a core); the few that time against the clock take two slots
  # (.config/nextest.toml).
  cargo nextest run --workspace --no-fail-fast --test-threads $(($(nproc) + 1)) 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
else
  echo "cargo-nextest is not installed: cargo test runs the tests without time limits"
  cargo test --workspace --no-fail-fast 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
fi
finish "build and tests" "$rc" "$log"

# The command line the tests ran (the test profile: optimized, with debug assertions); the
# fuzz seed and the chaos campaign use it rather than build a release binary.
binary=$(cargo test --workspace --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*\/cordillera\)".*/\1/p' | tail -n 1)
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
  echo "the cordillera binary of the tests was not found; building it"
  cargo build --release -p cordillera-cli && binary=target/release/cordillera
fi

echo "== $(date +%T) fuzz smoke: every decoder, coverage-guided, a few seconds each"
CORDILLERA_BIN=$binary scripts/fuzz.sh "${FUZZ_SECONDS:-3}" --smoke 2>&1 | tee target/fuzz-smoke.log
finish "fuzz smoke" "${PIPESTATUS[0]}" target/fuzz-smoke.log

echo "== $(date +%T) chaos campaign: SIGKILLs of real volume servers and stores under load (fails on any loss)"
"$binary" chaos --minutes "${CHAOS_MINUTES:-1}" 2>&1 | tee target/chaos.log
finish "chaos" "${PIPESTATUS[0]}" target/chaos.log

echo
echo "== the 15 slowest tests"
grep -E '^ +(PASS|FAIL|TIMEOUT|SIGKILL|SIGTERM|SIGSEGV|SIGABRT) \[ *[0-9.]+s\]' "$log" 2>/dev/null |
  sed -E 's/^ +([A-Z]+) \[ *([0-9.]+)s\] (\([^)]*\) )?/\2 \1 /' | sort -rn | head -n 15 |
  awk '{ printf "%9.1f s  %s", $1, $2; for (i = 3; i <= NF; i++) printf " %s", $i; print "" }'
echo
echo "== phases ($(( ($(date +%s) - started) / 60 )) min $(( ($(date +%s) - started) % 60 )) s in all)"
printf '%s\n' "${phases[@]}"
if ((${#failed[@]})); then
  printf '%s\n' "${causes[@]}"
  echo "FAILED: ${failed[*]}"
  exit 1
fi
