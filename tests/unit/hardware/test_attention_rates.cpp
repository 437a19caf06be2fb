// Fused attention kernels priced at their own rate per direction and sequence length, and the
// GEMM table of a power-limited variant (issue 13, items 2, 3 and 6).
#include <catch2/catch.hpp>

#include "sim/core/error.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/hardware/compute_model.hpp"
#include "sim/hardware/profile.hpp"

using namespace stepsim;
using Json = nlohmann::json;

namespace {

ComputeProfile base() {
  ComputeProfile c;
  c.peak[Dtype::BF16] = FlopRate::from_tflops(1000);
  c.attention_efficiency = 0.5;
  c.min_kernel_time = Time::zero();
  c.hbm = Bandwidth::from_gbps(1e6);  // memory-bound floors out of the way unless a test sets it
  return c;
}

AttentionWork work(AttentionKernel k, bool backward, std::int64_t seq) { return AttentionWork{Flops{1e12}, k, backward, seq}; }

}  // namespace

TEST_CASE("An attention rate approaches its long-sequence value and is half of it at half_rate_seq", "[hardware][attention]") {
  const AttentionRate r{0.8, 0.6, 1000};
  CHECK(r.at(false, 1000) == Approx(0.4));
  CHECK(r.at(true, 1000) == Approx(0.3));
  CHECK(r.at(false, 3000) == Approx(0.6));
  CHECK(r.at(false, 1'000'000) == Approx(0.8).epsilon(0.002));
  const AttentionRate flat{0.8, 0.6, 0};
  CHECK(flat.at(false, 10) == 0.8);
  CHECK(flat.at(true, 10) == 0.6);
}

TEST_CASE("Each attention kernel uses its own rate; a kernel without one falls back", "[hardware][attention]") {
  ComputeProfile c = base();
  c.attention_rates[static_cast<std::size_t>(AttentionKernel::Flash)] = AttentionRate{0.6, 0.4, 0};
  c.attention_rates[static_cast<std::size_t>(AttentionKernel::FlashTriton)] = AttentionRate{0.3, 0.2, 2048};
  CHECK(attention_efficiency(c, work(AttentionKernel::Flash, false, 2048)) == Approx(0.6));
  CHECK(attention_efficiency(c, work(AttentionKernel::Flash, true, 2048)) == Approx(0.4));
  CHECK(attention_efficiency(c, work(AttentionKernel::FlashTriton, false, 2048)) == Approx(0.15));
  CHECK(attention_efficiency(c, work(AttentionKernel::Flash3, false, 2048)) == Approx(0.5));
  CHECK(attention_efficiency(c, work(AttentionKernel::SdpaEfficient, true, 2048)) == Approx(0.5));
  c.efficient_attention_efficiency = 0.25;
  CHECK(attention_efficiency(c, work(AttentionKernel::SdpaEfficient, true, 2048)) == Approx(0.25));
  // PyTorch's flash backend without a rate of its own runs at flash_attn's; with one, at its own.
  CHECK(attention_efficiency(c, work(AttentionKernel::SdpaFlash, true, 2048)) == Approx(0.4));
  // sdpa's cuDNN backend without a rate of its own: flash_attn's, then sdpa_flash's once it has one.
  CHECK(attention_efficiency(c, work(AttentionKernel::SdpaCudnn, true, 2048)) == Approx(0.4));
  c.attention_rates[static_cast<std::size_t>(AttentionKernel::SdpaFlash)] = AttentionRate{0.3, 0.2, 0};
  CHECK(attention_efficiency(c, work(AttentionKernel::SdpaFlash, true, 2048)) == Approx(0.2));
  CHECK(attention_efficiency(c, work(AttentionKernel::SdpaCudnn, false, 2048)) == Approx(0.3));
  c.attention_rates[static_cast<std::size_t>(AttentionKernel::SdpaCudnn)] = AttentionRate{0.56, 0.48, 0};
  CHECK(attention_efficiency(c, work(AttentionKernel::SdpaCudnn, false, 2048)) == Approx(0.56));
  CHECK(attention_efficiency(c, work(AttentionKernel::SdpaCudnn, true, 2048)) == Approx(0.48));
  CHECK(attention_kernel_head_dim(AttentionKernel::SdpaCudnn, 112) == 112);  // generated for the graph's width

  // The kernel's time: 1e12 causal FLOPs at 0.4 of 1,000 TFLOP/s = 2.5 ms.
  KernelSpec k{"attention.bwd", KernelClass::Attention, KernelWork{}, ""};
  k.work.attention = work(AttentionKernel::Flash, true, 2048);
  CHECK(kernel_time(c, k).ms() == Approx(2.5));
  KernelTimeCache cache(c);
  CHECK(cache.kernel_time(k).ms() == Approx(2.5));
}

