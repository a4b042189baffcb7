#!/usr/bin/env bash
# Runs `tandem` on every hostile file of cases.tsv (written by make_hostile.py) and checks that each
# fails as it should: exit status 2, exactly one line on stderr, containing the file's name and the
# field; valid baselines exit 0. Memory is bounded: 1 GiB of address space beyond the binary and
# its libraries (prlimit), or, under AddressSanitizer (which reserves terabytes of address space),
# no allocation over 512 MiB.
# Usage: run_hostile.sh TANDEM_BINARY WORK_DIR [--sanitized]   Prints one line per case.
set -uo pipefail

tandem=$1
work=$2
sanitized=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"

# 1 GiB beyond the address space the binary and the libraries it loads take at start (with the
# CUDA kernels built, cuBLAS alone maps about 600 MiB of code, none of it memory in use).
mapped=$( (echo "$tandem"; ldd "$tandem" | awk '$2 == "=>" && $3 ~ /^\// {print $3}') |
  xargs -r stat -L -c %s | awk '{s += $1} END {print s + 0}')
limit=(prlimit --as=$(((1 << 30) + mapped)))
if [[ $sanitized == --sanitized ]]; then
  limit=()
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_allocation_size_mb=512:allocator_may_return_null=1"
fi
export OMP_NUM_THREADS=1

passed=0
failed=0
while IFS=$'\t' read -r name status command needles; do
  [[ $name == \#* || -z $name ]] && continue
  dir="$work/$name"
  mkdir -p "$dir"
  command=${command//\{case\}/$here/files/$name}
  command=${command//\{work\}/$dir}
  read -ra args <<<"$command"
  "${limit[@]}" "$tandem" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr" </dev/null
  got=$?
  problem=""
  lines=$(wc -l <"$dir/stderr")
  error=$(head -c 400 "$dir/stderr" | head -1)
  if [[ $got -ne $status ]]; then
    problem="exit status $got, expected $status"
  elif [[ $status -eq 2 && ( $lines -ne 1 || $(wc -c <"$dir/stderr") -gt 2000 ) ]]; then
    problem="$lines lines on stderr, expected one"
  elif [[ $status -eq 2 ]]; then
    IFS='|' read -ra parts <<<"$needles"
    for part in "${parts[@]}"; do
      [[ $error == *"$part"* ]] || problem="${problem:+$problem; }no '$part' in the error"
    done
  fi
  if [[ -n $problem ]]; then
    failed=$((failed + 1))
    echo "FAIL $name: $problem"
    sed 's/^/    stderr: /' "$dir/stderr" | head -c 1500
  else
    passed=$((passed + 1))
    echo "ok   $name: ${error:-(exit 0)}"
  fi
done <"$here/cases.tsv"
echo "hostile files: $passed passed, $failed failed"
((failed == 0))
