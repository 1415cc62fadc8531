# The seeded simulation families, read by scripts/campaign.sh, scripts/schedule-hashes.sh and
# scripts/pgo-profile.sh.
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

# How scripts/campaign.sh and scripts/schedule-hashes.sh build a family's test: the test profile
# as it is (opt-level 2, debug assertions on: the same checks as the test command) with
# whole-program link-time optimization and one codegen unit, which inline the simulator and the
# cores into the test's loop across crates. The same schedules, event for event (each family's
# hash file is identical under both builds), up to about 30 % more of them per second
# (docs/BENCHMARKS.md, "Link-time optimization for the campaigns"). It builds in a target
# directory of its own, so the test command's build is left as it is; the first build takes
# about 3 minutes.
campaign_flags=(
  CARGO_PROFILE_TEST_LTO=fat
  CARGO_PROFILE_TEST_CODEGEN_UNITS=1
  CARGO_INCREMENTAL=0
)
campaign_build=("CARGO_TARGET_DIR=$PWD/target/campaign-build" "${campaign_flags[@]}")

# The same build guided by a profile of the families' own schedules, in a target directory of
# its own: LLVM lays out and inlines the hot paths by the counts. The same schedules event for
# event, about a fifth more of them per second (docs/BENCHMARKS.md, "Profile-guided optimization
# for the campaigns"). `pgo_build` makes or reuses the profile of the code as it is
# (scripts/pgo-profile.sh) and sets `pgo_build_env` and `pgo_profile`; it fails if there is
# none. The profile's path names its code, so a new profile rebuilds everything.
pgo_build() {
  pgo_profile=$(scripts/pgo-profile.sh | tail -n 1) && [ -s "$pgo_profile" ] || return 1
  pgo_build_env=(
    "CARGO_TARGET_DIR=$PWD/target/campaign-pgo-build" "${campaign_flags[@]}"
    "RUSTFLAGS=-Cprofile-use=$pgo_profile"
  )
}
