#!/usr/bin/env bash
# Installs every Debian 12 package clone needs to build, test and plot.
# Each package is here on purpose:
#   cmake ninja-build g++ clang   build (clang: libFuzzer target for the GGUF reader)
#   libhwy-dev                    Highway: portable SIMD (AVX2/AVX-512/NEON/SVE) with dynamic dispatch
#   libsentencepiece-dev sentencepiece  tokenizer training and the reference tokenizer in tests
#   nlohmann-json3-dev            device profiles, traces, HTTP bodies
#   libcli11-dev                  command-line flags, declared once with defaults and help
#   libcpp-httplib-dev            the OpenAI-compatible HTTP server
#   libgtest-dev libgmock-dev     unit tests
#   libbenchmark-dev              micro-benchmarks of kernels and controllers
#   libfuzzer-14-dev              fuzzing the GGUF reader
#   python3-torch python3-numpy libopenblas0-pthread   independent reference implementations in tests
#   gnuplot-nox                   plots (loss curves, timelines, Pareto fronts)
#   zlib1g-dev                    reading the gzip-compressed dictionaries (GCIDE, FOLDOC) for corpora
#   g++-aarch64-linux-gnu         cross-building the kernels and their tests for aarch64 (Jetson)
#   libhwy-dev:arm64 libgtest-dev:arm64  arm64 Highway and GoogleTest for that build (multiarch;
#                                 libhwy1:arm64 brings libc6:arm64, whose loader runs the tests)
#   qemu-user                     running the aarch64 kernel tests (NEON, SVE, SVE2) on this machine
#   curl                          the server test drives `clone serve` as a user would
#   chromium                      the chat page's test loads it in headless Chromium (driven by the
#                                 puppeteer-core npm package, installed by the test)
#   libopenmpi-dev openmpi-bin    `mpirun -np N clone tailor`: candidate evaluations over processes
#                                 (the build and tests work without them; the test compares 2 ranks
#                                 against one process)
#   nodejs npm                    the server test's real client, the official `openai` npm package
#                                 (installed by the test into the build folder); skipped here
#                                 when a node and npm are already on PATH (e.g. from NodeSource)
set -euo pipefail
pkgs=(cmake ninja-build g++ clang libhwy-dev libsentencepiece-dev sentencepiece
      nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libgtest-dev libgmock-dev
      libbenchmark-dev libfuzzer-14-dev python3-torch python3-numpy libopenblas0-pthread
      gnuplot-nox zlib1g-dev g++-aarch64-linux-gnu libhwy-dev:arm64 libgtest-dev:arm64 qemu-user
      curl chromium libopenmpi-dev openmpi-bin)
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then pkgs+=(nodejs npm); fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# The :arm64 packages need the arm64 architecture (then an apt-get update, done below because
# they are missing).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
