// The emulated CUDA runtime / cuBLASLt / NCCL entry points (see fake_cuda.hpp). Declarations come
// from the real headers, so every definition here is checked against the real signature.
#include "tests/emulated/fake_cuda.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "kernels/gpu/membw_kernels.hpp"
#include "live/live_spin.hpp"
#include "kernels/gpu/raii.hpp"

namespace stepsim::fake_cuda {
namespace {

struct StreamState {
  double clock_ns = 0;
};
struct EventState {
  bool timing = true;
  bool recorded = false;
  double time_ns = 0;
};
struct LayoutState {
  cudaDataType_t type = CUDA_R_32F;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
  int batch = 1;
  std::int64_t stride = 0;
};
struct DescState {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
};
struct Allocation {
  std::uint64_t bytes = 0;
  bool pool = false;
};
struct CommState {
  int size = 1, rank = 0;
};

struct State {
  std::vector<std::string> violations;
  Counters counters;
  std::map<std::uintptr_t, Allocation> allocations;  // base address -> allocation
  std::uintptr_t next_address = std::uintptr_t{1} << 40;
  std::map<const void*, std::unique_ptr<StreamState>> streams;
  StreamState legacy;  // the null stream
  std::map<const void*, std::unique_ptr<EventState>> events;
  std::map<const void*, std::unique_ptr<LayoutState>> layouts;
  std::map<const void*, std::unique_ptr<DescState>> descs;
  std::set<const void*> handles, preferences, pools;
  std::map<const void*, std::unique_ptr<CommState>> comms;
  std::uint64_t pool_used = 0, pool_used_high = 0, pool_reserved = 0, pool_reserved_high = 0;
  int device = 0;
  bool price_one_rank = false;
};

State& st() {
  static State s;
  return s;
}

template <class... A>
void violate(fmt::format_string<A...> f, A&&... a) {
  st().violations.push_back(fmt::format(f, std::forward<A>(a)...));
}

template <class T>
T* make_handle(std::set<const void*>& table) {
  auto* p = reinterpret_cast<T*>(new std::uint64_t[8]{});
  table.insert(p);
  return p;
}

StreamState* stream_of(cudaStream_t s, const char* call) {
  if (s == nullptr) return &st().legacy;
  auto it = st().streams.find(s);
  if (it == st().streams.end()) {
    violate("{}: stream {} was never created or was destroyed", call, static_cast<const void*>(s));
    return nullptr;
  }
  return it->second.get();
}

// Whether [p, p + bytes) lies inside one live allocation.
bool in_live(const void* p, std::uint64_t bytes, const char* call, const char* what) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto& allocs = st().allocations;
  auto it = allocs.upper_bound(a);
  if (p != nullptr && it != allocs.begin()) {
    --it;
    if (a >= it->first && a + bytes <= it->first + it->second.bytes) return true;
  }
  violate("{}: {} [{}, +{} B) is not inside a live allocation", call, what, p, bytes);
  return false;
}

std::uint64_t elem_bytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2: return 1;
    default: return 0;
  }
}

std::uint64_t nccl_elem_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 1;  // fp8 types
  }
}

void* new_allocation(std::uint64_t bytes, bool pool) {
  auto& s = st();
  const std::uintptr_t base = s.next_address;
  s.next_address += ((bytes + 255) / 256) * 256 + 4096;  // a gap: running over the end is caught
  s.allocations[base] = Allocation{bytes, pool};
  return reinterpret_cast<void*>(base);
}

// Bytes a column-major layout spans, batches included.
std::uint64_t layout_span_bytes(const LayoutState& l) {
  const std::uint64_t one = static_cast<std::uint64_t>(l.ld) * (l.cols - 1) + l.rows;
  const std::uint64_t elems = one + static_cast<std::uint64_t>(std::max(0, l.batch - 1)) * static_cast<std::uint64_t>(l.stride);
  return elems * elem_bytes(l.type);
}

