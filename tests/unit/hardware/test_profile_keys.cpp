// The hardware profile's key tables (sim/hardware/profile_keys.cpp, issue 18 item 2): they drive
// the parser's unknown-key errors and ranges, docs/profile-keys.md and `stepsim schema --profile`.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "json_schema_validator.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/hardware/profile_keys.hpp"
#include "test_support.hpp"

using namespace stepsim;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kRoot = STEPSIM_SOURCE_DIR;

// A profile holding every object the scope-model form can hold (the topology form below).
Json scope_profile() {
  return {{"name", "keys"},
          {"memory_capacity_GiB", 80},
          {"compute",
           {{"peak_tflops", {{"bf16", 989}}},
            {"hbm_bandwidth_GBps", 3350},
            {"memory_bandwidth_GBps", {{"elementwise", 2000}}},
            {"attention", {{"flash", {{"forward", 0.6}, {"backward", 0.5}, {"half_rate_seq", 1000}}}}},
            {"gemm_table", {{{"m", 1024}, {"n", 1024}, {"k", 1024}, {"tflops", 500}}}}}},
          {"collectives",
           {{"intra_node", {{"model", "nccl"}, {"busbw_GBps", 360}}},
            {"inter_node",
             {{"model", "alpha_beta"},
              {"all_reduce", {{{"alpha_us", 30}, {"beta_GBps", 40}}}},
              {"ranks", {{"all_reduce", 16}}}}}}},
          {"contention", {{"compute_slowdown", 0.1}}},
          {"host", {{"launch_overhead_us", 5}}},
          {"sources", {{"memory_outside_allocator.cuda_context_MiB", "test"}, {"memory_outside_allocator.nccl_per_communicator_MiB", "test"}}},
          {"memory_outside_allocator", {{"cuda_context_MiB", 500}, {"nccl_per_communicator_MiB", 100}}}};
}

Json topology_profile() {
  Json p = scope_profile();
  p["collectives"] = {{"topology",
                       {{"gpus_per_node", 8},
                        {"nvlink", {{"busbw_GBps", 360}}},
                        {"network", {{"nics_per_node", 8}, {"nic_GBps", 49}}},
                        {"fitted", {{"ranks", {2, 16}}, {"nodes", {1, 2}}, {"gpus_per_node", {1, 8}}}}}}};
  return p;
}

HardwareProfile parse(const Json& doc) {
  SourceMap sm;
  sm.root_file = "keys.json";
  ObjectReader r(doc, sm, "");
  return parse_profile(r);
}

