#include "kernels/gpu/raii.hpp"

#include <cstdio>

namespace stepsim::gpu {

Stream::Stream(int priority) {
  STEPSIM_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
}
Stream::~Stream() {
  if (stream_) (void)cudaStreamDestroy(stream_);
}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (stream_) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}
void Stream::synchronize() const { STEPSIM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event(bool timing) {
  STEPSIM_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
Event::~Event() {
  if (event_) (void)cudaEventDestroy(event_);
}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) (void)cudaEventDestroy(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}
void Event::record(cudaStream_t stream) const { STEPSIM_CUDA_CHECK(cudaEventRecord(event_, stream)); }
void Event::synchronize() const { STEPSIM_CUDA_CHECK(cudaEventSynchronize(event_)); }
float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  STEPSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) STEPSIM_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)cudaFree(ptr_);
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
void DeviceBuffer::zero(cudaStream_t stream) const {
  if (ptr_) STEPSIM_CUDA_CHECK(cudaMemsetAsync(ptr_, 0, bytes_, stream));
}

CublasLtHandle::CublasLtHandle() { STEPSIM_CUBLAS_CHECK(cublasLtCreate(&handle_)); }
CublasLtHandle::~CublasLtHandle() {
  if (handle_) (void)cublasLtDestroy(handle_);
}
CublasLtHandle& CublasLtHandle::operator=(CublasLtHandle&& o) noexcept {
  if (this != &o) {
    if (handle_) (void)cublasLtDestroy(handle_);
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

NcclComm::NcclComm(const ncclUniqueId& id, int nranks, int rank) : rank_(rank), size_(nranks) {
  STEPSIM_NCCL_CHECK(ncclCommInitRank(&comm_, nranks, id, rank));
}
NcclComm NcclComm::adopt(ncclComm_t comm) {
  NcclComm c;
  c.comm_ = comm;
  if (comm) {
    STEPSIM_NCCL_CHECK(ncclCommUserRank(comm, &c.rank_));
    STEPSIM_NCCL_CHECK(ncclCommCount(comm, &c.size_));
  }
  return c;
}
NcclComm::~NcclComm() {
  if (comm_) (void)ncclCommDestroy(comm_);
}
NcclComm& NcclComm::operator=(NcclComm&& o) noexcept {
  if (this != &o) {
    if (comm_) (void)ncclCommDestroy(comm_);
    comm_ = std::exchange(o.comm_, nullptr);
    rank_ = o.rank_;
    size_ = o.size_;
  }
  return *this;
}

DeviceInfo current_device_info() {
  DeviceInfo info;
  STEPSIM_CUDA_CHECK(cudaGetDevice(&info.ordinal));
  cudaDeviceProp prop{};
  STEPSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, info.ordinal));
  std::snprintf(info.name, sizeof(info.name), "%s", prop.name);
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.memory_bytes = prop.totalGlobalMem;
  info.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  return info;
}

}  // namespace stepsim::gpu
