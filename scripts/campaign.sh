#!/usr/bin/env bash
# Long campaigns of fresh seeded schedules, family by family, and a summary of what each ran:
# schedules, failures, crashes injected, writes acknowledged, reads checked. The test command
# runs each family for a time budget (about 30–60 s); a campaign runs 10^5 schedules (or as
# many as fit in --seconds) before anyone calls a change correct (docs/TESTING.md).
#
#   scripts/campaign.sh [--schedules N | --seconds S] [--pgo] [FAMILY…]
#   scripts/campaign.sh --totals
#
# FAMILY: sim vstore offload volume-path sierra sierra-short warm restripe members (default: all).
# Default: --schedules 100000. Each family's fresh schedules start from a new base seed; a
# failure names the seed and the command that replays it (and belongs in the family's
# regression list). The fixed seeds are left out (the test command runs them). The tests are
# built as scripts/families.sh says (`campaign_build`: the test profile with link-time
# optimization, in target/campaign-build), so the test command's build is not touched. --pgo
# builds them guided by a profile of the families' own schedules as well (scripts/pgo-profile.sh
# makes it, or reuses the one of this code; with its own build, 40 minutes more the first time
# on a busy two-core machine, for about a fifth more schedules per second: for runs of hours).
#
# Each family's run is appended to docs/campaigns.tsv (commit it): date, commit, the family's
# code (a hash of what its test compiles: its workspace crates, the packages it resolves, the
# profiles; "dirty" with uncommitted changes there), family, fresh schedules, failed, seconds,
# base seed. The campaign build's link-time and profile settings are not part of the code: they
# change how the same code is optimized, not what it does or checks (the families' hash files
# are identical under the three builds: scripts/schedule-hashes.sh --build test|pgo).
# Fresh seeds start from a random base each run, so runs of the same code add up: --totals
# prints, per family, the fresh schedules and failures recorded at commits whose code for that
# family is the same as now (toward the 10^5 before "correct").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# The rest is one block, which bash reads whole before running it: a campaign runs for hours, and
# bash reads a plain script as it goes, so an edit of this file meanwhile would run from the
# middle of a line (it did: the ledger row was written, the summary cut by a syntax error).
{

count=100000
seconds=""
totals=false
pgo=false
families=()
while (($#)); do
  case $1 in
    --schedules) count=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    --totals) totals=true; shift ;;
    --pgo) pgo=true; shift ;;
    *) families+=("$1"); shift ;;
  esac
done

# The families (prefix, package, test binary, test) and their order.
. "$(dirname "$0")/families.sh"
((${#families[@]})) || families=("${order[@]}")
for f in "${families[@]}"; do
  [ -n "${spec[$f]:-}" ] || { echo "unknown family $f (one of: ${order[*]})" >&2; exit 2; }
done

ledger=docs/campaigns.tsv
# The code a family's test compiles, as one hash: the workspace crates its test binary depends
# on (their trees in git), every package it resolves with its version and features (`cargo tree`
# of its package: normal, build and dev dependencies), and the root Cargo.toml's profiles. A
# change elsewhere (the runtime, the command line, a new crate beside it) leaves the count
# standing. At another commit it is computed in a scratch worktree (target/campaign/wt).
deps() {
  (cd "$1" && cargo tree -q --offline -p "$2" -e normal,build,dev --prefix none -f '{p} {f}' 2>/dev/null) |
    sed "s|(\($1/\)\{0,1\}\(crates/[^)]*\))|(\2)|" | sort -u
}
family_code() {
  local rev=$1 family=$2 prefix package binary test dir
  read -r prefix package binary test <<<"${spec[$family]}"
  if [ "$rev" = HEAD ]; then
    dir=$PWD
  else
    dir=$PWD/target/campaign/wt
    if [ ! -d "$dir" ]; then
      git worktree add -q --detach "$dir" "$rev" >/dev/null 2>&1 || return 1
    fi
    git -C "$dir" checkout -q --detach "$rev" 2>/dev/null || return 1
  fi
  local list dirs
  list=$(deps "$dir" "$package")
  [ -n "$list" ] || return 1
  # shellcheck disable=SC2207
  dirs=($(sed -n 's|.*(\(crates/[^)]*\)).*|\1|p' <<<"$list" | sort -u))
  if [ "$rev" = HEAD ] && [ -n "$(git status --porcelain -- Cargo.toml Cargo.lock "${dirs[@]}")" ]; then
    echo dirty
    return 0
  fi
  { echo "$list"; git ls-tree "$rev" -- "${dirs[@]}"; git show "$rev:Cargo.toml" | sed -n '/^\[profile/,$p'; } |
    git hash-object --stdin | cut -c1-12
}
family_dirs() {
  local prefix package binary test
  read -r prefix package binary test <<<"${spec[$1]}"
  deps "$PWD" "$package" | sed -n 's|.*(\(crates/[^)]*\)).*|\1|p' | sort -u | tr '\n' ' '
}
if $totals; then
  echo "commit $(git rev-parse --short HEAD); fresh schedules recorded in $ledger for the code each"
  echo "family's test compiles as it is now (its crates, resolved dependencies, profiles):"
  cache=target/campaign/codes.tsv
  mkdir -p target/campaign
  touch "$cache"
  # The codes are read with `cargo tree --offline`: on a new machine nothing is downloaded yet.
  cargo fetch -q || { echo "cargo fetch failed: the families' code cannot be read" >&2; exit 1; }
  for f in "${order[@]}"; do
    now=$(family_code HEAD "$f")
    n=0 x=0 r=0
    while IFS=$'\t' read -r _ commit tree fam fresh failed _; do
      [ "$fam" = "$f" ] && [ "$tree" != dirty ] || continue
      code=$(awk -F'\t' -v c="$commit" -v f="$f" '$1 == c && $2 == f { print $3 }' "$cache")
      if [ -z "$code" ]; then
        # An unreadable commit is not remembered: the next --totals tries it again.
        if code=$(family_code "$commit" "$f"); then
          printf '%s\t%s\t%s\n' "$commit" "$f" "$code" >>"$cache"
        else
          code=unknown
        fi
      fi
      [ "$code" = "$now" ] || continue
      n=$((n + fresh)) x=$((x + failed)) r=$((r + 1))
    done < <(tail -n +2 "$ledger")
    printf '  %-13s %9d fresh, %d failed, %d runs  (code %s: %s)\n' "$f" "$n" "$x" "$r" "$now" "$(family_dirs "$f")"
  done
  exit 0
fi
[ -f "$ledger" ] || printf 'date\tcommit\tcode_tree\tfamily\tfresh\tfailed\tseconds\tbase_seed\n' >"$ledger"

build_env=("${campaign_build[@]}")
build=lto
if $pgo; then
  pgo_build || { echo "no profile for --pgo (scripts/pgo-profile.sh failed)" >&2; exit 1; }
  build_env=("${pgo_build_env[@]}")
  build="lto+pgo, $(basename "$pgo_profile")"
fi

mkdir -p target/campaign
# `cargo tree --offline` (the family's code) needs every locked package downloaded: on a new
# machine nothing is yet, and the code came out empty.
cargo fetch -q || { echo "cargo fetch failed: the family's code cannot be read" >&2; exit 1; }
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
  tree=$(family_code HEAD "$f") || tree=unknown
  commit=$(git rev-parse --short HEAD)
  echo "== $(date +%T) $f: $what, code $tree, build $build (log: $log)"
  env "${build_env[@]}" "${env[@]}" cargo nextest run --profile campaign -p "$package" \
    --test "$binary" -E "test(=$test)" --no-capture >"$log" 2>&1
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
}