void advance(StreamState* s, double ns) {
  if (s) s->clock_ns += ns;
}

}  // namespace

const std::vector<std::string>& violations() { return st().violations; }
const Counters& counters() { return st().counters; }
std::uint64_t pool_used() { return st().pool_used; }
void reset_log() {
  st().violations.clear();
  st().counters = Counters{};
  st().price_one_rank = false;
}
void price_one_rank_collectives(bool on) { st().price_one_rank = on; }

}  // namespace stepsim::fake_cuda

using namespace stepsim::fake_cuda;

// ---------------------------------------------------------------- CUDA runtime
extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  st().device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = st().device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof(*prop));
  std::strncpy(prop->name, "emulated H100 (CPU, tests/emulated)", sizeof(prop->name) - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->totalGlobalMem = std::size_t{80} << 30;
  prop->l2CacheSize = 50 << 20;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  (void)priority;
  if (flags != cudaStreamNonBlocking) violate("cudaStreamCreateWithPriority: flags {} (stepsim creates non-blocking streams)", flags);
  auto state = std::make_unique<StreamState>();
  *stream = reinterpret_cast<cudaStream_t>(state.get());
  st().streams[*stream] = std::move(state);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!st().streams.erase(stream)) {
    violate("cudaStreamDestroy: unknown stream");
    return cudaErrorInvalidResourceHandle;
  }
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return stream_of(stream, "cudaStreamSynchronize") ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  (void)flags;
  StreamState* s = stream_of(stream, "cudaStreamWaitEvent");
  auto it = st().events.find(event);
  if (!s || it == st().events.end()) {
    if (s) violate("cudaStreamWaitEvent: unknown event");
    return cudaErrorInvalidResourceHandle;
  }
  ++st().counters.stream_waits;
  if (it->second->recorded) s->clock_ns = std::max(s->clock_ns, it->second->time_ns);  // never recorded: no-op, as CUDA
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  auto state = std::make_unique<EventState>();
  state->timing = (flags & cudaEventDisableTiming) == 0;
  *event = reinterpret_cast<cudaEvent_t>(state.get());
  st().events[*event] = std::move(state);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!st().events.erase(event)) {
    violate("cudaEventDestroy: unknown event");
    return cudaErrorInvalidResourceHandle;
  }
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  StreamState* s = stream_of(stream, "cudaEventRecord");
  auto it = st().events.find(event);
  if (!s || it == st().events.end()) {
    if (s) violate("cudaEventRecord: unknown event");
    return cudaErrorInvalidResourceHandle;
  }
  ++st().counters.event_records;
  it->second->recorded = true;
  it->second->time_ns = s->clock_ns;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return st().events.count(event) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  return st().events.count(event) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  auto a = st().events.find(start), b = st().events.find(end);
  if (a == st().events.end() || b == st().events.end()) return cudaErrorInvalidResourceHandle;
  if (!a->second->timing || !b->second->timing) {
    violate("cudaEventElapsedTime: an event created with cudaEventDisableTiming");
    return cudaErrorInvalidResourceHandle;
  }
  if (!a->second->recorded || !b->second->recorded) {
    violate("cudaEventElapsedTime: an event that was never recorded");
    return cudaErrorInvalidResourceHandle;
  }
  *ms = static_cast<float>((b->second->time_ns - a->second->time_ns) / 1e6);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = new_allocation(bytes, false);
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  auto it = st().allocations.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == st().allocations.end() || it->second.pool) {
    violate("cudaFree: {} is not a live cudaMalloc allocation", ptr);
    return cudaErrorInvalidValue;
  }
  st().allocations.erase(it);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  (void)value;
  StreamState* s = stream_of(stream, "cudaMemsetAsync");
  if (!s || !in_live(ptr, bytes, "cudaMemsetAsync", "destination")) return cudaErrorInvalidValue;
  advance(s, static_cast<double>(bytes) / kCopyBytesPerS * 1e9);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  StreamState* s = stream_of(stream, "cudaMemcpyAsync");
  if (kind != cudaMemcpyDeviceToDevice) violate("cudaMemcpyAsync: kind {} (live mode copies device to device)", static_cast<int>(kind));
  if (!s || !in_live(dst, bytes, "cudaMemcpyAsync", "destination") || !in_live(src, bytes, "cudaMemcpyAsync", "source"))
    return cudaErrorInvalidValue;
  ++st().counters.copies;
  advance(s, static_cast<double>(bytes) / kCopyBytesPerS * 1e9);
  return cudaSuccess;
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  if (props->location.type != cudaMemLocationTypeDevice || props->allocType != cudaMemAllocationTypePinned)
    violate("cudaMemPoolCreate: expected a pinned device pool");
  *pool = make_handle<CUmemPoolHandle_st>(st().pools);
  return cudaSuccess;
}
cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  if (!st().pools.erase(pool)) return cudaErrorInvalidValue;
  delete[] reinterpret_cast<std::uint64_t*>(pool);
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (!st().pools.count(pool)) return cudaErrorInvalidValue;
  auto& s = st();
  switch (attr) {
    case cudaMemPoolAttrUsedMemHigh:
    case cudaMemPoolAttrReservedMemHigh:
      // CUDA accepts only 0 here: it resets the mark to the current value.
      if (*static_cast<std::uint64_t*>(value) != 0) {
        violate("cudaMemPoolSetAttribute: a high-water mark can only be reset to 0");
        return cudaErrorInvalidValue;
      }
      if (attr == cudaMemPoolAttrUsedMemHigh) s.pool_used_high = s.pool_used;
      else s.pool_reserved_high = s.pool_reserved;
      return cudaSuccess;
    case cudaMemPoolAttrReleaseThreshold:
    case cudaMemPoolReuseAllowInternalDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseFollowEventDependencies: return cudaSuccess;
    default: violate("cudaMemPoolSetAttribute: attribute {} is read-only", static_cast<int>(attr)); return cudaErrorInvalidValue;
  }
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (!st().pools.count(pool)) return cudaErrorInvalidValue;
  auto& s = st();
  auto* out = static_cast<std::uint64_t*>(value);
  switch (attr) {
    case cudaMemPoolAttrUsedMemCurrent: *out = s.pool_used; return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh: *out = s.pool_used_high; return cudaSuccess;
    case cudaMemPoolAttrReservedMemCurrent: *out = s.pool_reserved; return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh: *out = s.pool_reserved_high; return cudaSuccess;
    default: *out = 0; return cudaSuccess;
  }
}
cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t bytes, cudaMemPool_t pool, cudaStream_t stream) {
  if (!st().pools.count(pool) || !stream_of(stream, "cudaMallocFromPoolAsync")) return cudaErrorInvalidValue;
  auto& s = st();
  *ptr = new_allocation(bytes, true);
  s.pool_used += bytes;
  s.pool_used_high = std::max(s.pool_used_high, s.pool_used);
  // Reserved memory: the pool keeps what it grew to (release threshold = max in live mode).
  s.pool_reserved = std::max(s.pool_reserved, s.pool_used);
  s.pool_reserved_high = std::max(s.pool_reserved_high, s.pool_reserved);
  ++s.counters.pool_allocs;
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  auto& s = st();
  auto it = s.allocations.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (!stream_of(stream, "cudaFreeAsync")) return cudaErrorInvalidValue;
  if (it == s.allocations.end() || !it->second.pool) {
    violate("cudaFreeAsync: {} is not a live pool allocation (double free?)", ptr);
    return cudaErrorInvalidValue;
  }
  s.pool_used -= it->second.bytes;
  s.allocations.erase(it);
  ++s.counters.pool_frees;
  return cudaSuccess;
}

}  // extern "C"

