#!/usr/bin/env bash
# Long campaigns of fresh seeded schedules, family by family, and a summary of what each ran:
# schedules, failures, crashes injected, writes acknowledged, reads checked. The test command
# runs each family for a time budget (about 30–60 s); a campaign runs 10^5 schedules (or as
# many as fit in --seconds) before anyone calls a change correct (docs/TESTING.md).
#
#   scripts/campaign.sh [--schedules N | --seconds S] [FAMILY…]
#
# FAMILY: sim vstore offload volume-path sierra sierra-short warm restripe (default: all).
# Default: --schedules 100000. Each family's fresh schedules start from a new base seed; a
# failure names the seed and the command that replays it (and belongs in the family's
# regression list). The fixed seeds are left out (the test command runs them).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

count=100000
seconds=""
families=()
while (($#)); do
  case $1 in
    --schedules) count=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) families+=("$1"); shift ;;
  esac
done

# family: prefix, package, test binary, test
declare -A spec=(
  [sim]="SIM cordillera-sim world acknowledged_records_survive_seeded_faults"
  [vstore]="VSTORE cordillera-vstore durability acknowledged_writes_survive_crashes_and_wraps"
  [offload]="OFFLOAD cordillera-offload simulation offloaded_writes_survive_crashes_and_are_reclaimed"
  [volume-path]="VOLUME_PATH cordillera-offload simulation the_request_path_with_a_cache_serves_nothing_stale"
  [sierra]="SIERRA cordillera-gears simulation sierra_keeps_every_acknowledged_write_through_gear_shifts_and_failures"
  [sierra-short]="SIERRA_SHORT cordillera-gears simulation sierra_keeps_every_acknowledged_write_in_short_schedules"
  [warm]="WARM cordillera-warmup cache_simulation the_cache_never_holds_or_preloads_stale_contents"
  [restripe]="RESTRIPE cordillera-striping restripe_simulation no_acknowledged_write_is_lost_and_every_restripe_finishes_across_crashes"
)
order=(sim vstore offload volume-path sierra sierra-short warm restripe)
((${#families[@]})) || families=("${order[@]}")
for f in "${families[@]}"; do
  [ -n "${spec[$f]:-}" ] || { echo "unknown family $f (one of: ${order[*]})" >&2; exit 2; }
done

mkdir -p target/campaign
summaries=()
status=0
for f in "${families[@]}"; do
  read -r prefix package binary test <<<"${spec[$f]}"
  log=target/campaign/$f.log
  env=("${prefix}_FIXED=0")
  if [ -n "$seconds" ]; then
    env+=("${prefix}_SECONDS=$seconds")
    what="for ${seconds} s"
  else
    env+=("${prefix}_SCHEDULES=$count")
    what="$count schedules"
  fi
  echo "== $(date +%T) $f: $what (log: $log)"
  env "${env[@]}" cargo nextest run --profile campaign -p "$package" --test "$binary" \
    -E "test(=$test)" --no-capture >"$log" 2>&1
  rc=$?
  line=$(grep -h '^schedule summary:' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    line="schedule summary: $prefix (no summary: the run stopped before it; see $log)"
  fi
  summaries+=("${line#schedule summary: }")
  if [ $rc != 0 ]; then
    status=1
    grep -E 'schedules failed|reproduce:' "$log" | head -n 5
    echo "FAILED: $f (the failing seeds and how to replay them are in $log)"
  fi
done

echo
echo "== campaign summary"
printf '%s\n' "${summaries[@]}"
exit $status