std::string error_of(const Json& doc) {
  try {
    parse(doc);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// Each object of the two test profiles, by JSON pointer, with its declaration.
struct Site {
  const char* pointer;
  const ConfigObject* decl;
  bool topology;
};

std::vector<Site> sites() {
  namespace k = profile_keys;
  return {{"", &k::root(), false},
          {"/compute", &k::compute(), false},
          {"/compute/peak_tflops", &k::peak_tflops(), false},
          {"/compute/memory_bandwidth_GBps", &k::memory_bandwidth(), false},
          {"/compute/attention", &k::attention(), false},
          {"/compute/attention/flash", &k::attention_kernel(), false},
          {"/compute/gemm_table/0", &k::gemm(), false},
          {"/collectives", &k::collectives(), false},
          {"/collectives/intra_node", k::scope_model("nccl"), false},
          {"/collectives/inter_node", k::scope_model("alpha_beta"), false},
          {"/collectives/inter_node/all_reduce/0", &k::alpha_beta_range(), false},
          {"/collectives/inter_node/ranks", &k::alpha_beta_ranks(), false},
          {"/contention", &k::contention(), false},
          {"/host", &k::host(), false},
          {"/memory_outside_allocator", &k::outside_allocator(), false},
          {"/collectives/topology", &k::topology(), true},
          {"/collectives/topology/nvlink", &k::nvlink(), true},
          {"/collectives/topology/network", &k::network(), true}};
}

}  // namespace

TEST_CASE("The committed profile reference equals the one the profile key tables generate", "[config][hardware]") {
  // To update: stepsim schema --profile --markdown > docs/profile-keys.md
  std::ifstream in(kRoot + "/docs/profile-keys.md");
  REQUIRE(in);
  std::stringstream committed;
  committed << in.rdbuf();
  CHECK(committed.str() == profile_markdown_reference());
}

TEST_CASE("Every shipped hardware profile parses under the key tables", "[config][hardware]") {
  int n = 0;
  for (const auto& e : fs::directory_iterator(kRoot + "/configs/hardware")) {
    if (e.path().extension() != ".json") continue;
    INFO(e.path());
    CHECK_NOTHROW(load_profile(e.path()));
    ++n;
  }
  CHECK(n >= 6);
}

TEST_CASE("Both test profiles parse, so each range check below fails on its own key only", "[config][hardware]") {
  CHECK_NOTHROW(parse(scope_profile()));
  CHECK_NOTHROW(parse(topology_profile()));
}

TEST_CASE("An unknown profile key names the file and JSON path, the nearest key and every key the object takes",
          "[config][hardware]") {
  Json doc = scope_profile();
  doc["compute"]["hbm_bandwith_GBps"] = 3350;  // the typo a user makes
  std::string e = error_of(doc);
  CHECK_THAT(e, Catch::StartsWith("keys.json: /compute/hbm_bandwith_GBps: expected a known key (unknown key; did you mean "
                                  "\"hbm_bandwidth_GBps\"?"));
  for (const auto& k : profile_keys::compute().input_keys()) CHECK_THAT(e, Catch::Contains(k));
  // In a scope model the keys are the model's: a ring takes no alpha-beta ranges.
  doc = scope_profile();
  doc["collectives"]["intra_node"] = {{"model", "ring"}, {"busbw_GBps", 100}, {"step_latncy_us", 1}};
  e = error_of(doc);
  CHECK_THAT(e, Catch::Contains("/collectives/intra_node/step_latncy_us") && Catch::Contains("did you mean \"step_latency_us\"") &&
                    Catch::Contains("this object takes: model, busbw_GBps, step_latency_us, base_latency_us, note)"));
  // Deeper objects too: a topology level, a range of an alpha-beta model.
  doc = topology_profile();
  doc["collectives"]["topology"]["network"]["nic_bw_GBps"] = 50;
  CHECK_THAT(error_of(doc), Catch::Contains("/collectives/topology/network/nic_bw_GBps") && Catch::Contains("nics_per_node, nic_GBps"));
  doc = scope_profile();
  doc["collectives"]["inter_node"]["all_reduce"][0]["beta"] = 1;
  CHECK_THAT(error_of(doc), Catch::Contains("/collectives/inter_node/all_reduce/0/beta") && Catch::Contains("did you mean \"beta_GBps\""));
  // An unknown model lists the models.
  doc = scope_profile();
  doc["collectives"]["intra_node"]["model"] = "rings";
  CHECK_THAT(error_of(doc), Catch::Contains("/collectives/intra_node/model: \"rings\": expected one of alpha_beta, ring, tree, nccl, table"));
}

TEST_CASE("An unknown profile key through the CLI is exit 2 with one line", "[cli][config][hardware]") {
  const test::TempDir dir;
  Json doc = scope_profile();
  doc["hosts"] = {{"launch_overhead_us", 5}};
  {
    std::ofstream out(dir / "p.json");
    out << doc.dump(1);
  }
  std::string out;
  const int rc = test::run_capture(std::string(STEPSIM_BINARY) + " collective --profile " + (dir / "p.json").string() +
                                       " --kind all_reduce --ranks 8 --bytes 1MiB",
                                   out);
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains((dir / "p.json").string() + ": /hosts: expected a known key (unknown key; did you mean \"host\"?"));
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
}

TEST_CASE("Every static range a profile key declares is the range the parser enforces", "[config][hardware]") {
  // For each numeric key with a declared bound: a value just past it is an input error naming
  // the key's JSON path (the table, docs/profile-keys.md and the parser share one range).
  int checked = 0;
  for (const Site& s : sites()) {
    for (const ConfigKey& k : s.decl->keys) {
      if (!(k.types & (kNumber | kInteger)) || (!k.min && !k.max)) continue;
      std::vector<double> outside;
      if (k.max) outside.push_back(*k.max * 2 + 1);
      if (k.min) outside.push_back(k.min_exclusive ? *k.min : *k.min - 1);
      for (double v : outside) {
        Json doc = s.topology ? topology_profile() : scope_profile();
        doc[Json::json_pointer(std::string(s.pointer) + "/" + k.name)] = v;
        const std::string path = std::string(s.pointer) + "/" + k.name;
        INFO(path << " = " << v);
        CHECK_THAT(error_of(doc), Catch::StartsWith("keys.json: " + path + ": "));
        ++checked;
      }
    }
  }
  // 21 objects' worth of bounds: every number of the profile that has one (counted when written).
  CHECK(checked >= 60);
}

