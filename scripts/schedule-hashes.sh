#!/usr/bin/env bash
# The same schedules, event for event: runs N fresh schedules of each family from a fixed base
# seed on one core and writes every schedule's seed and world event hash (for the striping
# families, a fingerprint of every disk's bytes and the counts at the end) to
# target/schedule-hashes/<commit>/<family>.txt, with the family's schedules per second. Two
# commits that ran the same schedules event for event write the same files, so a change meant
# to alter no schedule (a speed-up) is shown not to by diffing the two folders; the rates
# before and after are its measure.
#
#   scripts/schedule-hashes.sh [--schedules N] [--base B] [--core C] [--build campaign|test|pgo]
#                              [FAMILY…]
#
# FAMILY as for scripts/campaign.sh (default: all). Defaults: 200 schedules from base seed
# 7300000000000000000, on core 1 (taskset), the fixed seeds left out (the regression seeds run and
# are hashed too: compare the fresh seeds' lines when a change adds one). Prints one
# line per family: family, schedules, seconds, schedules per second, the hash file. A family's
# test that fails still writes its hashes (a failed schedule reads `failed`). --build campaign
# (the default) builds the tests as scripts/campaign.sh does (scripts/families.sh,
# `campaign_build`: link-time optimization); --build test as the test command does, into
# target/schedule-hashes/<commit>+test-build/; --build pgo as scripts/campaign.sh --pgo does
# (scripts/pgo-profile.sh), into <commit>+pgo-build/. The folders' hash files are the same.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

count=200
base=7300000000000000000
core=1
build=campaign
families=()
while (($#)); do
  case $1 in
    --schedules) count=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --core) core=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) families+=("$1"); shift ;;
  esac
done
. scripts/families.sh
case $build in
  campaign) build_env=("${campaign_build[@]}") ;;
  test) build_env=() ;;
  pgo)
    pgo_build || { echo "no profile for --build pgo (scripts/pgo-profile.sh failed)" >&2; exit 1; }
    build_env=("${pgo_build_env[@]}")
    ;;
  *) echo "--build $build: one of campaign, test, pgo" >&2; exit 2 ;;
esac
((${#families[@]})) || families=("${order[@]}")
for f in "${families[@]}"; do
  [ -n "${spec[$f]:-}" ] || { echo "unknown family $f (one of: ${order[*]})" >&2; exit 2; }
done

commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- crates Cargo.toml Cargo.lock || commit="$commit-dirty"
out=target/schedule-hashes/$commit
[ "$build" = campaign ] || out=$out+$build-build
mkdir -p "$out"
status=0
for f in "${families[@]}"; do
  read -r prefix package binary test <<<"${spec[$f]}"
  env "${build_env[@]}" cargo nextest run --profile campaign --no-run -p "$package" --test "$binary" >/dev/null 2>&1 ||
    { echo "$f: the test does not build" >&2; status=1; continue; }
  log=$out/$f.log
  env "${build_env[@]}" "${prefix}_FIXED=0" "${prefix}_SCHEDULES=$count" "${prefix}_BASE_SEED=$base" \
    "${prefix}_HASHES=$PWD/$out/$f.txt" NEXTEST_TEST_THREADS=1 \
    taskset -c "$core" cargo nextest run --profile campaign -p "$package" --test "$binary" \
    -E "test(=$test)" --no-capture >"$log" 2>&1 || status=1
  line=$(grep -h '^schedule summary:' "$log" | tail -n 1)
  ran=$(sed -n 's/.* schedules=\([0-9]*\).*/\1/p' <<<"$line")
  secs=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' <<<"$line")
  if [ -z "$ran" ] || [ -z "$secs" ]; then
    echo "$f: no summary (see $log)"
    status=1
    continue
  fi
  printf '%s\t%s schedules\t%s s\t%s /s\t%s\n' "$f" "$ran" "$secs" \
    "$(awk -v n="$ran" -v s="$secs" 'BEGIN { printf "%.2f", n / s }')" "$out/$f.txt"
done
exit $status
