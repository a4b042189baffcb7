#!/usr/bin/env bash
# Installs a built tandem tree into a fresh prefix, then configures, builds and runs the
# out-of-tree consumer (tests/install/consumer) against that prefix alone.
# Usage: run_install_test.sh BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR
# Environment (set by tests/CMakeLists.txt): CMAKE, CMAKE_GENERATOR, CMAKE_MAKE_PROGRAM, CXX,
# BUILD_TYPE: the same tools and build type as the tandem build.
set -euo pipefail

build_dir=$1
consumer_src=$2
work=$3
cmake_bin=${CMAKE:-cmake}
prefix=$work/prefix
consumer_build=$work/consumer-build

rm -rf "$work"
mkdir -p "$work"

echo "== cmake --install $build_dir --prefix $prefix"
"$cmake_bin" --install "$build_dir" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"; exit 1; }
# lib/, lib64/ or lib/<multiarch>/, as GNUInstallDirs chose when the build was configured.
config=$(find "$prefix" -path '*/cmake/tandem/tandemConfig.cmake' | head -n 1)
[[ -n $config ]] || { echo "no cmake/tandem/tandemConfig.cmake under $prefix"; exit 1; }
config_dir=$(dirname "$config")
for f in "$config_dir/tandemConfigVersion.cmake" "$config_dir/tandemTargets.cmake" \
         "$prefix/include/tandem/tandem.h" "$prefix/bin/tandem"; do
  [[ -e $f ]] || { echo "missing after install: $f"; exit 1; }
done

echo "== configure consumer"
configure=("$cmake_bin" -S "$consumer_src" -B "$consumer_build" -G "${CMAKE_GENERATOR:-Ninja}"
           -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}"
           -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
[[ -n ${CMAKE_MAKE_PROGRAM:-} ]] && configure+=(-DCMAKE_MAKE_PROGRAM="$CMAKE_MAKE_PROGRAM")
[[ -n ${CXX:-} ]] && configure+=(-DCMAKE_CXX_COMPILER="$CXX")
"${configure[@]}"

# The package must come from the prefix, not from the build or source tree.
found=$(sed -n 's/^tandem_DIR:PATH=//p' "$consumer_build/CMakeCache.txt")
if [[ $(realpath "$found") != $(realpath "$config_dir") ]]; then
  echo "tandem_DIR is '$found', expected '$config_dir'"; exit 1
fi

echo "== build consumer"
"$cmake_bin" --build "$consumer_build" -j 1

echo "== run consumer"
"$consumer_build/consumer"
