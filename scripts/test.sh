#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: the Release build, the kernel tests
# cross-built for aarch64 and run under qemu-user, the same tests as the Release build under
# AddressSanitizer + UndefinedBehaviorSanitizer, and a short fuzz run of the GGUF reader.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)

scripts/setup.sh

echo "== Release build and tests"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$jobs"
(cd build/release && ctest -j"$jobs" --no-tests=error --output-on-failure --timeout 900)

echo "== aarch64 (cross-built, run under qemu-user)"
# The kernels and their tests (core, gguf, kernels) for the boards' CPUs: every op against its
# reference on NEON, SVE, SVE2 and SVE2_128 (128-bit SVE vectors), then on SVE_256 (256-bit).
cmake -S . -B build/aarch64 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLONE_KERNELS_ONLY=ON \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake >/dev/null
cmake --build build/aarch64 -j"$jobs"
(cd build/aarch64 && ctest -j"$jobs" --no-tests=error --output-on-failure --timeout 900)

echo "== ASan + UBSan build and tests"
# -O1 -g1 (line tables): what ASan's documentation suggests, and half the compile time of
# -O2 -g on the test files (server_test.cpp: 26 s against 53 s); reports keep file:line.
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLONE_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCLONE_BUILD_BENCH=OFF \
  -DCLONE_WITH_MPI=OFF >/dev/null  # Open MPI's own allocations would read as leaks; the Release build tests MPI
cmake --build build/asan -j"$jobs"
(cd build/asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest -j"$jobs" --no-tests=error --output-on-failure --timeout 1800 -LE slow \
    -E '^(Learned[.]JudgedCriteriaOnASmallWorkload|Nao[.]LearnsToRankReconstructAndImprove)$')
# (Those two are the longest under the sanitizers, 86 and 40 s, and the Release pass runs
# them: 24 simulated workloads, and a long NAO training. Their code runs instrumented in other
# tests: the learned controller, the MPC teacher and the oracle in the dvfs tests, the NAO
# model inside Tailor.SearchesResumesAndWritesTheBestModel.)

echo "== Fuzzing the GGUF reader (libFuzzer, seed corpus: the golden GGUF files)"
CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCLONE_BUILD_FUZZ=ON -DCLONE_BUILD_TESTS=OFF -DCLONE_BUILD_BENCH=OFF -DCLONE_WERROR=OFF >/dev/null
cmake --build build/fuzz -j"$jobs" --target fuzz_gguf
# Two fuzzers side by side (one per core; libFuzzer runs on one), each from the seed corpus
# with its own seed and its own copy, for half the time each.
secs=${CLONE_FUZZ_SECONDS:-60}
pids=()
for i in 1 2; do
  corpus=$(mktemp -d)
  cp "$root"/../shared/data/golden-gguf/*.gguf "$corpus"/
  (status=0
   build/fuzz/fuzz/fuzz_gguf -seed="$i" -max_total_time="$(((secs + 1) / 2))" -max_len=65536 \
     -rss_limit_mb=4096 -print_final_stats=1 "$corpus" > "$corpus.log" 2>&1 || status=$?
   tail -n 12 "$corpus.log"; rm -rf "$corpus" "$corpus.log"; exit $status) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done  # set -e: a fuzzer that found a crash fails the run
echo "fuzz: passed (no crash)"
