#!/bin/sh
# The aarch64 cross build's test runner (CMAKE_CROSSCOMPILING_EMULATOR): runs an arm64 binary
# under qemu-user on qemu's "max" CPU (NEON, SVE, SVE2) with 128-bit SVE vectors, the length
# of Neoverse N2/V2/V3 (Grace, Jetson Thor), where Highway adds SVE2_128. The kernel tests
# then must find, and run on, all four targets (CLONE_TEST_TARGETS, see tests/kernels). A
# kernel test run limited to SVE_256 gets 256-bit vectors, the only length with that target.
# A QEMU_CPU set by the caller wins and leaves the targets alone. Longer vectors cost far more
# time under qemu 7.2 on x86 hosts (about 10x at 256 bits, measured), so 128 is the default.
if [ -z "${QEMU_CPU:-}" ]; then
  case ",${CLONE_TEST_TARGETS:-}," in
    *,SVE_256,*) QEMU_CPU="max,sve256=on" ;;
    *)
      QEMU_CPU="max,sve128=on"
      CLONE_TEST_TARGETS="${CLONE_TEST_TARGETS:-SVE2_128,SVE2,SVE,NEON}"
      export CLONE_TEST_TARGETS
      ;;
  esac
  export QEMU_CPU
fi
exec qemu-aarch64 "$@"