// Kernels of fill.cu, membw_kernels.cu and live_spin.cu (device code is not built here).
namespace stepsim::gpu {

void DeviceBuffer::fill_random(std::size_t elem_bytes, std::uint64_t seed, cudaStream_t stream) const {
  (void)seed;
  if (!ptr_ || bytes_ == 0) return;
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4) violate("fill_random: element size {}", elem_bytes);
  StreamState* s = stream_of(stream, "fill_random");
  if (!s || !in_live(ptr_, bytes_, "fill_random", "buffer")) return;
  ++st().counters.fills;
  advance(s, static_cast<double>(bytes_) / kCopyBytesPerS * 1e9);
}

// membw_kernels.cu: each class kernel checks its buffers and takes its bytes at the copy rate.
cudaError_t launch_membw(MembwClass c, const MembwArgs& a, cudaStream_t stream) {
  StreamState* s = stream_of(stream, "launch_membw");
  if (!s) return cudaErrorInvalidResourceHandle;
  if (a.n == 0 || a.n % (std::size_t{1} << 19) != 0) {
    violate("launch_membw: {} elements, expected a positive multiple of 2^19", a.n);
    return cudaErrorInvalidValue;
  }
  const char* name = membw_class_name(c);
  if (!in_live(a.a, 2 * a.n, name, "a") || !in_live(a.out, 2 * a.n, name, "out")) return cudaErrorInvalidValue;
  if (membw_b_bytes(c, a.n) > 0 && !in_live(a.b, membw_b_bytes(c, a.n), name, "b")) return cudaErrorInvalidValue;
  ++st().counters.membw_kernels;
  advance(s, static_cast<double>(membw_bytes(c, a.n)) / kCopyBytesPerS * 1e9);
  return cudaSuccess;
}

