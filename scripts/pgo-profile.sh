#!/usr/bin/env bash
# A profile of the seeded families for the campaign build guided by it (profile-guided
# optimization: scripts/campaign.sh --pgo, scripts/schedule-hashes.sh --build pgo). It builds
# the families' tests instrumented (the campaign build of scripts/families.sh with
# -Cprofile-generate, in target/pgo-gen), runs a few training schedules of each family from a
# base seed of their own (TRAIN_BASE below, never a campaign's), and merges what they counted
# into target/pgo/<key>.profdata. The key names the code: the git trees of crates/ and
# Cargo.lock, Cargo.toml and rustc's version, or with uncommitted changes under crates/ or in
# Cargo.* a hash of those changes (target/pgo/dirty-<hash>.profdata). A profile is made once per
# key and reused.
#
#   scripts/pgo-profile.sh [--force]
#
# Prints progress on stderr and the profile's absolute path as the last line of stdout.
# --force makes the profile again even if one exists. It took 26 minutes on two cores that a
# campaign and another build shared (docs/BENCHMARKS.md). llvm-profdata must be of rustc's LLVM major
# version (LLVM's profile formats change between majors): /usr/lib/llvm-N/bin/llvm-profdata or
# llvm-profdata-N on PATH; Debian's llvm-N package is installed when it is missing and this
# runs as root.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# One block, read whole before it runs (scripts/campaign.sh says why).
{

force=false
case ${1:-} in
  --force) force=true ;;
  -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
  "") ;;
  *) echo "unknown argument $1 (--force, --help)" >&2; exit 2 ;;
esac

. scripts/families.sh

# Training schedules per family: a few seconds each in the instrumented build on one core.
declare -A train=(
  [sim]=1000 [vstore]=100 [offload]=40 [volume-path]=30 [sierra]=6 [sierra-short]=30
  [warm]=200 [restripe]=20000 [members]=2000
)
TRAIN_BASE=1

major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[ -n "$major" ] || { echo "rustc -vV names no LLVM version" >&2; exit 1; }
find_profdata() {
  if [ -x "/usr/lib/llvm-$major/bin/llvm-profdata" ]; then
    echo "/usr/lib/llvm-$major/bin/llvm-profdata"
  elif command -v "llvm-profdata-$major" >/dev/null; then
    command -v "llvm-profdata-$major"
  else
    return 1
  fi
}
if ! profdata=$(find_profdata); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing llvm-$major for llvm-profdata (rustc's LLVM is $major)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "llvm-$major"; } >&2
  fi
  profdata=$(find_profdata) || {
    echo "no llvm-profdata of LLVM $major (rustc's): install Debian's llvm-$major" >&2
    exit 1
  }
fi

mkdir -p target/pgo
code() {
  git rev-parse HEAD:crates HEAD:Cargo.lock HEAD:Cargo.toml
  rustc -vV
  git diff HEAD -- crates Cargo.toml Cargo.lock
  git ls-files --others --exclude-standard -- crates | xargs -r git hash-object
}
key=$(code | git hash-object --stdin | cut -c1-12)
[ -z "$(git status --porcelain -- crates Cargo.toml Cargo.lock)" ] || key=dirty-$key
profile=$PWD/target/pgo/$key.profdata
if [ -s "$profile" ] && ! $force; then
  echo "profile of this code: $profile (made earlier)" >&2
  echo "$profile"
  exit 0
fi

raw=$PWD/target/pgo/raw
rm -rf "$raw"
mkdir -p "$raw"
gen=("CARGO_TARGET_DIR=$PWD/target/pgo-gen" "${campaign_flags[@]}" "RUSTFLAGS=-Cprofile-generate=$raw")
for f in "${order[@]}"; do
  read -r prefix package binary test <<<"${spec[$f]}"
  echo "== $(date +%T) $f: instrumented build, then ${train[$f]} training schedules" >&2
  log=target/pgo/$f.log
  env "${gen[@]}" cargo nextest run --profile campaign --no-run -p "$package" --test "$binary" >"$log" 2>&1 ||
    { echo "$f: the instrumented test does not build (see $log)" >&2; exit 1; }
  # One file per process: nextest lists the tests in processes of their own.
  env "${gen[@]}" "LLVM_PROFILE_FILE=$raw/$f-%p-%m.profraw" "${prefix}_FIXED=0" \
    "${prefix}_SCHEDULES=${train[$f]}" "${prefix}_BASE_SEED=$TRAIN_BASE" \
    cargo nextest run --profile campaign -p "$package" --test "$binary" -E "test(=$test)" \
    --no-capture >>"$log" 2>&1 ||
    { echo "$f: the training schedules failed (see $log)" >&2; exit 1; }
done
"$profdata" merge -o "$profile.tmp" "$raw"/*.profraw >&2 || { echo "llvm-profdata merge failed" >&2; exit 1; }
mv "$profile.tmp" "$profile"
rm -rf "$raw"
echo "profile of this code: $profile" >&2
echo "$profile"
}
