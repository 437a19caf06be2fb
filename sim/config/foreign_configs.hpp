#pragma once
// Config files users already have, read into the experiment's own keys:
//  - a Hugging Face model config.json (`"workload": {"model": {"hf_config": "config.json"}}`):
//    Llama, Mistral, Qwen2, OPT, GPT-2, GPT-NeoX and MPT families, by `model_type`;
//  - a DeepSpeed config (`"strategy": {"deepspeed_config": "ds_config.json"}`): zero_optimization,
//    bf16/fp16, the batch triangle (train_batch_size, train_micro_batch_size_per_gpu,
//    gradient_accumulation_steps) and "auto" values resolved as the HF Trainer resolves them.
// The keys read from both are declared once in foreign_keys.cpp (what each becomes, which values
// are accepted): every key of a DeepSpeed config is declared (translated, checked, accepted) or
// rejected in one line naming it; a config.json key not declared is ignored (foreign_keys.hpp
// says why). Errors name the foreign file and its JSON path.

#include <cstdint>
#include <filesystem>
#include <string>

#include "sim/config/json_reader.hpp"
#include "sim/workload/workload.hpp"

namespace stepsim {

// Model dimensions from a Hugging Face config.json. Throws InputError naming the file, the JSON
// path and what was expected (an unknown model_type, an architecture feature stepsim does not
// model, such as mixture-of-experts, OPT's word_embed_proj_dim projections, or a sliding window
// shorter than `seq_len`).
ModelDims dims_from_hf_config(const std::filesystem::path& file, std::string& model_name, std::int64_t seq_len);
// The same for a config already in memory (the Python API reads a module's `config`); `file`
// names it in messages.
ModelDims dims_from_hf_config_json(const nlohmann::json& doc, const std::filesystem::path& file, std::string& model_name,
                                   std::int64_t seq_len);

// When doc/strategy names a "deepspeed_config", replaces it by the equivalent experiment keys:
// strategy {framework: zero, stage, buckets, overlap_comm, ...}, workload {micro_batch, dtype},
// training {grad_accum, optimizer}. A key the experiment already sets with another value is an
// error naming both. `sources` gains the DeepSpeed file for the paths it wrote.
void expand_deepspeed_config(Json& doc, SourceMap& sources);

}  // namespace stepsim
