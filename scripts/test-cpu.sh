#!/usr/bin/env bash
# CPU time per test: runs `cargo nextest run` (the arguments given, e.g. `--workspace` or
# `-p cordillera-cli --test lab_cli`) with every test binary under /usr/bin/time as the target
# runner, then prints the tests by CPU seconds (user + system, the test process and every
# process it started and waited for: daemons, fio, the command line), beside their wall time.
# The test command's wall time is the machine's two cores shared by three test slots: the
# tests that burn CPU are what lengthen it, not the ones that wait on clocks.
#
#   scripts/test-cpu.sh [NEXTEST ARGS…]      (default: --workspace)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 1; }
out=$(mktemp)
runner=$(mktemp)
trap 'rm -f "$out" "$runner"' EXIT
# nextest runs each test as BINARY NAME --exact …; the name is the first argument not starting
# with a dash.
cat >"$runner" <<'RUNNER'
#!/usr/bin/env bash
case " $* " in *" --exact "*) ;; *) exec "$@" ;; esac  # listing the tests: not timed
name=$1
for a in "${@:2}"; do case $a in -*) ;; *) name="$1 $a"; break ;; esac; done
exec /usr/bin/time -a -o "$CORDILLERA_TEST_CPU" -f "%U %S %e ${name##*/}" "$@"
RUNNER
chmod +x "$runner"
host=$(rustc -vV | sed -n 's/^host: //p')
var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$host")_RUNNER"
(($#)) || set -- --workspace
# A failed test is timed too; the exit status is nextest's.
rc=0
env "$var=$runner" CORDILLERA_TEST_CPU="$out" cargo nextest run "$@" || rc=$?
echo
echo "== CPU seconds per test (user + system, with the processes it waited for), wall seconds"
awk '{ cpu = $1 + $2; total += cpu; name = $4; for (i = 5; i <= NF; i++) name = name " " $i;
       printf "%9.1f %8.1f  %s\n", cpu, $3, name } END { printf "%9.1f CPU seconds in all\n", total > "/dev/stderr" }' "$out" |
  sort -rn | head -n "${TOP:-30}"
exit $rc
