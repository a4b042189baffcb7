#!/usr/bin/env bash
# Builds every fuzz target (IDX, CIFAR-10, CSV, safetensors, checkpoint manifest, config JSON/TOML)
# with clang-14, libFuzzer, ASan and UBSan, then runs each for a bounded time from its checked-in
# seed corpus (fuzz/corpus/<target>/, never modified), and prints executions and crashes per
# target. Exit status 1 if anything crashed.
# Usage: fuzz/run.sh [seconds per target, default 60] [target...]   (env: CXX_FUZZ, BUILD_DIR, JOBS)
set -euo pipefail

seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(idx cifar csv safetensors checkpoint config)
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-fuzz}
cxx=${CXX_FUZZ:-clang++-14}
command -v "$cxx" >/dev/null || { echo "run.sh: $cxx not found (apt-get install clang-14 libclang-rt-14-dev libomp-14-dev)" >&2; exit 2; }
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

mkdir -p "$build"
cmake -S "$root/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 2; }
ninja -C "$build" -j"${JOBS:-1}" "${targets[@]/#/fuzz_}"

crashed=0
printf '\n%-12s %8s %12s %10s %8s\n' target seconds executions exec/s crashes
for target in "${targets[@]}"; do
  work="$build/run/$target"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  status=0
  # New inputs go to the first directory; the checked-in seeds are only read. The structured
  # formats get a dictionary of their tokens, to get past their syntax sooner.
  dict=()
  case $target in safetensors | checkpoint | config) dict=(-dict="$root/fuzz/dict/tokens.dict") ;; esac
  "$build/fuzz_$target" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" "${dict[@]}" \
    "$work/corpus" "$root/fuzz/corpus/$target" >"$work/log.txt" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log.txt" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log.txt" | tail -1)
  crashes=$(find "$work/artifacts" -type f | wc -l)
  if [[ $status -ne 0 && $crashes -eq 0 ]]; then crashes=1; fi  # died without leaving an input
  printf '%-12s %8s %12s %10s %8s\n' "$target" "$seconds" "${execs:-?}" "${rate:-?}" "$crashes"
  if [[ $crashes -ne 0 ]]; then
    crashed=1
    echo "  log: $work/log.txt; inputs: $work/artifacts/"
    grep -m5 -E 'ERROR|runtime error|SUMMARY' "$work/log.txt" | sed 's/^/  /' || true
  fi
done
exit $crashed
