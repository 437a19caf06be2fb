// Config files users already have: Hugging Face config.json and DeepSpeed configs.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "sim/analysis/run.hpp"
#include "sim/core/error.hpp"
#include "sim/config/foreign_configs.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "test_support.hpp"

using namespace stepsim;

namespace {
const std::string kSrc = STEPSIM_SOURCE_DIR;


nlohmann::json ds_experiment(const std::string& ds_file, nlohmann::json workload = {{"preset", "opt-1.3b"}, {"seq_len", 512}}) {
  return {{"workload", std::move(workload)},
          {"cluster", {{"profile", kSrc + "/configs/hardware/a800-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
          {"strategy", {{"deepspeed_config", ds_file}}}};
}

nlohmann::json dschat() {
  return nlohmann::json::parse(std::ifstream(kSrc + "/configs/examples/deepspeed/dschat-step1-opt-1.3b-zero2.ds_config.json"));
}
}  // namespace

TEST_CASE("HF config.json: Meta-Llama-3-8B's config gives the llama3-8b preset's model exactly", "[config][hf]") {
  std::string name;
  ModelDims d = dims_from_hf_config(kSrc + "/configs/models/hf/meta-llama-3-8b.config.json", name, 8192);
  const ModelDims& p = preset_dims("llama3-8b");
  CHECK(d.family == p.family);
  CHECK(d.hidden == p.hidden);
  CHECK(d.layers == p.layers);
  CHECK(d.heads == p.heads);
  CHECK(d.kv_heads == p.kv_heads);
  CHECK(d.ffn == p.ffn);
  CHECK(d.vocab == p.vocab);
  CHECK(d.tied_embeddings == p.tied_embeddings);
  // And the experiment using it predicts what the preset's does.
  Experiment a = load_experiment(kSrc + "/configs/examples/llama3-8b-hfconfig-fsdp2-8xh100.json");
  Experiment b = load_experiment(kSrc + "/configs/examples/llama3-8b-fsdp2-8xh100.json");
  CHECK(a.workload->numel() == b.workload->numel());
  CHECK(run_experiment(a).metrics.overlap.step_time == run_experiment(b).metrics.overlap.step_time);
}

TEST_CASE("HF config.json: OPT keeps its 2 extra position rows; unknown families and unmodelled features are named",
          "[config][hf]") {
  const test::TempDir dir;
  // facebook/opt-1.3b: max_position_embeddings 2048 -> a 2050-row table (OPTLearnedPositionalEmbedding offset 2).
  nlohmann::json opt{{"model_type", "opt"},   {"hidden_size", 2048},  {"num_hidden_layers", 24}, {"num_attention_heads", 32},
                     {"ffn_dim", 8192},       {"vocab_size", 50272},  {"max_position_embeddings", 2048},
                     {"word_embed_proj_dim", 2048}, {"do_layer_norm_before", true}, {"activation_function", "relu"}};
  std::string name;
  ModelDims d = dims_from_hf_config(dir.write_json("opt.json", opt), name, 512);
  CHECK(d.max_positions == preset_dims("opt-1.3b").max_positions);
  CHECK(d.tied_embeddings);
  opt["word_embed_proj_dim"] = 512;  // facebook/opt-350m
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("opt350.json", opt), name, 512),
                    Catch::Contains("opt350.json: /word_embed_proj_dim: 512") && Catch::Contains("not modelled"));
  nlohmann::json mixtral{{"model_type", "mixtral"}, {"hidden_size", 4096}};
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("mixtral.json", mixtral), name, 512),
                    Catch::Contains("/model_type: \"mixtral\"") && Catch::Contains("llama, mistral, qwen2"));
  // Mistral v0.1: a 4096-token sliding window; fine at 4096, not modelled beyond.
  nlohmann::json mistral{{"model_type", "mistral"}, {"hidden_size", 4096},   {"num_hidden_layers", 32},
                         {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"intermediate_size", 14336},
                         {"vocab_size", 32000},        {"sliding_window", 4096}};
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("mistral.json", mistral), name, 4096));
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("mistral.json", mistral), name, 8192), Catch::Contains("/sliding_window"));
}

