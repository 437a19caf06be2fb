#pragma once
// How the process hands memory back: a simulation of a deep program writes ~70 MB of run state
// and timeline (4,096 layers) and frees it at the end. glibc returns freed memory at the top of
// its heap to the kernel once more than its trim threshold is free, and serves blocks above its
// mmap threshold with fresh mappings; both thresholds move with the allocation history, so
// whether the next simulation in the same process (a sweep's next point, a bench's next
// repetition) faults all of those pages in again depended on the order of unrelated frees:
// 11,000 page faults and ~20 ms per 4,096-layer run in one build, none in the next.

namespace stepsim {

// Keep freed memory for reuse within the process (glibc: blocks up to 32 MiB, the largest
// mmap threshold it accepts, come from the heap, and up to 1 GiB of free heap is kept). The CLI
// calls it first thing; the benches too, so that they measure what the CLI does. A no-op on
// other C libraries.
void keep_freed_memory();

}  // namespace stepsim