TEST_CASE("The parser applies the defaults the profile key tables declare", "[config][hardware]") {
  // profile_to_json writes each default-valued key back under its own name and unit: a parser
  // default that drifted from the table (which docs and the schema print) shows here.
  int checked = 0;
  for (bool topology : {false, true}) {
    Json minimal = topology ? topology_profile() : scope_profile();
    minimal.erase("contention");
    minimal.erase("host");
    const Json out = profile_to_json(parse(minimal));
    for (const Site& s : sites()) {
      if (s.topology != topology || std::string(s.pointer).find("/collectives/inter_node") == 0) continue;
      const Json::json_pointer ptr(s.pointer);
      if (!out.contains(ptr)) continue;
      const Json& written = out.at(ptr);
      for (const ConfigKey& k : s.decl->keys) {
        const bool in_input = minimal.contains(ptr) && minimal.at(ptr).contains(k.name);
        if (!k.default_value || !written.contains(k.name) || in_input) continue;
        INFO(s.pointer << "/" << k.name);
        if (k.default_value->is_number()) CHECK(written.at(k.name).get<double>() == Approx(k.default_value->get<double>()));
        else CHECK(written.at(k.name) == *k.default_value);
        ++checked;
      }
    }
  }
  CHECK(checked >= 20);
}

TEST_CASE("stepsim schema --profile prints a JSON Schema with one definition per profile object", "[cli][config][hardware]") {
  std::string out;
  REQUIRE(test::run_capture(std::string(STEPSIM_BINARY) + " schema --profile", out) == 0);
  const Json j = Json::parse(out);
  CHECK(j["$ref"] == "#/$defs/profile");
  CHECK(j["$defs"].size() == profile_catalog().objects.size());
  CHECK(j["$defs"]["profile"]["properties"]["memory_capacity_GiB"]["maximum"] == 65536);
  CHECK(j["$defs"]["profile.scope.ring"]["properties"]["model"]["const"] == "ring");
  CHECK(j["$defs"]["profile.scope.ring"]["additionalProperties"] == false);
  CHECK_FALSE(j["$defs"]["profile.scope.ring"]["properties"].contains("tree_busbw_GBps"));
  REQUIRE(test::run_capture(std::string(STEPSIM_BINARY) + " schema --profile --markdown", out) == 0);
  CHECK_THAT(out, Catch::StartsWith("# Hardware profile reference"));
}

TEST_CASE("Every shipped profile satisfies the printed JSON Schema, and the schema refuses what the parser refuses",
          "[config][hardware]") {
  // The schema is what editors check a profile against: it must accept every profile the
  // parser accepts (after includes) and reject an unknown key, a wrong type and a value out of
  // range, as the parser does.
  const Json schema = json_schema(profile_catalog(), "urn:stepsim:profile:1", "stepsim hardware profile");
  test::MiniValidator v(schema);
  for (const auto& e : fs::directory_iterator(kRoot + "/configs/hardware")) {
    if (e.path().extension() != ".json") continue;
    SourceMap src;
    const Json doc = load_with_includes(e.path(), src);
    INFO(e.path());
    CHECK(v.validate(doc) == std::vector<std::string>{});
  }
  CHECK(v.validate(scope_profile()).empty());
  CHECK(v.validate(topology_profile()).empty());
  Json bad_key = scope_profile(), bad_type = scope_profile(), bad_range = scope_profile(), bad_model = scope_profile();
  bad_key["collectives"]["intra_node"]["tree_busbw"] = 1;
  bad_type["compute"]["model_memory_bound_kernels"] = "yes";
  bad_range["host"]["launch_overhead_us"] = 2e6;
  bad_model["collectives"]["intra_node"] = {{"model", "ring"}, {"busbw_GBps", 100}, {"tree_busbw_GBps", 50}};
  for (const Json* d : {&bad_key, &bad_type, &bad_range, &bad_model}) {
    INFO(d->dump());
    CHECK_FALSE(v.validate(*d).empty());
    CHECK_THROWS_AS(parse(*d), InputError);
  }
}

