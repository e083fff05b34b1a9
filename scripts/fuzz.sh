#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz/ (docs/fuzzing.md), built by scripts/sanitize_build.sh
# in build-sanitize/ (clang, ASan + UBSan, CPU only).
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   fuzz each target (default 600 s, all)
#   bash scripts/fuzz.sh --ci                               what CI runs: 20 s per target
#   bash scripts/fuzz.sh --regress [TARGET...]              only the corpus files, once each
#
# Every mode first runs each committed corpus file (tests/fuzz/corpus/<target>/) once, as a
# regression run: one process per file, so every failing file is named. Then each target
# fuzzes a copy of the passing files in build-sanitize/fuzz/<target>/corpus (kept between runs,
# so a long run continues where the last one stopped; the committed folder is never written;
# regress_* files and failing files are left out: see regress()). Findings go to
# build-sanitize/fuzz/<target>/ as crash-*, oom-*, timeout-*; to keep one as a regression case,
# copy it into tests/fuzz/corpus/<target>/ as found_<what>. At the end a table: target, corpus
# files failing, execs, coverage (libFuzzer's final cov: and ft:), result.
# Exits non-zero when any target found something or any corpus file fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ALL=(fuzz_config fuzz_safetensors fuzz_npy fuzz_npz fuzz_csv fuzz_expression)
# Longest mutated input per target: room for the format's structures, small enough to stay fast.
# (Corpus files longer than this are still run whole by the regression pass.)
declare -A MAX_LEN=([fuzz_config]=16384 [fuzz_safetensors]=16384 [fuzz_npy]=8192 [fuzz_npz]=65536
                    [fuzz_csv]=8192 [fuzz_expression]=2048)
# The same limits for the regression pass and for fuzzing: 2 GiB of memory, 10 s per input.
LIMITS=(-rss_limit_mb=2048 -timeout=10)

mode=fuzz seconds=600
case "${1:-}" in
  --ci) mode=ci seconds=20; shift ;;
  --regress) mode=regress; shift ;;
  ''|*[!0-9]*) ;;
  *) seconds=$1; shift ;;
esac
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${ALL[@]}")
for t in "${targets[@]}"; do
  [ -n "${MAX_LEN[$t]:-}" ] || { echo "fuzz: unknown target '$t' (targets: ${ALL[*]})" >&2; exit 1; }
done

bash scripts/sanitize_build.sh "${targets[@]}"
BIN=build-sanitize/tests/fuzz
WORK=build-sanitize/fuzz
# UBSan's report is enough to find the line; a symbolized stack makes it readable.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

failed=()

# Runs every committed corpus file of target $1 once and copies the passing ones into its work
# corpus (a failing one is removed from it: libFuzzer would stop on it before fuzzing). Prints
# each failing file with what went wrong; sets bad_files[$1].
declare -A bad_files
regress() {
  local t=$1 f log rc n=0 bad=0
  mkdir -p "$WORK/$t/corpus"
  log="$WORK/$t/regress.log"
  for f in tests/fuzz/corpus/"$t"/*; do
    n=$((n + 1))
    rc=0
    "$BIN/$t" "${LIMITS[@]}" "$f" >"$log" 2>&1 || rc=$?
    if [ $rc -eq 0 ]; then
      # regress_* inputs are pathological on purpose (deep nesting, bombs): as seeds they would
      # take most of the fuzzing time, so only the other files seed it.
      case "$(basename "$f")" in regress_*) ;; *) cp "$f" "$WORK/$t/corpus/" ;; esac
    else
      bad=$((bad + 1))
      rm -f "$WORK/$t/corpus/$(basename "$f")"
      echo "fuzz: $t: $(basename "$f"): FAILS: $(finding "$log")"
      cp "$log" "$WORK/$t/regress_$(basename "$f").log"
    fi
  done
  echo "fuzz: $t: $n corpus files run, $bad failed"
  bad_files[$t]="$bad of $n"
  [ $bad -eq 0 ] || failed+=("$t corpus ($bad files)")
}

# The first line of a libFuzzer/sanitizer log that says what went wrong.
finding() {
  grep -m1 -oE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [^(]*|runtime error: .*|Test unit written to .*|eval .* != eval_grad .*|terminate called .*|what\(\): .*" "$1" ||
    tail -n 1 "$1"
}

echo "fuzz: regression run: every file in tests/fuzz/corpus/<target>/ once"
for t in "${targets[@]}"; do regress "$t"; done

rows=()
if [ "$mode" != regress ]; then
  for t in "${targets[@]}"; do
    dir="$WORK/$t"
    dict=()
    [ -f "tests/fuzz/$t.dict" ] && dict=("-dict=tests/fuzz/$t.dict")
    echo "fuzz: $t for $seconds s (log: $dir/fuzz.log)"
    rc=0
    "$BIN/$t" "${LIMITS[@]}" -max_len="${MAX_LEN[$t]}" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$dir/" "${dict[@]}" "$dir/corpus" >"$dir/fuzz.log" 2>&1 || rc=$?
    execs=$(grep -oE "stat::number_of_executed_units: [0-9]+" "$dir/fuzz.log" | grep -oE "[0-9]+$" || echo "?")
    cov=$(grep -oE "cov: [0-9]+ ft: [0-9]+" "$dir/fuzz.log" | tail -n 1 || true)
    if [ $rc -eq 0 ]; then
      result=ok
    else
      result="FINDING: $(finding "$dir/fuzz.log")"
      failed+=("$t")
    fi
    rows+=("$(printf '%-18s %10s %12s %8s %8s   %s' "$t" "${bad_files[$t]}" "$execs" \
      "$(echo "$cov" | awk '{print $2}')" "$(echo "$cov" | awk '{print $4}')" "$result")")
  done
  echo
  printf '%-18s %10s %12s %8s %8s   %s\n' target "bad files" execs cov ft result
  printf '%s\n' "${rows[@]}"
fi

echo
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: nothing found"
