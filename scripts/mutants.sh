#!/usr/bin/env bash
# Planted bugs: each named mutant removes one safeguard of a core, and the seeded-schedule
# family that guards it must then fail at its test's own size (its regression seeds, fixed
# seeds and fresh ones for the test's time budget; the test command gives each family about two
# thirds of that, scripts/test.sh). Prints a table: mutant, family,
# schedules failed of run, caught or MISSED. Exit status 1 if any mutant was missed. A mutant
# that names a package in "unit" also runs that package's unit tests (--lib), reported beside
# the schedules; it counts as caught if either fails (for safeguards whose window the family's
# fresh schedules reach too rarely at the test's size). With "tests" it runs that package's
# integration test binary of that name instead of its unit tests.
#
#   scripts/mutants.sh [--seconds S] [MUTANT…]     (default: every mutant, the family budgets)
#   scripts/mutants.sh --list
#
# The mutants are applied one at a time to a scratch worktree of HEAD (target/mutants/wt), with
# a build directory of its own (target/mutants/target); the checkout is never touched.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)

seconds=""
wanted=()
list=false
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --list) list=true; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) wanted+=("$1"); shift ;;
  esac
done

# family: prefix, package, test binary, test (as scripts/campaign.sh)
declare -A family=(
  [offload]="OFFLOAD cordillera-offload simulation offloaded_writes_survive_crashes_and_are_reclaimed"
  [volume-path]="VOLUME_PATH cordillera-offload simulation the_request_path_with_a_cache_serves_nothing_stale"
  [sierra-short]="SIERRA_SHORT cordillera-gears simulation sierra_keeps_every_acknowledged_write_in_short_schedules"
  [warm]="WARM cordillera-warmup cache_simulation the_cache_never_holds_or_preloads_stale_contents"
  [restripe]="RESTRIPE cordillera-striping restripe_simulation no_acknowledged_write_is_lost_and_every_restripe_finishes_across_crashes"
  [members]="MEMBERS cordillera-striping member_array_simulation member_arrays_keep_every_acknowledged_write_through_member_loss_and_crashes"
)

