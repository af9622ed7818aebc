# Cross build for 64-bit Arm Linux (Jetson Orin's Cortex-A78AE and other aarch64 boards) with
# Debian's cross toolchain (g++-aarch64-linux-gnu) and the arm64 multiarch packages
# (libhwy-dev:arm64, libgtest-dev:arm64), all installed by scripts/setup.sh. Binaries run here
# under qemu-user, so ctest and gtest_discover_tests work unchanged:
#   cmake -S . -B build/aarch64 -G Ninja -DCLONE_KERNELS_ONLY=ON \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: the arm64 libraries and their CMake/pkg-config files live under
# /usr/lib/aarch64-linux-gnu, beside the host's; headers are shared in /usr/include.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config must read only the arm64 .pc files (never the host's /usr/lib/x86_64-linux-gnu).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# Test binaries (and gtest's test listing) run under qemu-user through qemu-aarch64.sh beside
# this file, which picks the emulated CPU. They load the arm64 multiarch libc (libc6:arm64,
# which libhwy1:arm64 pulls in) through its own /lib/ld-linux-aarch64.so.1. No
# -L /usr/aarch64-linux-gnu: that would pair the cross toolchain's ld.so (another Debian
# revision of glibc 2.36) with the multiarch libc.so, whose private layouts differ, and
# pthread_create then loops forever. Configuring fails early where qemu-user is missing.
find_program(CLONE_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/qemu-aarch64.sh)
