// Target selection for tests and reports (see dispatch.h).
#include "kernels/dispatch.h"

#include <atomic>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "clone/core/error.h"
#include "clone/kernels/machine.h"
#include "hwy/highway.h"
#include "hwy/targets.h"

namespace cln::kernels::detail {

std::vector<int64_t> available_targets() {
  return hwy::SupportedAndGeneratedTargets();
}

void force_target(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
}

namespace {
// -1: ask CPUID; 0 / 1: forced by a test.
std::atomic<int> g_forced_plain{-1};

// AMD before Zen 5: vendor AuthenticAMD and family (base + extended) below 0x1A.
bool cpuid_says_amd_before_zen5() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  if (std::strcmp(vendor, "AuthenticAMD") != 0) return false;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  unsigned family = (eax >> 8) & 0xF;
  if (family == 0xF) family += (eax >> 20) & 0xFF;
  return family < 0x1A;
#else
  return false;
#endif
}
}  // namespace

}  // namespace cln::kernels::detail

namespace cln::kernels {
void force_simd_target(const std::string& name) {
  if (name.empty()) return detail::force_target(0);
  std::string names;
  for (int64_t t : detail::available_targets()) {
    if (name == hwy::TargetName(t)) return detail::force_target(t);
    names += std::string(names.empty() ? "" : ", ") + hwy::TargetName(t);
  }
  fail("SIMD target ", name, " is not available on this CPU in this build (available: ", names,
       ")");
}
}  // namespace cln::kernels

namespace cln::kernels::detail {

bool plain_streams() {
  const int forced = g_forced_plain.load(std::memory_order_relaxed);
  if (forced >= 0) return forced == 1;
  static const bool plain = cpuid_says_amd_before_zen5();
  return plain;
}

void force_plain_streams(bool plain) {
  g_forced_plain.store(plain ? 1 : 0, std::memory_order_relaxed);
}

void force_plain_streams_reset() {
  g_forced_plain.store(-1, std::memory_order_relaxed);
}

}  // namespace cln::kernels::detail
