#include "sim/core/memory_policy.hpp"

#include <cstdlib>  // defines __GLIBC__ on glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace stepsim {

void keep_freed_memory() {
#if defined(__GLIBC__)
  // Setting either threshold also stops glibc from moving them (mallopt(3)).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

void return_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 128 << 10);  // glibc's default, held fixed
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
#endif
}

}  // namespace stepsim
