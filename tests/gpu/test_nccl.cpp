// [gpu] NCCL: a world-size-1 communicator runs every collective with the nccl-tests sizes, and
// `mpirun -np 1 stepsim calibrate nccl` exercises the MPI bootstrap end to end.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "kernels/gpu/nccl_ops.hpp"
#include "kernels/gpu/raii.hpp"
#include "sim/hardware/profile.hpp"
#include "test_support.hpp"

using namespace stepsim;
using namespace stepsim::gpu;

TEST_CASE("a single-rank NCCL communicator runs every collective and all_reduce returns its input", "[gpu][nccl]") {
  STEPSIM_CUDA_CHECK(cudaSetDevice(0));
  ncclUniqueId id;
  STEPSIM_NCCL_CHECK(ncclGetUniqueId(&id));
  NcclComm comm(id, 1, 0);
  REQUIRE(comm.size() == 1);
  Stream stream;
  for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
                           CollectiveKind::Broadcast, CollectiveKind::Reduce, CollectiveKind::AllToAll}) {
    CollectiveSizes s = collective_sizes(k, 1 << 20, 1, Dtype::FP32);
    CHECK(s.total_bytes == (1u << 20));
    CollectiveBuffers buf(s, Dtype::FP32, stream.get(), 5);
    run_collective(comm, stream.get(), k, s, Dtype::FP32, buf.send.data(), buf.recv.data());
    stream.synchronize();
    if (k == CollectiveKind::AllReduce) {
      std::vector<float> in(s.count), out(s.count);
      STEPSIM_CUDA_CHECK(cudaMemcpy(in.data(), buf.send.data(), buf.send.bytes(), cudaMemcpyDeviceToHost));
      STEPSIM_CUDA_CHECK(cudaMemcpy(out.data(), buf.recv.data(), buf.recv.bytes(), cudaMemcpyDeviceToHost));
      CHECK(in == out);
      CHECK(in[0] != 0.0f);  // random, non-zero data
    }
  }
}

TEST_CASE("mpirun -np 1 stepsim calibrate nccl writes a profile with the raw points", "[gpu][nccl][mpi]") {
  const test::TempDir dir;
  auto out = dir / "profile.json";
  std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --allow-run-as-root -np 1 " +
                    std::string(STEPSIM_BINARY) + " calibrate nccl -b 8 -e 1048576 -f 16 -n 5 --repeats 3 --base " +
                    std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json --out " + out.string();
  int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  HardwareProfile p = load_profile(out);
  const auto& colls = p.provenance.at("calibration").at("collectives");
  REQUIRE(colls.size() == 3);  // all_reduce, all_gather, reduce_scatter on the world communicator
  CHECK(colls[0].at("ranks") == 1);
  CHECK(colls[0].at("points").size() == 2 * 5);  // 8 B .. 1 MiB by 16x: 8, 128, 2K, 32K, 512K, out-of-place + in-place
}
