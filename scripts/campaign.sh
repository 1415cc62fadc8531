#!/usr/bin/env bash
# Long campaigns of fresh seeded schedules, family by family, and a summary of what each ran:
# schedules, failures, crashes injected, writes acknowledged, reads checked. The test command
# runs each family for a time budget (about 30–60 s); a campaign runs 10^5 schedules (or as
# many as fit in --seconds) before anyone calls a change correct (docs/TESTING.md).
#
#   scripts/campaign.sh [--schedules N | --seconds S] [FAMILY…]
#   scripts/campaign.sh --totals
#
# FAMILY: sim vstore offload volume-path sierra sierra-short warm restripe members (default: all).
# Default: --schedules 100000. Each family's fresh schedules start from a new base seed; a
# failure names the seed and the command that replays it (and belongs in the family's
# regression list). The fixed seeds are left out (the test command runs them).
#
# Each family's run is appended to docs/campaigns.tsv (commit it): date, commit, the family's
# code tree (a hash of the workspace crates its test compiles, Cargo.toml and Cargo.lock;
# "dirty" with uncommitted changes there), family, fresh schedules, failed, seconds, base seed.
# Fresh seeds start from a random base each run, so runs of the same code add up: --totals
# prints, per family, the fresh schedules and failures recorded at commits whose code for that
# family is the same as now (toward the 10^5 before "correct").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

count=100000
seconds=""
totals=false
families=()
while (($#)); do
  case $1 in
    --schedules) count=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    --totals) totals=true; shift ;;
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
  [members]="MEMBERS cordillera-striping member_array_simulation member_arrays_keep_every_acknowledged_write_through_member_loss_and_crashes"
)
order=(sim vstore offload volume-path sierra sierra-short warm restripe members)
((${#families[@]})) || families=("${order[@]}")
for f in "${families[@]}"; do
  [ -n "${spec[$f]:-}" ] || { echo "unknown family $f (one of: ${order[*]})" >&2; exit 2; }
done

ledger=docs/campaigns.tsv
# The code a family's test compiles: the workspace crates its test binary depends on (normal,
# build and dev dependencies, found by `cargo tree`), the root Cargo.toml and Cargo.lock. A
# change elsewhere (the runtime, the command line) leaves a family's count standing.
closure() {
  local package=$1
  cargo tree -q -p "$package" -e normal,build,dev --prefix none -f '{p}' 2>/dev/null |
    sed -n "s|.*(\($PWD/\)\{0,1\}\(crates/[^)]*\)).*|\2|p" | sort -u | tr '\n' ' '
}
# code_tree REV PATHS…: a hash of those paths at commit REV ("dirty" for the work tree with
# uncommitted changes there).
code_tree() {
  local rev=$1; shift
  if [ "$rev" = HEAD ] && [ -n "$(git status --porcelain -- "$@")" ]; then
    echo dirty
  else
    git ls-tree "$rev" -- "$@" 2>/dev/null | git hash-object --stdin | cut -c1-12
  fi
}
family_paths() {
  local prefix package binary test
  read -r prefix package binary test <<<"${spec[$1]}"
  # shellcheck disable=SC2046
  echo Cargo.toml Cargo.lock $(closure "$package")
}
if $totals; then
  echo "commit $(git rev-parse --short HEAD); fresh schedules recorded in $ledger for the code each"
  echo "family's test compiles as it is now (its workspace crates, Cargo.toml, Cargo.lock):"
  for f in "${order[@]}"; do
    read -r -a paths <<<"$(family_paths "$f")"
    now=$(code_tree HEAD "${paths[@]}")
    n=0 x=0 r=0
    while IFS=$'\t' read -r _ commit tree fam fresh failed _; do
      [ "$fam" = "$f" ] && [ "$tree" != dirty ] || continue
      [ "$(code_tree "$commit" "${paths[@]}")" = "$now" ] || continue
      n=$((n + fresh)) x=$((x + failed)) r=$((r + 1))
    done < <(tail -n +2 "$ledger")
    printf '  %-13s %9d fresh, %d failed, %d runs  (code %s: %s)\n' "$f" "$n" "$x" "$r" "$now" "${paths[*]:2}"
  done
  exit 0
fi
[ -f "$ledger" ] || printf 'date\tcommit\tcode_tree\tfamily\tfresh\tfailed\tseconds\tbase_seed\n' >"$ledger"

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
  # The code and commit the test binary is built from, read before the build.
  read -r -a paths <<<"$(family_paths "$f")"
  tree=$(code_tree HEAD "${paths[@]}")
  commit=$(git rev-parse --short HEAD)
  echo "== $(date +%T) $f: $what, code $tree (log: $log)"
  env "${env[@]}" cargo nextest run --profile campaign -p "$package" --test "$binary" \
    -E "test(=$test)" --no-capture >"$log" 2>&1
  rc=$?
  line=$(grep -h '^schedule summary:' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    line="schedule summary: $prefix (no summary: the run stopped before it; see $log)"
  fi
  summaries+=("${line#schedule summary: }")
  field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$line"; }
  base=$(grep -ho 'from base seed [0-9]*' "$log" | head -n 1 | awk '{print $4}')
  if [ -n "$(field fresh)" ]; then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$commit" "$tree" "$f" "$(field fresh)" "$(field failed)" "$(field seconds)" "${base:-?}" >>"$ledger"
  fi
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
