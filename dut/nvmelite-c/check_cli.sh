#!/usr/bin/env bash
# End-to-end checks of the nvmelite-c command line against the published expected outputs
# (tests/data/nvmelite/expected: 2,520 runs.csv rows with their log hashes, four logs, one
# schedule record) and its error handling. Usage: check_cli.sh NVMELITE_C DATA_DIR WORK_DIR
set -euo pipefail
bin=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fails=0 checks=0
ok() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*" >&2; }

# The published matrix: 4 policies x 7 bounds x 3 faults x seeds 0-29, window inf.
"$bin" matrix --out "$work/m" --seeds 0-29 "$data/seed_001.json"
if gzip -dc "$data/expected/runs.csv.gz" | cmp -s - "$work/m/runs.csv"; then ok; else fail "runs.csv differs from expected/runs.csv.gz"; fi
for f in "$data"/expected/logs/*.log; do
  if cmp -s "$f" "$work/m/logs/$(basename "$f")"; then ok; else fail "log $(basename "$f")"; fi
done
[ "$(ls "$work/m/logs" | wc -l)" -eq 2520 ] && ok || fail "expected 2520 logs"

# The reference schedule record, byte for byte (no trailing newline).
"$bin" run "$data/seed_001.json" --policy random --bound 3 --fault timeout --seed 4 \
  --reference-schedule "$work/rec.json" --schedule-out "$work/r.sched" > "$work/r.log"
cmp -s "$work/rec.json" "$data/expected/schedules/seed_001_RANDOM_3_4_TIMEOUT.json" && ok || fail "schedule record"
cmp -s "$work/r.log" "$data/expected/logs/seed_001_RANDOM_3_4_TIMEOUT.log" && ok || fail "run log"

# Single-run DUT mode: WORKLOAD SCHEDULE -> the log on stdout, exit 0; metrics row on request.
QOSLAB_DUT_METRICS="$work/row.csv" "$bin" "$data/seed_001.json" "$work/r.sched" > "$work/replayed.log"
cmp -s "$work/replayed.log" "$data/expected/logs/seed_001_RANDOM_3_4_TIMEOUT.log" && ok || fail "single-run replay"
expected_row=$(gzip -dc "$data/expected/runs.csv.gz" | grep '^seed_001_RANDOM_3_4_TIMEOUT,')
[ "$(cat "$work/row.csv")" = "$expected_row" ] && ok || fail "single-run metrics row"

# Batch mode: two requests, two framed responses.
sched_len=$(wc -c < "$work/r.sched")
{ printf 'run %d %s\n' "$sched_len" "$data/seed_001.json"; cat "$work/r.sched";
  printf 'run 3 %s\nxyz' "$data/seed_001.json"; } | "$bin" --batch > "$work/batch.out"
log_len=$(wc -c < "$data/expected/logs/seed_001_RANDOM_3_4_TIMEOUT.log")
[ "$(head -n1 "$work/batch.out")" = "ok $log_len ${#expected_row}" ] && ok || fail "batch header: $(head -n1 "$work/batch.out")"
grep -q '^error ' "$work/batch.out" && ok || fail "batch error response"

# Bad input: exit 2 and exactly one line on stderr naming the file and line.
expect_bad() {
  local what=$1 pattern=$2; shift 2
  local rc=0
  "$@" > "$work/out" 2> "$work/err" || rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l < "$work/err")" -eq 1 ] && grep -q -- "$pattern" "$work/err" && [ ! -s "$work/out" ]; then
    ok
  else
    fail "$what: rc=$rc stderr=$(cat "$work/err")"
  fi
}
printf '{"seed_id": "x",\n "commands": [{"type": "READ", "lba": 1.0, "len": 1}]}' > "$work/float.json"
expect_bad "float lba" "float.json:2: .*lba.*float" "$bin" run "$work/float.json" --policy FIFO --bound 0 --seed 0
expect_bad "missing workload" "nope.json" "$bin" run "$work/nope.json" --policy FIFO --bound 0 --seed 0
expect_bad "policy" "--policy" "$bin" run "$data/seed_001.json" --policy LIFO --bound 0 --seed 0
expect_bad "bound" "--bound" "$bin" run "$data/seed_001.json" --policy FIFO --bound 4294967296 --seed 0
expect_bad "seed range" "--seeds" "$bin" matrix --out "$work/never" --seeds 5-2 "$data/seed_001.json"
[ ! -e "$work/never" ] && ok || fail "reversed seed range created output"
head -n 12 "$work/r.sched" > "$work/short.sched"
expect_bad "truncated schedule" "short.sched:13: " "$bin" "$data/seed_001.json" "$work/short.sched"
sed 's/^policy=RANDOM$/policy=FIFO/' "$work/r.sched" > "$work/fifo.sched"
expect_bad "draw on FIFO" "fifo.sched:.*takes no draw" "$bin" "$data/seed_001.json" "$work/fifo.sched"
printf '{"seed_id": "other", "commands": []}' > "$work/other.json"
expect_bad "other workload" "seed_id" "$bin" "$work/other.json" "$work/r.sched"

echo "check_cli: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
