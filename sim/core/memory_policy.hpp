#pragma once
// How the process hands memory back: a simulation of a deep program writes ~70 MB of run state
// and timeline (4,096 layers) and frees it at the end. glibc returns freed memory at the top of
// its heap to the kernel once more than its trim threshold is free, and serves blocks above its
// mmap threshold with fresh mappings; both thresholds move with the allocation history, so
// whether the next simulation in the same process (a sweep's next point, a bench's next
// repetition) faults all of those pages in again depended on the order of unrelated frees:
// 11,000 page faults and ~20 ms per 4,096-layer run in one build, none in the next.

#include <cstddef>

namespace stepsim {

// Keep freed memory for reuse within the process (glibc: every block comes from the heap, none
// from a mapping of its own, and up to 1 GiB of free heap is kept). The CLI
// calls it first thing; the benches too, so that they measure what the CLI does. A no-op on
// other C libraries.
void keep_freed_memory();

// The opposite, for a command that runs no simulation but fills growing arrays, freeing each
// old copy as it grows (analyze's trace records): blocks above 128 KiB get their own mappings,
// returned to the kernel when freed, and free heap above 128 KiB is trimmed. Analyze of a 1 GB
// trace peaked at 205 MB resident with keep_freed_memory(), 131 MB with this (docs/limits.md).
void return_freed_memory();

// Asks the kernel to back [p, p + bytes) with transparent huge pages where it can (Linux with
// THP in `madvise` or `always` mode; its 2 MiB-aligned part only): for the simulator's largest
// arrays, which a deep step writes once each (tens of MB), so that they fault in 2 MiB at a
// time instead of 4 KiB. A no-op elsewhere and for less than 4 MiB.
void advise_huge_pages(const void* p, std::size_t bytes);

}  // namespace stepsim