# The mutants: name, family, file, and the exact text replaced (first occurrence), as JSON
# lines read by the patcher below. Each text must occur in the file, or the mutant is
# reported as not applying (the code moved: update this list).
mutants=$(cat <<'EOF'
{"name": "reclaim-over-base-write", "family": "offload", "unit": "cordillera-offload", "file": "crates/offload/src/client/reclaim.rs", "old": "if self.up_write_in_flight(plo, phi) {", "new": "if false && self.up_write_in_flight(plo, phi) {", "what": "reclaim a range while an older upper-layer base write to it is in flight"}
{"name": "offload-over-offload-in-flight", "family": "offload", "file": "crates/offload/src/client/upward.rs", "old": "if op.version > version {", "new": "if true || op.version > version {", "also": [{"file": "crates/offload/src/client/stale.rs", "old": "op.version < l.version", "new": "false && op.version < l.version"}], "what": "an older off-loaded write still in flight keeps the bytes a newer one took, and the newer one's copies may be deleted meanwhile (both safeguards: supersede, and invariant 3's wait for older writes in flight)"}
{"name": "ack-short", "family": "offload", "file": "crates/offload/src/client/copies.rs", "old": "if (op.succeeded.count_ones() as usize) < self.config.n_way {", "new": "if false {", "what": "an off-loaded write is acknowledged with fewer than N copies, the superblock not marked degraded"}
{"name": "no-vulnerable-reclaim", "family": "offload", "file": "crates/offload/src/client/reclaim.rs", "old": "if let Some((lo, hi)) = self.vulnerable.pop_front() {", "new": "if let Some((lo, hi)) = self.vulnerable.pop_front().filter(|_| false) {", "what": "data left with fewer than N copies by a failed store is not reclaimed first (only under the policy)"}
{"name": "deletes-whole-ranges", "family": "offload", "unit": "cordillera-offload", "file": "crates/offload/src/client/stale.rs", "old": "                out.push((lo, hi, version));\n                continue;\n            }", "new": "                out.push((lo, hi, version));\n            }\n            if true {\n                continue;\n            }", "what": "a stale range's delete goes only as a whole (two stores may wait on each other's deletes)"}
{"name": "delete-before-degraded-mark", "family": "offload", "unit": "cordillera-offload", "file": "crates/offload/src/client/stale.rs", "old": "if !self.degraded || self.degraded_is_durable() {", "new": "if true {", "what": "a failed store's copy of data left with fewer than N counted copies is deleted (or recorded deleted) before the degraded mark is durable"}
{"name": "skip-deletion-record", "family": "offload", "file": "crates/offload/src/client/stale.rs", "old": "self.record_deletions(s);", "new": "let _ = s;", "what": "no deletion records for stale copies on failed stores"}
{"name": "read-before-seal", "family": "offload", "unit": "cordillera-offload", "file": "crates/offload/src/client/stores.rs", "old": "self.stores[store].unsealed.extend(unsealed);", "new": "let _ = unsealed;", "what": "a read of a range that a copy of unknown outcome may still hide on its store is sent there before a barrier"}
{"name": "void-records-applied", "family": "offload", "unit": "cordillera-offload", "file": "crates/offload/src/client/recovery.rs", "old": "if e.version <= void_up_to[holder] {", "new": "if false && e.version <= void_up_to[holder] {", "what": "a recovery applies deletion records held only by a store that an earlier recovery went on without"}
{"name": "short-record-taken-as-durable", "family": "volume-path", "unit": "cordillera-offload", "file": "crates/offload/src/client/recovery.rs", "old": "let durable = holders_of[&(slot, e.version)].count_ones() >= n_way;", "new": "let durable = holders_of[&(slot, e.version)].count_ones() >= 1;", "what": "a recovery takes a deletion record found on fewer than N stores (perhaps never durable) as durable, and writes over the copy it names to the base volume"}
{"name": "store-fencing", "family": "sierra-short", "file": "crates/vstore/src/store/requests.rs", "old": "if generation < self.fence(client) {", "new": "if false && generation < self.fence(client) {", "what": "a logger takes a deposed primary's late log writes and deletes"}
{"name": "fence-on-newer-generation", "family": "sierra-short", "unit": "cordillera-vstore", "tests": "recovery", "file": "crates/vstore/src/store/requests.rs", "old": "                self.raise_fence(client, generation);\n", "new": "                let _ = (client, generation);\n", "what": "a newer generation's write or delete does not fence the older ones (only its metadata request does, which a store may never see)"}
{"name": "late-copy-over-newer", "family": "sierra-short", "unit": "cordillera-offload", "file": "crates/offload/src/client/upward.rs", "old": "if op.superseded.is_empty() {\n            self.copy_locally(", "new": "if true {\n            self.copy_locally(", "what": "an off-loaded write that entered the range map late (held for the degraded mark) is copied to the local replica over a newer write's bytes"}
{"name": "secondary-epoch-fencing", "family": "sierra-short", "file": "crates/gears/src/server/disk.rs", "old": "if epoch < seen", "new": "if false", "what": "secondaries apply a deposed primary's replicated writes"}
{"name": "ack-before-last-replica", "family": "sierra-short", "file": "crates/gears/src/server/base.rs", "old": ".filter(|(_, w)| w.local_done && (w.waiting == 0 || w.failed))", "new": ".filter(|(_, w)| w.local_done)", "also": [{"file": "crates/gears/src/server/base.rs", "old": "                w.local_done && (w.waiting == 0 || w.failed),\n", "new": "                true,\n"}], "what": "a primary acknowledges once its own copy is durable"}
{"name": "write-over-write-in-flight", "family": "sierra-short", "file": "crates/gears/src/server/base.rs", "old": ".any(|w| over(w.offset_bytes, w.offset_bytes + w.data.len() as u64))", "new": ".any(|w| false && over(w.offset_bytes, w.offset_bytes + w.data.len() as u64))", "what": "a primary sends a base write over one still in flight to the replicas at once (they may apply the two in opposite orders)"}
{"name": "ack-on-any-answer", "family": "sierra-short", "unit": "cordillera-gears", "file": "crates/gears/src/client.rs", "old": ".all(|(&id, &epoch)| (epoch, id) < newest)", "new": ".all(|(&id, &epoch)| true || (epoch, id) < newest)", "what": "a client acknowledges a write on any attempt's success, while a later attempt under a newer view may still land"}
{"name": "writes-out-of-order", "family": "sierra-short", "unit": "cordillera-gears", "file": "crates/gears/src/client/pieces.rs", "old": "if self.held_back(op) {", "new": "if false && self.held_back(op) {", "what": "a client sends a write over bytes an unfinished earlier write of its own covers"}
{"name": "stale-epoch-attempt", "family": "sierra-short", "unit": "cordillera-gears", "file": "crates/gears/src/server/primary.rs", "old": "sent_under.filter(|&e| e != p.view.epoch)", "new": "sent_under.filter(|&e| false && e != p.view.epoch)", "what": "a primary takes a write attempt sent under another epoch's view"}
{"name": "older-attempt-taken", "family": "sierra-short", "unit": "cordillera-gears", "file": "crates/gears/src/server/primary.rs", "old": "if is_write && p.last_write.get(&from).is_some_and(|&last| id <= last) {", "new": "if false && is_write && p.last_write.get(&from).is_some_and(|&last| id <= last) {", "what": "a primary takes a write attempt older than one it took from the same client (overtaken in the network)"}
{"name": "write-attempts-unguarded", "family": "sierra-short", "unit": "cordillera-gears", "file": "crates/gears/src/client.rs", "old": ".all(|(&id, &epoch)| (epoch, id) < newest)", "new": ".all(|(&id, &epoch)| true || (epoch, id) < newest)", "also": [{"file": "crates/gears/src/client/pieces.rs", "old": "if self.held_back(op) {", "new": "if false && self.held_back(op) {"}, {"file": "crates/gears/src/server/primary.rs", "old": "sent_under.filter(|&e| e != p.view.epoch)", "new": "sent_under.filter(|&e| false && e != p.view.epoch)"}, {"file": "crates/gears/src/server/primary.rs", "old": "if is_write && p.last_write.get(&from).is_some_and(|&last| id <= last) {", "new": "if false && is_write && p.last_write.get(&from).is_some_and(|&last| id <= last) {"}], "what": "the four write-attempt layers above removed together: a write settled on any answer, sent over an unfinished one, and its stale or overtaken attempts taken"}
{"name": "sent-write-given-up", "family": "sierra-short", "unit": "cordillera-gears", "file": "crates/gears/src/client/pieces.rs", "old": "if p.attempts > self.config.retries_max && !(is_write && p.first.is_some()) {", "new": "if p.attempts > self.config.retries_max {", "what": "a client gives up a write after its retries though an attempt may have reached some replicas and not others"}
{"name": "short-for-room-unavailable", "family": "sierra-short", "unit": "cordillera-gears", "file": "crates/gears/src/server/primary.rs", "old": "let e = if short_for_room {", "new": "let e = if false && short_for_room {", "what": "a log write short of copies because one logger of three is full is answered unavailable, sent again for ever, and never names the group for a wake"}
{"name": "cache-tickets", "family": "warm", "file": "crates/warmup/src/warm/mod.rs", "old": "tickets: true,", "new": "tickets: false,", "what": "a slow read fills the cache over a newer write"}
{"name": "cache-clean-close-only", "family": "warm", "file": "crates/warmup/src/warm/mod.rs", "old": "clean_close_only: true,", "new": "clean_close_only: false,", "what": "logged data pre-loaded after a crash"}
{"name": "cache-changes-without-data", "family": "warm", "file": "crates/warmup/src/warm/mod.rs", "old": "changes_without_data: true,", "new": "changes_without_data: false,", "what": "a partial or failed write leaves older logged data newest"}
{"name": "cache-concurrent-writes", "family": "volume-path", "file": "crates/warmup/src/warm/mod.rs", "old": "concurrent_writes: true,", "new": "concurrent_writes: false,", "what": "the cache keeps whichever of two concurrent writes answered last"}
{"name": "cache-ordered-log-writes", "family": "warm", "file": "crates/warmup/src/warm/mod.rs", "old": "ordered_log_writes: true,", "new": "ordered_log_writes: false,", "what": "a wrapped warm-up log chunk is written over an older one still in flight"}
{"name": "restripe-writes-before", "family": "restripe", "file": "crates/striping/src/restripe.rs", "old": "let busy = self.before_writes > 0", "new": "let busy = false", "what": "a batch copied while writes admitted before the restripe are in flight"}
{"name": "members-no-barrier", "family": "members", "file": "crates/striping/src/members/array/mod.rs", "old": "self.barrier_wanted = true;", "new": "", "what": "a member's failure is written before the row writes issued with it are synced"}
{"name": "members-no-journal", "family": "members", "file": "crates/striping/src/members/array/write.rs", "old": "w.phase = if w.entry.is_some() {", "new": "w.phase = if false {", "what": "degraded RAID-5 writes without the journal (the write hole with a member lost)"}
{"name": "members-no-dirty-intent", "family": "members", "file": "crates/striping/src/members/array/write.rs", "old": "if !self.durable.dirty[region] || pending_clears {", "new": "if false {", "what": "a row written before its region is durably dirty"}
{"name": "members-resync-unsynced", "family": "members", "file": "crates/striping/src/members/array/rows.rs", "old": "if s.finishing == 0 {", "new": "if false {", "what": "a resync's repairs served before they are synced"}
{"name": "members-flush-over-failed", "family": "members", "file": "crates/striping/src/members/array/steps.rs", "old": "if self.meta.members[m].state == MemberState::Failed {\n                        op.failed.push(m);", "new": "if self.meta.members[m].state == MemberState::Failed {", "what": "a flush acknowledged over a failed member whose failure is not yet durable"}
{"name": "members-rebuild-unrecorded", "family": "members", "file": "crates/striping/src/members/array/rows.rs", "old": "if self.durable.members[member].id != self.meta.members[member].id", "new": "if false", "what": "a replacement rebuilt before the labels know it"}
{"name": "members-no-shadow", "family": "members", "file": "crates/striping/src/members/array/write.rs", "old": "lost.extend(w.shadow);", "new": "w.shadow = None;", "what": "rows rebuilt but not durably are written without the journal"}
EOF
)