TEST_CASE("HF config.json: a sliding window is refused only where transformers applies it", "[config][hf]") {
  // stepsim models full causal attention only; it never changes attention cost for a window, so
  // a window shorter than seq_len must be refused where transformers uses it and accepted where
  // transformers runs full attention.
  test::TempDir dir;
  std::string name;
  nlohmann::json qwen{{"model_type", "qwen2"}, {"hidden_size", 3584}, {"num_hidden_layers", 28}, {"num_attention_heads", 28},
                      {"num_key_value_heads", 4},  {"intermediate_size", 18944}, {"vocab_size", 152064}, {"sliding_window", 4096}};
  // Qwen2Config's use_sliding_window defaults to False (configuration_qwen2.py:74) and
  // __post_init__ then drops the window (:84): no use_sliding_window key means full attention,
  // so seq_len 8192 > 4096 is accepted (before the fix: refused, /sliding_window).
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 8192));
  // use_sliding_window true with the default max_window_layers 28 on 28 layers: no layer
  // slides (:88-94, layers i >= 28): still full attention.
  qwen["use_sliding_window"] = true;
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 8192));
  // max_window_layers 0 is allowed (every layer slides), a negative count is not.
  qwen["max_window_layers"] = -1;
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 8192),
                    Catch::Contains("/max_window_layers: -1") && Catch::Contains("a non-negative integer"));
  // Layers 4..27 slide over 4096 tokens: refused at 8192, fine at 4096.
  qwen["max_window_layers"] = 4;
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 8192),
                    Catch::Contains("qwen2.json: /sliding_window: 4096") && Catch::Contains("not modelled"));
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 4096));
  // No sliding_window key: Qwen2Config's default 4096 (:75) applies.
  qwen.erase("sliding_window");
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 8192),
                    Catch::Contains("/sliding_window") && Catch::Contains("qwen2's default 4096"));
  // null: no window.
  qwen["sliding_window"] = nullptr;
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 8192));
  // An explicit layer_types decides instead of max_window_layers.
  qwen["sliding_window"] = 4096;
  qwen["layer_types"] = std::vector<std::string>(28, "full_attention");
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 8192));
  qwen["layer_types"][27] = "sliding_attention";
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 8192), Catch::Contains("/sliding_window"));
  // The same config with use_sliding_window false: full attention whatever the other keys say.
  qwen["use_sliding_window"] = false;
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("qwen2.json", qwen), name, 8192));

  // Mistral has no use_sliding_window (MistralConfig.__init__): its window applies on every
  // layer, and an absent sliding_window is MistralConfig's default 4096.
  nlohmann::json mistral{{"model_type", "mistral"}, {"hidden_size", 4096},   {"num_hidden_layers", 32},
                         {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"intermediate_size", 14336},
                         {"vocab_size", 32000}};
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("mistral.json", mistral), name, 4096));
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("mistral.json", mistral), name, 8192),
                    Catch::Contains("/sliding_window") && Catch::Contains("mistral's default 4096"));
  mistral["use_sliding_window"] = false;  // not a MistralConfig field: no effect
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("mistral.json", mistral), name, 8192), Catch::Contains("/sliding_window"));
  mistral["sliding_window"] = nullptr;    // Mistral v0.2+: no window
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("mistral.json", mistral), name, 8192));
}

TEST_CASE("DeepSpeed config: DeepSpeed-Chat's step-1 config predicts exactly what the equivalent experiment does",
          "[config][deepspeed]") {
  Experiment from_ds = load_experiment(kSrc + "/configs/examples/opt-1.3b-zero2-8xa800-dsconfig.json");
  Experiment written = load_experiment(kSrc + "/configs/examples/opt-1.3b-zero2-8xa800.json");
  // train_batch_size 64 = micro 8 x accumulation 1 x 8 GPUs; bfloat16 enabled; stage 2 with overlap_comm.
  CHECK(from_ds.workload->micro_batch == 8);
  CHECK(from_ds.training.grad_accum == 1);
  CHECK(from_ds.workload->dtype == Dtype::BF16);
  CHECK(from_ds.strategy->effective_config() == written.strategy->effective_config());
  CHECK(run_experiment(from_ds).metrics.overlap.step_time == run_experiment(written).metrics.overlap.step_time);
}

TEST_CASE("DeepSpeed config: an enabled tensorboard, wandb, csv_monitor or comet block turns the monitor on",
          "[config][deepspeed][monitor]") {
  // runtime/config.py get_monitor_config reads these four blocks; each "enabled" defaults to false.
  const test::TempDir dir;
  auto monitor_of = [&](const nlohmann::json& ds) {
    return test::experiment_from_doc(ds_experiment(dir.write_json("m.json", ds))).strategy->effective_config()["monitor"];
  };
  nlohmann::json ds = dschat();
  CHECK(monitor_of(ds) == true);  // DeepSpeed-Chat's run_1.3b.sh: --enable_tensorboard
  ds["tensorboard"]["enabled"] = false;
  CHECK(monitor_of(ds) == false);
  ds["wandb"] = {{"enabled", true}, {"project", "x"}};
  CHECK(monitor_of(ds) == true);
  ds.erase("wandb");
  ds["csv_monitor"] = {{"output_path", "csv"}};  // no "enabled": off
  CHECK(monitor_of(ds) == false);
  ds["tensorboard"]["enabled"] = "yes";
  CHECK_THROWS_WITH(monitor_of(ds), Catch::Contains("m.json: /tensorboard/enabled: \"yes\"") && Catch::Contains("true or false"));
  // The experiment's own key agrees or is named with the file's.
  ds["tensorboard"]["enabled"] = true;
  nlohmann::json doc = ds_experiment(dir.write_json("m.json", ds));
  doc["strategy"]["monitor"] = false;
  CHECK_THROWS_WITH(test::experiment_from_doc(doc), Catch::Contains("/strategy/monitor: false") && Catch::Contains("/tensorboard/enabled"));
}