// Catches: the per-element time of the non-vectorized path read but not written back (a fitted
// profile that loses it when saved), or written for profiles that never declared it.
TEST_CASE("elementwise_strided_ns_per_element is read, and written back only when declared", "[config][hardware]") {
  const HardwareProfile a800 = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json");
  CHECK(a800.compute.strided_element_ns == Approx(0.00457));
  const Json out = profile_to_json(a800);
  CHECK(out["compute"]["elementwise_strided_ns_per_element"].get<double>() == Approx(0.00457));
  const HardwareProfile h100 = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json");
  CHECK(h100.compute.strided_element_ns == 0);
  CHECK_FALSE(profile_to_json(h100)["compute"].contains("elementwise_strided_ns_per_element"));
  // The casting time likewise: absent from both, kept when set.
  CHECK(a800.compute.strided_cast_element_ns == 0);
  CHECK_FALSE(out["compute"].contains("elementwise_strided_cast_ns_per_element"));
  // The L2 and the streaming rate: the A800's 40 MiB and 1,700 GB/s, written back as read.
  CHECK(a800.compute.l2_bytes == 40.0 * 1024 * 1024);
  CHECK(a800.compute.dram_stream.gbps() == Approx(1700));
  CHECK(out["compute"]["l2_cache_MiB"].get<double>() == 40);
  CHECK(out["compute"]["dram_stream_GBps"].get<double>() == Approx(1700));
  const HardwareProfile a100_40 = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a100-sxm4-40gb-8x.json");
  CHECK(a100_40.compute.l2_bytes == 40.0 * 1024 * 1024);  // inherited
  CHECK(a100_40.compute.dram_stream.gbps() == Approx(1296.5));
  HardwareProfile fitted = a800;
  fitted.compute.strided_cast_element_ns = 0.00589;
  CHECK(profile_to_json(fitted)["compute"]["elementwise_strided_cast_ns_per_element"].get<double>() == Approx(0.00589));
}

TEST_CASE("A measured GEMM rate above its dtype's dense peak on the part it was measured on is an input error",
          "[config][hardware]") {
  Json doc = scope_profile();
  doc["/compute/gemm_table/0/tflops"_json_pointer] = 989;  // at the peak: a rate may reach it
  CHECK(error_of(doc) == "no error");
  doc["/compute/gemm_table/0/tflops"_json_pointer] = 1000;
  CHECK(error_of(doc) ==
        "keys.json: /compute/gemm_table/0/tflops: 1000: expected at most the bf16 dense peak of the part it was measured on, "
        "989.0 TFLOP/s (compute.peak_tflops): a measured rate above it did not time the GEMM kernel alone");
  // A table measured on a faster part of the same chip is held to that part's peak.
  doc["/compute/gemm_table_peak_bf16_tflops"_json_pointer] = 1100;
  CHECK(error_of(doc) == "no error");
  doc["/compute/gemm_table/0/dtype"_json_pointer] = "fp8";
  doc["/compute/peak_tflops/fp8"_json_pointer] = 900;  // 900 x 1100 / 989 = 1001.0
  CHECK(error_of(doc) == "no error");
  doc["/compute/peak_tflops/fp8"_json_pointer] = 890;  // 989.9
  CHECK_THAT(error_of(doc), Catch::StartsWith("keys.json: /compute/gemm_table/0/tflops: 1000: expected at most the fp8 dense "
                                              "peak of the part it was measured on, 989.9 TFLOP/s (compute.peak_tflops x "
                                              "gemm_table_peak_bf16_tflops / peak_tflops.bf16)"));
}

// Catches: the H100 profiles pricing a collective's NCCL kernel at another node's channel count.
// One 8-GPU H100 SXM node runs 24 ring channels (pytorch/torchtitan#1570's NCCL_DEBUG=INFO log of a
// one-node communicator: "Channel 00/24", nNodes 1; NVIDIA/nccl#1259: rings numbered past
// "Channel 22" on 8 GPUs of one node): twice its 12 ring-search channels (NCCL src/graph/connect.cc,
// nChannels * 2, capped at MAXCHANNELS 32), one CTA on one SM each. The 16 before came from a
// 3-node cluster (NVIDIA/nccl#1453) and the 8-link H800 (NVIDIA/nccl#892); the A800, with the
// H800's 8 NVLinks, keeps the 16 its own traces show.
TEST_CASE("An 8-GPU H100 node's collectives hold 24 SMs, its NCCL's 24 ring channels", "[config][hardware]") {
  for (const char* file : {"h100-sxm-8x.json", "h100-sxm-96gb.json"}) {
    const HardwareProfile h100 = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/" + file);
    INFO(file);
    CHECK(h100.contention.gpu_sms == 132);
    CHECK(h100.contention.collective_sms == 24);
  }
  const HardwareProfile h100 = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json");
  CHECK_THAT(h100.sources["contention.collective_sms"].get<std::string>(), Catch::Contains("pytorch/torchtitan#1570"));
  CHECK(load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json").contention.collective_sms == 16);
}