if $list; then
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    print("%-32s %-13s %s" % (m["name"], m["family"], m["what"]))' <<<"$mutants"
  exit 0
fi

wt=target/mutants/wt
export CARGO_TARGET_DIR=$root/target/mutants/target
mkdir -p target/mutants
git worktree remove --force "$wt" >/dev/null 2>&1
git worktree add --detach "$wt" HEAD >/dev/null || { echo "cannot make a worktree at $wt" >&2; exit 2; }
trap 'git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1' EXIT

rows=()
missed=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  read -r name fam unit tests < <(python3 -c 'import json,sys; m=json.loads(sys.argv[1]); print(m["name"], m["family"], m.get("unit", ""), m.get("tests", ""))' "$line")
  if ((${#wanted[@]})) && ! printf '%s\n' "${wanted[@]}" | grep -qx -- "$name"; then
    continue
  fi
  git -C "$wt" checkout -q -- .
  if ! python3 - "$wt" "$line" <<'PY'
import json, sys
wt, m = sys.argv[1], json.loads(sys.argv[2])
# A mutant may plant several edits at once ("also"): safeguards that cover for one another.
for e in [m] + m.get("also", []):
    path = f"{wt}/{e['file']}"
    text = open(path).read()
    # Exactly one place: a string found twice plants its bug in whichever comes first.
    if text.count(e["old"]) != 1:
        sys.exit(1)
    open(path, "w").write(text.replace(e["old"], e["new"], 1))
PY
  then
    rows+=("$(printf '%-32s %-13s %s' "$name" "$fam" "DOES NOT APPLY (the code moved, or its text is not unique: update scripts/mutants.sh)")")
    missed=$((missed + 1))
    continue
  fi
  read -r prefix package binary test <<<"${family[$fam]}"
  env=()
  [ -n "$seconds" ] && env+=("${prefix}_SECONDS=$seconds")
  log=$root/target/mutants/$name.log
  echo "== $(date +%T) $name ($fam): $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["what"])' "$line")"
  (cd "$wt" && env "${env[@]}" cargo nextest run --profile campaign -p "$package" --test "$binary" \
    -E "test(=$test)" --no-capture >"$log" 2>&1)
  summary=$(grep -h '^schedule summary:' "$log" | tail -n 1)
  runs=$(sed -n 's/.* schedules=\([0-9]*\).*/\1/p' <<<"$summary")
  failed=$(sed -n 's/.* failed=\([0-9]*\).*/\1/p' <<<"$summary")
  units=""
  unit_failed=0
  if [ -n "$unit" ]; then
    ulog=$root/target/mutants/$name.unit.log
    which=(--lib)
    [ -n "$tests" ] && which=(--test "$tests")
    (cd "$wt" && cargo nextest run --no-fail-fast -p "$unit" "${which[@]}" >"$ulog" 2>&1)
    line=$(grep -h 'Summary \[' "$ulog" | tail -n 1)
    unit_failed=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
    unit_run=$(sed -n 's/.* \([0-9]*\) tests\{0,1\} run.*/\1/p' <<<"$line")
    if [ -z "$unit_run" ]; then
      units="; $unit ${tests:-unit} tests did not run (see $ulog)"
      unit_failed=0
    else
      units="; $unit ${tests:-unit} tests: ${unit_failed:-0} of $unit_run failed"
    fi
  fi
  if [ -z "$summary" ]; then
    verdict="no summary (did not build or run: see $log)"
    missed=$((missed + 1))
  elif [ "${failed:-0}" -gt 0 ] || [ "${unit_failed:-0}" -gt 0 ]; then
    verdict="caught: $failed of $runs schedules failed$units"
  else
    verdict="MISSED: 0 of $runs schedules failed$units"
    missed=$((missed + 1))
  fi
  rows+=("$(printf '%-32s %-13s %s' "$name" "$fam" "$verdict")")
  echo "   $verdict"
done <<<"$mutants"

echo
echo "== mutants"
printf '%-32s %-13s %s\n' mutant family result
printf '%s\n' "${rows[@]}"
[ "$missed" = 0 ]
