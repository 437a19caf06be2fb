#include "sim/core/units.hpp"

#include <stdexcept>

namespace stepsim {

std::string to_string(Dtype d) {
  switch (d) {
    case Dtype::FP32: return "fp32";
    case Dtype::TF32: return "tf32";
    case Dtype::BF16: return "bf16";
    case Dtype::FP16: return "fp16";
    case Dtype::FP8: return "fp8";
  }
  return "fp32";
}

Dtype parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "float32") return Dtype::FP32;
  if (name == "tf32") return Dtype::TF32;
  if (name == "bf16" || name == "bfloat16") return Dtype::BF16;
  if (name == "fp16" || name == "float16") return Dtype::FP16;
  if (name == "fp8" || name == "fp8_e4m3") return Dtype::FP8;
  throw std::invalid_argument("one of fp32, tf32, bf16, fp16, fp8");
}

}  // namespace stepsim
