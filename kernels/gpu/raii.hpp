#pragma once
// Move-only owners of CUDA, cuBLASLt and NCCL handles (STYLE.md 7). Each constructor acquires
// with a checked call (throws std::runtime_error with context); each destructor releases and
// never throws. A moved-from owner holds nothing and its destructor does nothing.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/gpu/cuda_check.hpp"

namespace stepsim::gpu {

// A non-blocking stream (does not synchronise with the legacy default stream), optionally with a
// priority (lower number = higher priority, as cudaDeviceGetStreamPriorityRange reports).
class Stream {
 public:
  explicit Stream(int priority = 0);
  ~Stream();
  Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// A CUDA event. Timing events (the default) can be used with elapsed_ms; `timing = false`
// creates a lighter event for pure ordering (cudaEventDisableTiming).
class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const;
  void synchronize() const;
  // Milliseconds between two recorded, completed timing events (cudaEventElapsedTime).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  cudaEvent_t event_ = nullptr;
};

// Device memory of `bytes` bytes (cudaMalloc). Zero bytes holds nullptr.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

  // Fills with uniformly random bytes interpreted as `elem_bytes`-wide elements that are finite
  // and non-zero for every dtype stepsim uses (see fill.cu for the bit patterns), on `stream`.
  // `seed` makes different buffers differ.
  void fill_random(std::size_t elem_bytes, std::uint64_t seed, cudaStream_t stream) const;
  void zero(cudaStream_t stream) const;

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class CublasLtHandle {
 public:
  CublasLtHandle();
  ~CublasLtHandle();
  CublasLtHandle(CublasLtHandle&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  CublasLtHandle& operator=(CublasLtHandle&& o) noexcept;
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;

  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

// An NCCL communicator. Created by mpi_bootstrap.hpp (make_world_comm, split_comm) or directly
// from a unique id; destroyed with ncclCommDestroy.
class NcclComm {
 public:
  NcclComm() = default;
  // ncclCommInitRank on the current device.
  NcclComm(const ncclUniqueId& id, int nranks, int rank);
  // Takes ownership of an existing communicator (e.g. from ncclCommSplit); null is allowed.
  static NcclComm adopt(ncclComm_t comm);
  ~NcclComm();
  NcclComm(NcclComm&& o) noexcept
      : comm_(std::exchange(o.comm_, nullptr)), rank_(o.rank_), size_(o.size_) {}
  NcclComm& operator=(NcclComm&& o) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  explicit operator bool() const { return comm_ != nullptr; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
};

// What the benchmarks record about the device they ran on.
struct DeviceInfo {
  int ordinal = 0;
  char name[256] = {};
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::size_t memory_bytes = 0;
  std::size_t l2_bytes = 0;
};
DeviceInfo current_device_info();

}  // namespace stepsim::gpu