TEST_CASE("A table measured on a faster part of the same chip scales by the bf16 peak ratio", "[hardware][gemm]") {
  ComputeProfile c = base();
  const GemmShape g{4096, 4096, 4096};
  c.gemm_table.push_back(GemmMeasurement{g, FlopRate::from_tflops(800)});
  const Time measured_on_table_part = gemm_time(c, g);
  CHECK(measured_on_table_part.ms() == Approx(g.flops().count / 800e12 * 1e3));
  c.gemm_table_peak = FlopRate::from_tflops(1250);  // this part: 1,000 of the table part's 1,250
  CHECK(gemm_time(c, g).ms() == Approx(measured_on_table_part.ms() * 1.25));
}

TEST_CASE("fp16 and bf16 GEMMs share a table where the part's peaks for both are equal", "[hardware][gemm]") {
  ComputeProfile c = base();
  c.peak[Dtype::BF16] = FlopRate::from_tflops(1000);
  c.peak[Dtype::FP16] = FlopRate::from_tflops(1000);
  GemmShape bf16{4096, 4096, 4096};
  c.gemm_table.push_back(GemmMeasurement{bf16, FlopRate::from_tflops(800)});
  GemmShape fp16 = bf16;
  fp16.dtype = Dtype::FP16;
  CHECK(gemm_time(c, fp16).ms() == Approx(bf16.flops().count / 800e12 * 1e3));  // the bf16 entry
  // An entry of its own dtype wins.
  c.gemm_table.push_back(GemmMeasurement{fp16, FlopRate::from_tflops(500)});
  CHECK(gemm_time(c, fp16).ms() == Approx(fp16.flops().count / 500e12 * 1e3));
  CHECK(gemm_time(c, bf16).ms() == Approx(bf16.flops().count / 800e12 * 1e3));
  // Peaks that differ (a part whose fp16 path is not its bf16 one): no sharing, the fallback.
  c.gemm_table.pop_back();
  c.peak[Dtype::FP16] = FlopRate::from_tflops(500);
  CHECK(gemm_time(c, fp16).ms() == Approx(fp16.flops().count / (500e12 * c.gemm_efficiency) * 1e3));
  // tf32 never borrows a 16-bit table.
  GemmShape tf32 = bf16;
  tf32.dtype = Dtype::TF32;
  c.peak[Dtype::TF32] = FlopRate::from_tflops(500);
  CHECK(gemm_time(c, tf32).ms() == Approx(tf32.flops().count / (500e12 * c.gemm_efficiency) * 1e3));
}

// Catches: a linear's forward (tn, with the bias epilogue) priced at its input gradient's (nn)
// rate when both have the same m, n, k, as a table keyed on dimensions alone does.
TEST_CASE("A GEMM of a known layout takes its own layout's entry; of unknown layout, the mean", "[hardware][gemm]") {
  ComputeProfile c = base();
  const GemmShape tn{4096, 2048, 2048, 1, Dtype::BF16, GemmLayout::TN};
  const GemmShape nn{4096, 2048, 2048, 1, Dtype::BF16, GemmLayout::NN};
  const GemmShape nt{4096, 2048, 2048, 1, Dtype::BF16, GemmLayout::NT};
  const GemmShape any{4096, 2048, 2048};
  c.gemm_table.push_back(GemmMeasurement{tn, FlopRate::from_tflops(200)});
  c.gemm_table.push_back(GemmMeasurement{nn, FlopRate::from_tflops(220)});
  c.gemm_table.push_back(GemmMeasurement{GemmShape{8192, 8192, 8192, 1, Dtype::BF16, GemmLayout::NT}, FlopRate::from_tflops(300)});
  const double flops = tn.flops().count;
  CHECK(gemm_time(c, tn).us() == Approx(flops / 200e12 * 1e6));
  CHECK(gemm_time(c, nn).us() == Approx(flops / 220e12 * 1e6));
  CHECK(gemm_time(c, any).us() == Approx(flops / 210e12 * 1e6));
  // nt has no entry of these dimensions: the two of other layouts (at distance 0.01) outweigh
  // the nt entry of other dimensions by far.
  const double nt_tflops = flops / gemm_time(c, nt).seconds() / 1e12;
  CHECK(nt_tflops > 205);
  CHECK(nt_tflops < 215);
  // A table of unknown layouts (a microbenchmark) answers every layout alike.
  ComputeProfile m = base();
  m.gemm_table.push_back(GemmMeasurement{any, FlopRate::from_tflops(250)});
  CHECK(gemm_time(m, tn) == gemm_time(m, any));
  CHECK(gemm_time(m, nn) == gemm_time(m, any));
  // The cache keeps layouts apart.
  KernelTimeCache cache(c);
  KernelSpec k{"gemm", KernelClass::Gemm, KernelWork{}, ""};
  k.work.gemms = {tn};
  CHECK(cache.kernel_time(k) == gemm_time(c, tn));
  k.work.gemms = {nn};
  CHECK(cache.kernel_time(k) == gemm_time(c, nn));
}

