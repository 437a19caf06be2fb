#include "sim/core/error.hpp"
#include "sim/strategies/strategy.hpp"
#include "sim/strategies/strategy_keys.hpp"

namespace stepsim {

std::unique_ptr<Strategy> parse_strategy(ObjectReader& r, const Experiment& e) {
  // Data parallelism only: a framework of another kind (megatron, tensor/pipeline parallel)
  // names the README's table of what is not modelled.
  if (r.has("framework") && r.raw("framework").is_string()) {
    const std::string v = r.raw("framework").get<std::string>();
    if (v != "ddp" && v != "fsdp1" && v != "fsdp2" && v != "zero")
      r.fail("framework", "one of ddp, fsdp1, fsdp2, zero (data parallelism; tensor, pipeline and context parallelism: " +
                              not_modelled("such a framework") + ")");
  }
  std::string fw = r.choice("framework", {"ddp", "fsdp1", "fsdp2", "zero"});
  // torch.optim.Muon orthogonalizes each parameter as a whole 2-D matrix (it refuses any other
  // shape), and torch.optim.Adafactor factors each 2-D parameter's second moment over its rows and
  // columns: FSDP1's flat shards are 1-D, FSDP2's Shard(0) DTensors would redistribute in every
  // matmul and norm, DeepSpeed's partitions are flat. Only DDP's replicas are whole matrices.
  const Optimizer opt = e.training.optimizer;
  if ((opt == Optimizer::Muon || opt == Optimizer::Adafactor || opt == Optimizer::NorMuon) && fw != "ddp") {
    const std::string name = to_string(opt);
    throw_input_error(r.sources().file_for("/training/optimizer"), "/training/optimizer", nlohmann::json(name),
                      "adamw, sgd or none with " + fw + " (" + name + " needs each parameter whole, as a 2-D matrix: " +
                          not_modelled(name + " on sharded parameters") + ")");
  }
  // bitsandbytes' 8-bit step takes each tensor as a plain CUDA tensor: DDP's replicas, FSDP1's
  // flat parameters (this rank's shard of each); over FSDP2's DTensors (its custom ops have no
  // sharding rule) or DeepSpeed's partitions it is not modelled.
  if (opt == Optimizer::AdamW8bit && fw != "ddp" && fw != "fsdp1")
    throw_input_error(r.sources().file_for("/training/optimizer"), "/training/optimizer", nlohmann::json("adamw8bit"),
                      "adamw, sgd, lion or none with " + fw + " (bitsandbytes' AdamW8bit is modelled with ddp and fsdp1: " +
                          not_modelled("adamw8bit over DTensors or DeepSpeed's partitions") + ")");
  // From here the object's keys are the framework's (strategy_keys.cpp): an unknown key's
  // error lists all of them.
  r.declare(*strategy_keys::for_framework(fw));
  std::unique_ptr<Strategy> s;
  if (fw == "ddp") s = parse_ddp(r, e);
  else if (fw == "fsdp1") s = parse_fsdp1(r, e);
  else if (fw == "fsdp2") s = parse_fsdp2(r, e);
  else s = parse_zero(r, e);
  r.finish();
  return s;
}

}  // namespace stepsim
