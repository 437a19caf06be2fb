#include "sim/core/memory_policy.hpp"

#include <cstdlib>  // defines __GLIBC__ on glibc

#include <cstdint>

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace stepsim {

void keep_freed_memory() {
#if defined(__GLIBC__)
  // Setting either threshold also stops glibc from moving them (mallopt(3)).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Blocks above 32 MiB too: glibc would map each afresh and unmap it when freed, and the
  // kernel zeroes every page of a fresh mapping (a 4,096-layer step's arrays are ~200 MB: a
  // quarter of a repeated simulation's time was the kernel clearing pages).
  mallopt(M_MMAP_MAX, 0);
#endif
}

void return_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 128 << 10);  // glibc's default, held fixed
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
  mallopt(M_MMAP_MAX, 65536);  // glibc's default
#endif
}

void advise_huge_pages(const void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = 2 << 20;
  if (p == nullptr || bytes < 2 * kHuge) return;
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice only: an error changes nothing
#else
  (void)p, (void)bytes;
#endif
}

}  // namespace stepsim