cudaError_t launch_membw_ids(void* ids, std::size_t n, unsigned long long seed, cudaStream_t stream) {
  (void)seed;
  StreamState* s = stream_of(stream, "launch_membw_ids");
  if (!s) return cudaErrorInvalidResourceHandle;
  if (!in_live(ids, 8 * (n / kMembwRow), "launch_membw_ids", "ids")) return cudaErrorInvalidValue;
  advance(s, static_cast<double>(8 * (n / kMembwRow)) / kCopyBytesPerS * 1e9);
  return cudaSuccess;
}

cudaError_t launch_live_spin(cudaStream_t stream, unsigned long long duration_ns) {
  StreamState* s = stream_of(stream, "live_spin_kernel");
  if (!s) return cudaErrorInvalidResourceHandle;
  ++st().counters.spins;
  advance(s, static_cast<double>(duration_ns));
  return cudaSuccess;
}

}  // namespace stepsim::gpu

// ---------------------------------------------------------------- cuBLASLt
extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = make_handle<cublasLtContext>(st().handles);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!st().handles.erase(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete[] reinterpret_cast<std::uint64_t*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (scale != CUDA_R_32F) violate("cublasLtMatmulDescCreate: scale type {} (stepsim uses fp32 alpha/beta)", static_cast<int>(scale));
  auto state = std::make_unique<DescState>();
  state->compute = compute;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(state.get());
  st().descs[*desc] = std::move(state);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  return st().descs.erase(desc) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size) {
  auto it = st().descs.find(desc);
  if (it == st().descs.end()) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATMUL_DESC_TRANSA || attr == CUBLASLT_MATMUL_DESC_TRANSB) {
    if (size != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
    (attr == CUBLASLT_MATMUL_DESC_TRANSA ? it->second->transa : it->second->transb) = *static_cast<const cublasOperation_t*>(buf);
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  if (ld < static_cast<int64_t>(rows) || rows == 0 || cols == 0) {
    violate("cublasLtMatrixLayoutCreate: {}x{} with ld {}", rows, cols, ld);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  auto state = std::make_unique<LayoutState>();
  state->type = type;
  state->rows = rows;
  state->cols = cols;
  state->ld = ld;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(state.get());
  st().layouts[*layout] = std::move(state);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  return st().layouts.erase(layout) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  auto it = st().layouts.find(layout);
  if (it == st().layouts.end()) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) {
    if (size != sizeof(int)) return CUBLAS_STATUS_INVALID_VALUE;
    it->second->batch = *static_cast<const int*>(buf);
  } else if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) {
    if (size != sizeof(int64_t)) return CUBLAS_STATUS_INVALID_VALUE;
    it->second->stride = *static_cast<const int64_t*>(buf);
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = make_handle<cublasLtMatmulPreferenceOpaque_t>(st().preferences);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  if (!st().preferences.erase(pref)) return CUBLAS_STATUS_INVALID_VALUE;
  delete[] reinterpret_cast<std::uint64_t*>(pref);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  (void)buf;
  if (!st().preferences.count(pref)) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && size != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {
// m, n, k of a TN GEMM described by (desc, A, B, C); false (and a violation) when inconsistent.
bool gemm_dims(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
               std::uint64_t& m, std::uint64_t& n, std::uint64_t& k, const char* call) {
  auto& s = st();
  auto d = s.descs.find(desc);
  auto la = s.layouts.find(a), lb = s.layouts.find(b), lc = s.layouts.find(c);
  if (d == s.descs.end() || la == s.layouts.end() || lb == s.layouts.end() || lc == s.layouts.end()) {
    violate("{}: unknown descriptor or layout", call);
    return false;
  }
  // op(A) = A^T: A is stored k x m; op(B) = B: k x n; C: m x n.
  if (d->second->transa != CUBLAS_OP_T || d->second->transb != CUBLAS_OP_N) {
    violate("{}: layout other than TN", call);
    return false;
  }
  k = la->second->rows;
  m = la->second->cols;
  n = lb->second->cols;
  if (lb->second->rows != k || lc->second->rows != m || lc->second->cols != n ||
      la->second->batch != lb->second->batch || lb->second->batch != lc->second->batch) {
    violate("{}: A {}x{}, B {}x{}, C {}x{} (batches {}, {}, {}) do not form a TN GEMM", call, la->second->rows,
            la->second->cols, lb->second->rows, lb->second->cols, lc->second->rows, lc->second->cols, la->second->batch,
            lb->second->batch, lc->second->batch);
    return false;
  }
  return true;
}
}  // namespace

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  std::uint64_t m = 0, n = 0, k = 0;
  if (!st().handles.count(handle) || !st().preferences.count(pref) || requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  if (c != d) violate("cublasLtMatmulAlgoGetHeuristic: D layout differs from C (stepsim writes C in place)");
  if (!gemm_dims(desc, a, b, c, m, n, k, "cublasLtMatmulAlgoGetHeuristic")) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(&results[0], 0, sizeof(results[0]));
  results[0].workspaceSize = std::size_t{4} << 20;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    void* buf, size_t size, size_t* written) {
  (void)algo, (void)attr;
  std::memset(buf, 0, size);
  if (written) *written = size;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  const char* call = "cublasLtMatmul";
  std::uint64_t m = 0, n = 0, k = 0;
  StreamState* s = stream_of(stream, call);
  if (!st().handles.count(handle) || !alpha || !beta || !algo || !s) return CUBLAS_STATUS_INVALID_VALUE;
  if (!gemm_dims(desc, a, b, c, m, n, k, call)) return CUBLAS_STATUS_INVALID_VALUE;
  if (c != d || C != D) violate("{}: D differs from C", call);
  auto& L = st().layouts;
  bool ok = in_live(A, layout_span_bytes(*L.at(a)), call, "A") && in_live(B, layout_span_bytes(*L.at(b)), call, "B") &&
            in_live(C, layout_span_bytes(*L.at(c)), call, "C") &&
            (workspace_bytes == 0 || in_live(workspace, workspace_bytes, call, "workspace"));
  if (!ok) return CUBLAS_STATUS_INVALID_VALUE;
  ++st().counters.gemms;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * L.at(a)->batch;
  advance(s, flops / kGemmFlopsPerS * 1e9);
  return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- NCCL
const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "emulated NCCL error"; }
ncclResult_t ncclGetVersion(int* version) {
  *version = 22803;
  return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0x5a, sizeof(*id));
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  if (nranks != 1 || rank != 0) {
    violate("ncclCommInitRank: {} ranks (the emulation is one process)", nranks);
    return ncclInvalidArgument;
  }
  auto state = std::make_unique<CommState>();
  *comm = reinterpret_cast<ncclComm_t>(state.get());
  st().comms[*comm] = std::move(state);
  return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)key, (void)config;
  if (!st().comms.count(comm)) return ncclInvalidArgument;
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  if (color < 0) {
    violate("ncclCommSplit: color {}", color);
    return ncclInvalidArgument;
  }
  auto state = std::make_unique<CommState>();
  *newcomm = reinterpret_cast<ncclComm_t>(state.get());
  st().comms[*newcomm] = std::move(state);
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return st().comms.erase(comm) ? ncclSuccess : ncclInvalidArgument; }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  auto it = st().comms.find(comm);
  if (it == st().comms.end()) return ncclInvalidArgument;
  *rank = it->second->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  auto it = st().comms.find(comm);
  if (it == st().comms.end()) return ncclInvalidArgument;
  *count = it->second->size;
  return ncclSuccess;
}

