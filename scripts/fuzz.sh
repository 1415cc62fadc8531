#!/usr/bin/env bash
# Coverage-guided fuzzing of every decoder (fuzz/fuzz_targets/): all targets built at once with
# libFuzzer's instrumentation, then each run for SECONDS, as many at a time as there are cores.
#
#   scripts/fuzz.sh [SECONDS] [--smoke] [TARGET…]     (SECONDS: default 10)
#
# --smoke is the test command's: the targets built at opt-level 1 without debug information
# (about half the build time of opt-level 3; fewer runs per second, enough for a few seconds
# each). Any crash fails the
# run, with the crashing input in fuzz/artifacts/TARGET/ and the command that replays it.
#
# No cargo-fuzz is needed: the build passes what `cargo fuzz build -s none` of cargo-fuzz 0.13
# passes (sanitizer coverage with inline 8-bit counters, PC table, compare tracing and stack
# depth, `--cfg fuzzing`, debug assertions), so the binaries are the ones it builds and
# `cargo fuzz run TARGET` works the same where cargo-fuzz is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=10
smoke=0
targets=()
for arg in "$@"; do
  case $arg in
    --smoke) smoke=1 ;;
    [0-9]*) seconds=$arg ;;
    *) targets+=("$arg") ;;
  esac
done
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(sed -n '/^\[\[bin\]\]/,/^$/s/^name = "\(.*\)"/\1/p' fuzz/Cargo.toml)
fi
jobs=$(nproc)
host=$(rustc -vV | sed -n 's/^host: //p')

export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 -Cllvm-args=-sanitizer-coverage-stack-depth \
-Cdebug-assertions -Ccodegen-units=16"
# The smoke build also leaves out debug information (a panic still names its file and line;
# a crash replays under the full build): 163 s instead of 207 s on one core.
if ((smoke)); then export CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=0; fi
echo "== fuzz: building ${#targets[@]} targets ($( ((smoke)) && echo "opt-level 1, smoke" || echo "opt-level 3"))"
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
(cd fuzz && cargo build --release --target "$host" "${bins[@]}" --quiet)
out=fuzz/target/$host/release

# Seeds from the shared trace fragments for the trace readers whose corpus is empty.
traces=../shared/traces
seed() {
  local target=$1 corpus=fuzz/corpus/$1
  mkdir -p "$corpus"
  [ -z "$(ls -A "$corpus")" ] || return 0
  local format=${target#read_}
  if [ -d "$traces" ]; then
    # `head` closes the pipe early: the decompressor's SIGPIPE is expected here.
    set +o pipefail
    case $format in
      msr) head -c 4000 "$traces/msr/hm_0.chunk_148s.csv" > "$corpus/seed" ;;
      ascii5) head -c 4000 "$traces/msr_production/msnfs_slice.ms.trace" > "$corpus/seed" ;;
      cloudphysics) head -c 4000 "$traces/cloudphysics/cloudphysics_vscsi_sample.csv" > "$corpus/seed" ;;
      tencent) bzcat "$traces/tencent/tencent_cbs_sample.csv.bz2" | head -c 4000 > "$corpus/seed" ;;
      systor17) zcat "$traces/systor17/systor17_vdi_sample1.csv.gz" | head -c 4000 > "$corpus/seed" ;;
      arc) zstdcat "$traces/arc/P3.lis.zst" 2>/dev/null | head -c 4000 > "$corpus/seed" ;;
    esac
    set -o pipefail
  fi
  if [ "$format" = binary ]; then
    # The binary trace format, written by the command line (CORDILLERA_BIN: an already built
    # one, as the test command passes; else a release build).
    local convert=(cargo run -q --release --)
    [ -n "${CORDILLERA_BIN:-}" ] && convert=("$CORDILLERA_BIN")
    printf '%s\n' 128166481075232275,rsrch,1,Write,281358336,45056,94872 \
      128166481075232718,rsrch,1,Read,281292800,65536,94430 128166481075299367,web,0,Write,0,512,7 |
      "${convert[@]}" trace convert - "$corpus/seed" --to binary
  fi
}
for t in "${targets[@]}"; do seed "$t"; done

# One target: SECONDS of fuzzing; on a crash, the log's end and how to replay the input.
run_one() {
  local t=$1 log=fuzz/$1.log
  mkdir -p "fuzz/artifacts/$t"
  if "$out/$t" -max_total_time="$seconds" -max_len=8192 -artifact_prefix="fuzz/artifacts/$t/" \
      "fuzz/corpus/$t" > "$log" 2>&1; then
    echo "$t: $(grep -E '^Done [0-9]+ runs' "$log" || tail -n 1 "$log")"
  else
    tail -n 40 "$log"
    echo "FAILED fuzz target $t: the crashing input is in fuzz/artifacts/$t/; replay it with $out/$t fuzz/artifacts/$t/<file>"
    return 1
  fi
}
export -f run_one
export out seconds
echo "== fuzz: ${#targets[@]} targets for ${seconds} s each, $jobs at a time"
if ! printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {}; then
  echo "fuzzing found a crash (above)" >&2
  exit 1
fi