TEST_CASE("cuBLAS and CUTLASS kernel names give their GEMM layout", "[hardware][gemm]") {
  CHECK(gemm_layout_of_kernel("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nt") == GemmLayout::NT);
  CHECK(gemm_layout_of_kernel("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_32x3_nn") == GemmLayout::NN);
  CHECK(gemm_layout_of_kernel("ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_32x6_tn") == GemmLayout::TN);
  CHECK(gemm_layout_of_kernel("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_bf16_64x256_32x3_nn_align8>(T1::Params)") ==
        GemmLayout::NN);
  CHECK(gemm_layout_of_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1") == GemmLayout::TN);
  CHECK(gemm_layout_of_kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tt") == GemmLayout::Any);
  CHECK(gemm_layout_of_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>") == GemmLayout::Any);
  CHECK(gemm_layout_of_kernel("") == GemmLayout::Any);
  CHECK(gemm_layout_of_kernel("_nn") == GemmLayout::NN);
  CHECK(gemm_layout_of_kernel("gemm_nnx") == GemmLayout::Any);
  // The profile's spelling reads back as what to_string wrote; anything else is Any.
  for (GemmLayout l : {GemmLayout::NN, GemmLayout::NT, GemmLayout::TN, GemmLayout::Any}) CHECK(parse_gemm_layout(to_string(l)) == l);
  CHECK(parse_gemm_layout("tt") == GemmLayout::Any);
  CHECK(parse_gemm_layout("NN") == GemmLayout::Any);
}

TEST_CASE("KernelTimeCache prices every GEMM shape as gemm_time does, past its first table size", "[hardware][gemm]") {
  ComputeProfile c = base();
  c.gemm_table.push_back(GemmMeasurement{GemmShape{4096, 4096, 4096}, FlopRate::from_tflops(800)});
  c.gemm_table.push_back(GemmMeasurement{GemmShape{1024, 1024, 1024}, FlopRate::from_tflops(400)});
  KernelTimeCache cache(c);
  // 300 distinct shapes (the table starts with 64 slots and grows at half full), each asked
  // twice: the second answer comes from the cache and must be the first.
  for (int pass = 0; pass < 2; ++pass) {
    for (std::int64_t i = 1; i <= 300; ++i) {
      KernelSpec k{"gemm", KernelClass::Gemm, KernelWork{}, ""};
      const GemmShape g{64 * i, 4096, 64 * (301 - i), i % 3 + 1, i % 2 ? Dtype::BF16 : Dtype::FP32};
      k.work.gemms = {g, GemmShape{4096, 4096, 4096}};
      INFO("pass " << pass << ", shape " << i);
      CHECK(cache.kernel_time(k) == kernel_time(c, k));
    }
  }
}

TEST_CASE("compute.attention and gemm_table_peak_bf16_tflops parse, round-trip and are range-checked", "[hardware][attention]") {
  const Json doc{{"name", "p"},
                 {"memory_capacity_GiB", 80},
                 {"compute",
                  {{"peak_tflops", {{"bf16", 912.5}}},
                   {"hbm_bandwidth_GBps", 2400},
                   {"gemm_table_peak_bf16_tflops", 989.4},
                   {"gemm_table", Json::array({{{"m", 4096}, {"n", 2048}, {"k", 2048}, {"layout", "tn"}, {"tflops", 200}},
                                               {{"m", 4096}, {"n", 2048}, {"k", 2048}, {"tflops", 210}}})},
                   {"attention",
                    {{"flash", {{"forward", 0.3}, {"backward", 0.26}, {"half_rate_seq", 1026}}},
                     {"flash_triton", {{"forward", 0.15}, {"backward", 0.13}}}}}}},
                 {"collectives", {{"intra_node", {{"model", "ring"}, {"busbw_GBps", 360}}}}}};
  auto parse = [](const Json& d) {
    SourceMap sm;
    sm.root_file = "p.json";
    ObjectReader r(d, sm, "");
    return parse_profile(r);
  };
  const HardwareProfile p = parse(doc);
  const auto& flash = p.compute.attention_rates[static_cast<std::size_t>(AttentionKernel::Flash)];
  const auto& triton = p.compute.attention_rates[static_cast<std::size_t>(AttentionKernel::FlashTriton)];
  REQUIRE(flash);
  REQUIRE(triton);
  CHECK(flash->forward == 0.3);
  CHECK(flash->backward == 0.26);
  CHECK(flash->half_rate_seq == 1026);
  CHECK(triton->half_rate_seq == 0);
  CHECK_FALSE(p.compute.attention_rates[static_cast<std::size_t>(AttentionKernel::Flash3)]);
  CHECK(p.compute.gemm_table_peak.tflops() == Approx(989.4));

  const HardwareProfile again = parse(profile_to_json(p));
  CHECK(again.compute.attention_rates[static_cast<std::size_t>(AttentionKernel::Flash)]->half_rate_seq == 1026);
  CHECK(again.compute.attention_rates[static_cast<std::size_t>(AttentionKernel::FlashTriton)]->forward == 0.15);
  CHECK(again.compute.gemm_table_peak.tflops() == Approx(989.4));
  // A GEMM entry's layout: read, and written back only when known.
  REQUIRE(again.compute.gemm_table.size() == 2);
  CHECK(again.compute.gemm_table[0].shape.layout == GemmLayout::TN);
  CHECK(again.compute.gemm_table[1].shape.layout == GemmLayout::Any);
  CHECK(profile_to_json(p)["compute"]["gemm_table"][0]["layout"] == "tn");
  CHECK_FALSE(profile_to_json(p)["compute"]["gemm_table"][1].contains("layout"));

  auto error = [&](const Json& d) {
    try {
      parse(d);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Json bad = doc;
  bad["compute"]["gemm_table"][0]["layout"] = "tt";
  CHECK_THAT(error(bad), Catch::StartsWith("p.json: /compute/gemm_table/0/layout: \"tt\""));
  bad = doc;
  bad["compute"]["attention"]["flash2"] = {{"forward", 0.5}, {"backward", 0.5}};
  CHECK_THAT(error(bad), Catch::StartsWith("p.json: /compute/attention/flash2: expected a known key (unknown key; did you mean \"flash\"?"));
  bad = doc;
  bad["compute"]["attention"]["flash"]["forward"] = 1.5;
  CHECK_THAT(error(bad), Catch::StartsWith("p.json: /compute/attention/flash/forward: "));
  bad = doc;
  bad["compute"]["attention"]["flash"].erase("backward");
  CHECK_THAT(error(bad), Catch::StartsWith("p.json: /compute/attention/flash"));
  CHECK_THAT(error(bad), Catch::Contains("backward"));
  bad = doc;
  bad["compute"]["attention"]["flash"]["half_rate_seq"] = -1;
  CHECK_THAT(error(bad), Catch::StartsWith("p.json: /compute/attention/flash/half_rate_seq: "));
}

TEST_CASE("A GEMM is no faster than moving its operands, with or without a table entry", "[hardware][gemm]") {
  ComputeProfile c = base();
  c.hbm = Bandwidth::from_gbps(2000);
  c.memory_efficiency = 0.8;
  // The table holds a large square GEMM at 0.8 of peak; eager attention's QK^T for 8 sequences of
  // 512 tokens and 32 heads of 64 is [256 x 512 x 64] x [256 x 64 x 512]: 8.6 GFLOP but 168 MB.
  c.gemm_table.push_back(GemmMeasurement{GemmShape{8192, 8192, 8192}, FlopRate::from_tflops(800)});
  const GemmShape qk{512, 512, 64, 256};
  const double bytes = (512.0 * 64 + 64.0 * 512 + 512.0 * 512) * 256 * 2;
  CHECK(gemm_time(c, qk).seconds() == Approx(bytes / 1.6e12));
  // A large GEMM stays at its table rate.
  const GemmShape big{8192, 8192, 8192};
  CHECK(gemm_time(c, big).seconds() == Approx(big.flops().count / 800e12));
}

TEST_CASE("A prediction says where its GEMM rates come from, and flags an uncorrected microbenchmark table",
          "[hardware][gemm]") {
  ComputeProfile c = base();
  c.gemm_efficiency = 0.7;
  GemmRateSource roof = gemm_rate_source(c);
  CHECK(roof.table == "none");
  CHECK(roof.corrected);
  c.gemm_table.push_back(GemmMeasurement{GemmShape{4096, 4096, 4096, 1, Dtype::BF16}, FlopRate::from_tflops(700)});
  GemmRateSource micro = gemm_rate_source(c);
  CHECK(micro.table == "microbenchmark");
  CHECK_FALSE(micro.corrected);
  CHECK_THAT(micro.text, Catch::Contains("not corrected"));
  c.gemm_in_training_factor = 0.9;
  CHECK(gemm_rate_source(c).corrected);
  CHECK_THAT(gemm_rate_source(c).text, Catch::Contains("x in-training factor 0.900"));
  c.gemm_in_training_factor = 1;
  c.gemm_table_rates = GemmRates::InTraining;
  c.gemm_table_peak = FlopRate::from_tflops(1250);
  GemmRateSource trained = gemm_rate_source(c);
  CHECK(trained.table == "in_training");
  CHECK(trained.corrected);
  CHECK(trained.peak_scale == Approx(0.8));
  // The shipped profiles: the A800's table was measured in a Megatron step, the H100's is XLA's
  // microbenchmark, priced at the clock its power limit sustains (compute.clock).
  CHECK(gemm_rate_source(load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json").compute).corrected);
  const GemmRateSource h96 =
      gemm_rate_source(load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-96gb.json").compute);
  CHECK(h96.corrected);
  CHECK_THAT(h96.text, Catch::Contains("the 500 W limit sustains"));
}

TEST_CASE("An attention kernel computes at the head width it is compiled for", "[hardware][attention]") {
  // FlashAttention-2 (flash_attn and sdpa's copy): HEADDIM_SWITCH's 32, 64, 96, 128, ..., 256.
  for (AttentionKernel k : {AttentionKernel::Flash, AttentionKernel::SdpaFlash}) {
    CHECK(attention_kernel_head_dim(k, 8) == 32);
    CHECK(attention_kernel_head_dim(k, 64) == 64);
    CHECK(attention_kernel_head_dim(k, 80) == 96);
    CHECK(attention_kernel_head_dim(k, 112) == 128);
    CHECK(attention_kernel_head_dim(k, 128) == 128);
    CHECK(attention_kernel_head_dim(k, 200, Release{2, 5, 8}) == 224);
  }
  // The Triton kernel: BLOCK_HEADDIM = max(next_power_of_2(d), 16).
  CHECK(attention_kernel_head_dim(AttentionKernel::FlashTriton, 8) == 16);
  CHECK(attention_kernel_head_dim(AttentionKernel::FlashTriton, 80) == 128);
  CHECK(attention_kernel_head_dim(AttentionKernel::FlashTriton, 112) == 128);
  CHECK(attention_kernel_head_dim(AttentionKernel::FlashTriton, 128) == 128);
  // Past the widths a kernel is built for (the Triton kernel asserts d <= 128, FlashAttention-2
  // stops at 256), the head dimension itself: no width to round to.
  CHECK(attention_kernel_head_dim(AttentionKernel::FlashTriton, 160) == 160);
  CHECK(attention_kernel_head_dim(AttentionKernel::FlashTriton, std::int64_t{1} << 62) == std::int64_t{1} << 62);
  CHECK(attention_kernel_head_dim(AttentionKernel::Flash, 300) == 300);
  // FlashAttention-3 and the memory-efficient kernel: the head dimension itself; unknown stays 0.
  CHECK(attention_kernel_head_dim(AttentionKernel::Flash3, 112) == 112);
  CHECK(attention_kernel_head_dim(AttentionKernel::SdpaEfficient, 112) == 112);
  CHECK(attention_kernel_head_dim(AttentionKernel::Flash, 0) == 0);

  // MPT-30B's 64 heads of 112 run the 128-wide kernel: as long as 64 heads of 128 would.
  ComputeProfile c = base();
  const auto time = [&](AttentionKernel k, std::int64_t head_dim) {
    KernelSpec kernel{"attention", KernelClass::Attention, KernelWork{}, ""};
    kernel.work.attention = AttentionWork{fused_attention_flops(1, 8192, 64 * head_dim, false, true), k, false, 8192, head_dim};
    return kernel_time(c, kernel).ms();
  };
  CHECK(time(AttentionKernel::FlashTriton, 112) == Approx(time(AttentionKernel::FlashTriton, 128)));
  CHECK(time(AttentionKernel::Flash, 112) == Approx(time(AttentionKernel::Flash, 128)));
  CHECK(time(AttentionKernel::Flash3, 112) == Approx(time(AttentionKernel::Flash3, 128) * 112 / 128));
  // Without a head dimension the FLOPs are taken as given.
  KernelSpec unknown{"attention", KernelClass::Attention, KernelWork{}, ""};
  unknown.work.attention = AttentionWork{Flops{1e12}, AttentionKernel::FlashTriton, false, 8192};
  CHECK(attention_executed_flops(unknown.work.attention).count == 1e12);
}

// Catches: `flash` priced with kernels its flash_attn release no longer builds (or sdpa's vendored
// copy losing widths it still has).
TEST_CASE("flash runs the head widths of its flash_attn release: 224 gone from 2.6.2, 160 from 2.8.0", "[hardware][attention]") {
  // Dao-AILab/flash-attention csrc/flash_attn/src/static_switch.h HEADDIM_SWITCH (l.90): v2.6.1 still
  // switches `HEADDIM <= 224 -> 224`; 751c762c ("Don't specialize for hdim 224", first tagged in
  // v2.6.2) goes 192 -> 256, so a head of 200 runs the 256 kernel: 256/200 = 1.28x the model's
  // FLOPs instead of 224/200 = 1.12x. ce212720 ("Don't specialize for hdim 160 anymore", first in
  // v2.8.0) goes 128 -> 192: a head of 150 runs 192, not 160.
  const AttentionKernel f = AttentionKernel::Flash;
  CHECK(attention_kernel_head_dim(f, 200, Release{2, 6, 1}) == 224);
  CHECK(attention_kernel_head_dim(f, 200, Release{2, 6, 2}) == 256);
  CHECK(attention_kernel_head_dim(f, 150, Release{2, 7, 4}) == 160);
  CHECK(attention_kernel_head_dim(f, 150, Release{2, 8, 0}) == 192);
  // The other widths are in every 2.x release.
  CHECK(attention_kernel_head_dim(f, 96, Release{2, 8, 3}) == 96);
  CHECK(attention_kernel_head_dim(f, 180, Release{2, 8, 3}) == 192);
  // Unstated: the current release, v2.8.3.
  CHECK(attention_kernel_head_dim(f, 150) == 192);
  CHECK(attention_kernel_head_dim(f, 200) == 256);
  // PyTorch's vendored FlashAttention-2 (sdpa_flash) keeps all eight widths
  // (pytorch/pytorch@035290b7 aten/src/ATen/native/transformers/cuda/flash_attn/static_switch.h),
  // whatever flash_attn release is installed beside it.
  CHECK(attention_kernel_head_dim(AttentionKernel::SdpaFlash, 150, Release{2, 8, 3}) == 160);
  CHECK(attention_kernel_head_dim(AttentionKernel::SdpaFlash, 200, Release{2, 8, 3}) == 224);
  // The op carries the release: executed FLOPs of a head of 200 at 2.5.8 vs the default.
  AttentionWork old{Flops{1e12}, f, false, 8192, 200, Release{2, 5, 8}};
  AttentionWork now{Flops{1e12}, f, false, 8192, 200};
  CHECK(attention_executed_flops(old).count == Approx(1e12 * 224 / 200));
  CHECK(attention_executed_flops(now).count == Approx(1e12 * 256 / 200));
}
