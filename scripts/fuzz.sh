#!/usr/bin/env bash
# Runs every coverage-guided fuzz target for N seconds (default 10). Needs cargo-fuzz; on a
# stable toolchain it builds with RUSTC_BOOTSTRAP=1 and without a sanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
command -v cargo-fuzz >/dev/null 2>&1 || { echo "cargo-fuzz is not installed: cargo install cargo-fuzz" >&2; exit 2; }
if rustc --version | grep -q nightly; then flags=(); else export RUSTC_BOOTSTRAP=1; flags=(-s none); fi
traces=../shared/traces
for target in $(cargo fuzz list); do
  corpus=fuzz/corpus/$target
  mkdir -p "$corpus"
  format=${target#read_}
  if [ -d "$traces" ] && [ -z "$(ls -A "$corpus")" ]; then
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
  if [ "$format" = binary ] && [ -z "$(ls -A "$corpus")" ]; then
    printf '%s\n' 128166481075232275,rsrch,1,Write,281358336,45056,94872 \
      128166481075232718,rsrch,1,Read,281292800,65536,94430 128166481075299367,web,0,Write,0,512,7 |
      cargo run -q --release -- trace convert - "$corpus/seed" --to binary
  fi
  echo "== $target ($seconds s)"
  log=fuzz/$target.log
  if ! cargo fuzz run "${flags[@]}" "$target" "$corpus" -- -max_total_time="$seconds" -max_len=8192 >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz target $target failed; the crashing input is in fuzz/artifacts/$target/" >&2
    exit 1
  fi
  grep -E '^Done [0-9]+ runs' "$log" || tail -n 1 "$log"
done