TEST_CASE("DeepSpeed config: the batch triangle, HF 'auto' values, and one-line errors for what is not modelled",
          "[config][deepspeed]") {
  const test::TempDir dir;
  // DeepSpeed derives gradient_accumulation_steps = 64 / (4 x 8) = 2.
  nlohmann::json ds = dschat();
  ds["train_micro_batch_size_per_gpu"] = 4;
  Experiment e = test::experiment_from_doc(ds_experiment(dir.write_json("tri.json", ds)));
  CHECK(e.workload->micro_batch == 4);
  CHECK(e.training.grad_accum == 2);
  // "auto" bucket sizes as the HF Trainer sets them: hidden^2 = 2048^2 elements for OPT-1.3B.
  ds = dschat();
  ds["zero_optimization"]["reduce_bucket_size"] = "auto";
  e = test::experiment_from_doc(ds_experiment(dir.write_json("auto.json", ds)));
  CHECK(e.strategy->effective_config()["reduce_bucket_size"] == 2048 * 2048);

  auto error_of = [](const nlohmann::json& doc) {
    try {
      test::experiment_from_doc(doc);
    } catch (const InputError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  ds = dschat();
  ds["train_batch_size"] = 60;  // not a multiple of micro 8 x 8 GPUs
  CHECK_THAT(error_of(ds_experiment(dir.write_json("bad-batch.json", ds))),
             Catch::Contains("bad-batch.json: /train_batch_size: 60") && Catch::Contains("micro batch x world size (64)"));
  ds = dschat();
  ds["zero_optimization"]["offload_optimizer"] = {{"device", "cpu"}};
  CHECK_THAT(error_of(ds_experiment(dir.write_json("offload.json", ds))),
             Catch::Contains("offload.json: /zero_optimization/offload_optimizer") && Catch::Contains("offload is not modelled"));
  ds = dschat();
  ds["pipeline_parallel_size"] = 2;
  CHECK_THAT(error_of(ds_experiment(dir.write_json("unknown.json", ds))),
             Catch::Contains("unknown.json: /pipeline_parallel_size: 2") && Catch::Contains("unknown key"));
  // The experiment and the DeepSpeed file disagree: both are named.
  nlohmann::json doc = ds_experiment(dir.write_json("conflict.json", dschat()));
  doc["workload"]["micro_batch"] = 2;
  CHECK_THAT(error_of(doc), Catch::Contains("/workload/micro_batch: 2") && Catch::Contains("conflict.json") &&
                                Catch::Contains("/train_micro_batch_size_per_gpu"));
  doc = ds_experiment(dir.write_json("framework.json", dschat()));
  doc["strategy"]["framework"] = "fsdp1";
  CHECK_THAT(error_of(doc), Catch::Contains("/strategy/framework") && Catch::Contains("deepspeed_config"));
}

// Catches: a DeepSpeed config resolved the HF Trainer's way predicted with DeepSpeed-Chat's loop
// (the logits kept through backward: +3.9 GiB on Llama-3-8B at 8192 tokens).
TEST_CASE("DeepSpeed config: \"auto\" values imply the HF Trainer's loop, whose compute_loss keeps no logits",
          "[config][deepspeed][memory]") {
  const test::TempDir dir;
  // DeepSpeed-Chat's step-1 config has no "auto": its own loop keeps `outputs` (main.py), the
  // bf16 logits of 8 x 512 tokens x OPT's 50,272 vocabulary: 8 x 512 x 50272 x 2 = 411,828,224 B.
  Experiment chat = test::experiment_from_doc(ds_experiment(dir.write_json("chat.json", dschat())));
  CHECK(effective_workload(*chat.workload)["training_loop"] == "hf_script");
  CHECK(chat.workload->kept_output.count == 8LL * 512 * 50272 * 2);
  // "auto" is filled by transformers' HfTrainerDeepSpeedConfig (integrations/deepspeed.py), so
  // the loop is Trainer.training_step's: compute_loss returns the loss only
  // (src/transformers/trainer.py), the logits die with the forward.
  nlohmann::json ds = dschat();
  ds["zero_optimization"]["reduce_bucket_size"] = "auto";
  Experiment trainer = test::experiment_from_doc(ds_experiment(dir.write_json("auto.json", ds)));
  CHECK(effective_workload(*trainer.workload)["training_loop"] == "hf_trainer");
  CHECK(effective_workload(*trainer.workload)["loop_keeps_output"] == false);
  CHECK(trainer.workload->kept_output.count == 0);
  // A loop the experiment names wins (Accelerate's own loop resolves "auto" too).
  Experiment accelerate = test::experiment_from_doc(
      ds_experiment(dir.write_json("auto2.json", ds), {{"preset", "opt-1.3b"}, {"seq_len", 512}, {"training_loop", "hf_script"}}));
  CHECK(accelerate.workload->kept_output.count == 8LL * 512 * 50272 * 2);
}