namespace {
int comm_size(ncclComm_t comm) {
  auto it = st().comms.find(comm);
  return it == st().comms.end() ? 1 : it->second->size;
}

// send and recv must hold `send_elems` and `recv_elems` elements; the collective moves
// `moved_elems` (nccl-tests S) and occupies the stream for S / 100 GB/s.
ncclResult_t collective(const char* call, const void* send, void* recv, size_t send_elems, size_t recv_elems,
                        size_t moved_elems, ncclDataType_t t, ncclComm_t comm, cudaStream_t stream) {
  StreamState* s = stream_of(stream, call);
  if (!s || !st().comms.count(comm)) {
    if (s) violate("{}: unknown communicator", call);
    return ncclInvalidArgument;
  }
  const std::uint64_t e = nccl_elem_bytes(t);
  if (send_elems == 0 || !in_live(send, send_elems * e, call, "send buffer") || !in_live(recv, recv_elems * e, call, "receive buffer"))
    return ncclInvalidArgument;
  ++st().counters.collectives;
  if (comm_size(comm) == 1 && !st().price_one_rank) {
    // ncclLaunchOneRank: in place is a no-op, out of place a device memcpy of the buffer.
    if (send != recv) advance(s, static_cast<double>(moved_elems * e) / kCopyBytesPerS * 1e9);
    else ++st().counters.in_place_one_rank;
    return ncclSuccess;
  }
  advance(s, static_cast<double>(moved_elems * e) / kCollectiveBytesPerS * 1e9);
  return ncclSuccess;
}
}  // namespace

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  (void)op;
  return collective("ncclAllReduce", send, recv, count, count, count, t, comm, stream);
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t t, ncclComm_t comm, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(comm_size(comm));
  return collective("ncclAllGather", send, recv, count, count * n, count * n, t, comm, stream);
}
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  (void)op;
  const size_t n = static_cast<size_t>(comm_size(comm));
  return collective("ncclReduceScatter", send, recv, count * n, count, count * n, t, comm, stream);
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  (void)root;
  return collective("ncclBroadcast", send, recv, count, count, count, t, comm, stream);
}
ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  (void)op, (void)root;
  return collective("ncclReduce", send, recv, count, count, count, t, comm, stream);
}
ncclResult_t ncclAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t t, ncclComm_t comm, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(comm_size(comm));
  return collective("ncclAlltoAll", send, recv, count * n, count * n, count * n, t, comm, stream);
}

}  // extern "C"
