// Name recognition for trace events: NCCL kernel names, c10d op names, dtype spellings, and the
// exact microsecond-text -> nanosecond conversion.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <span>
#include <string_view>

#include <fmt/format.h>

#include "trace/kineto_trace.hpp"
#include "sim/core/error.hpp"
#include "sim/hardware/collective_model.hpp"

namespace stepsim::trace {

std::string to_string(TraceCollective k) {
  switch (k) {
    case TraceCollective::AllReduce: return "all_reduce";
    case TraceCollective::AllGather: return "all_gather";
    case TraceCollective::ReduceScatter: return "reduce_scatter";
    case TraceCollective::Broadcast: return "broadcast";
    case TraceCollective::Reduce: return "reduce";
    case TraceCollective::AllToAll: return "all_to_all";
    case TraceCollective::SendRecv: return "send_recv";
    case TraceCollective::Unknown: return "unknown";
  }
  return "unknown";
}

static std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_nccl_kernel_name(const std::string& name) {
  // ncclKernel_* (NCCL <= 2.18), ncclDevKernel_* (2.19+); "void ncclKernel..." in some builds.
  return name.find("ncclKernel") != std::string::npos || name.find("ncclDevKernel") != std::string::npos;
}

bool is_deepep_comm_kernel_name(const std::string& name) {
  for (const char* ns : {"deep_ep::", "dpsk::ep::"}) {
    const std::size_t at = name.find(ns);
    if (at == std::string::npos) continue;
    const std::string rest = name.substr(at);
    for (const char* k : {"dispatch<", "combine<", "notify_dispatch<", "cached_notify<", "notify_combine<", "dispatch(", "combine(",
                          "_ll<", "_ll("})
      if (rest.find(k) != std::string::npos && rest.find("get_dispatch_layout") == std::string::npos) return true;
  }
  return false;
}

bool is_comm_kernel_name(const std::string& name) { return is_nccl_kernel_name(name) || is_deepep_comm_kernel_name(name); }

TraceCollective collective_from_kernel_name(const std::string& name) {
  // DeepEP's dispatch and combine (and their notify kernels) are expert-parallel all-to-alls.
  if (is_deepep_comm_kernel_name(name)) return TraceCollective::AllToAll;
  // Longest names first: "AllReduce" contains "Reduce", "ReduceScatter" starts with "Reduce".
  if (name.find("AllReduce") != std::string::npos) return TraceCollective::AllReduce;
  if (name.find("AllGather") != std::string::npos) return TraceCollective::AllGather;
  if (name.find("ReduceScatter") != std::string::npos) return TraceCollective::ReduceScatter;
  if (name.find("Broadcast") != std::string::npos) return TraceCollective::Broadcast;
  if (name.find("AllToAll") != std::string::npos) return TraceCollective::AllToAll;
  if (name.find("SendRecv") != std::string::npos || name.find("_Send") != std::string::npos ||
      name.find("_Recv") != std::string::npos)
    return TraceCollective::SendRecv;
  if (name.find("Reduce") != std::string::npos) return TraceCollective::Reduce;
  return TraceCollective::Unknown;
}

TraceCollective collective_from_op_name(const std::string& raw) {
  std::string n = lower(raw);
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());  // "_all_gather_base" -> "allgatherbase"
  if (n.rfind("nccl:", 0) == 0) n = n.substr(5);
  if (n.find("allreduce") != std::string::npos) return TraceCollective::AllReduce;
  if (n.find("allgather") != std::string::npos) return TraceCollective::AllGather;
  if (n.find("reducescatter") != std::string::npos) return TraceCollective::ReduceScatter;
  if (n.find("broadcast") != std::string::npos) return TraceCollective::Broadcast;
  if (n.find("alltoall") != std::string::npos) return TraceCollective::AllToAll;
  if (n == "send" || n == "recv" || n == "sendrecv" || n == "p2p") return TraceCollective::SendRecv;
  if (n == "reduce") return TraceCollective::Reduce;
  return TraceCollective::Unknown;
}

std::optional<CollectiveKind> to_collective_kind(TraceCollective k) {
  switch (k) {
    case TraceCollective::AllReduce: return CollectiveKind::AllReduce;
    case TraceCollective::AllGather: return CollectiveKind::AllGather;
    case TraceCollective::ReduceScatter: return CollectiveKind::ReduceScatter;
    case TraceCollective::Broadcast: return CollectiveKind::Broadcast;
    case TraceCollective::Reduce: return CollectiveKind::Reduce;
    case TraceCollective::AllToAll: return CollectiveKind::AllToAll;
    default: return std::nullopt;
  }
}

double collective_busbw_factor(TraceCollective k, int ranks) {
  auto kind = to_collective_kind(k);
  if (!kind || ranks < 1) return 1.0;
  return busbw_factor(*kind, ranks);
}

std::string dtype_from_kernel_name(const std::string& name) {
  std::string base = name.substr(0, name.find('('));
  for (const char* op : {"_Sum_", "_Prod_", "_Max_", "_Min_", "_Avg_", "_PreMulSum_", "_SumPostDiv_"}) {
    auto p = base.find(op);
    if (p == std::string::npos) continue;
    std::string tok = base.substr(p + std::string(op).size());
    // New style "bf16_RING_LL": the dtype ends at the algorithm; old style "int8_t" keeps its "_t".
    for (const char* algo : {"_RING", "_TREE", "_COLLNET", "_NVLS", "_PAT"}) {
      auto q = tok.find(algo);
      if (q != std::string::npos) tok = tok.substr(0, q);
    }
    return tok;
  }
  return "";
}

int dtype_bytes_from_name(const std::string& raw) {
  std::string n = lower(raw);
  if (n.rfind("c10::", 0) == 0) n = n.substr(5);
  if (n == "float" || n == "float32" || n == "f32" || n == "fp32" || n == "int" || n == "int32" || n == "i32" ||
      n == "int32_t" || n == "uint32" || n == "u32" || n == "uint32_t" || n == "unsigned int")
    return 4;
  if (n == "bfloat16" || n == "bf16" || n == "half" || n == "f16" || n == "fp16" || n == "float16" || n == "short" ||
      n == "int16" || n == "int16_t")
    return 2;
  if (n == "double" || n == "float64" || n == "f64" || n == "long" || n == "long int" || n == "int64" ||
      n == "i64" || n == "int64_t" || n == "long long" || n == "uint64" || n == "u64" || n == "uint64_t")
    return 8;
  if (n == "int8_t" || n == "int8" || n == "i8" || n == "uint8" || n == "u8" || n == "uint8_t" || n == "char" ||
      n == "signed char" || n == "unsigned char" || n == "byte" || n == "bool" || n.rfind("float8", 0) == 0 ||
      n.rfind("f8", 0) == 0 || n.rfind("fp8", 0) == 0)
    return 1;
  return 0;
}

namespace {

constexpr std::string_view kComparisons[] = {"eq", "ne", "lt", "le", "gt", "ge"};
constexpr std::string_view kReductions[] = {"sum", "mean", "amax", "amin", "linalg_vector_norm", "norm"};
constexpr std::string_view kElementwise[] = {
    "add",     "sub",          "mul",       "div",           "where",          "maximum",     "minimum",
    "masked_fill", "relu",     "gelu",      "gelu_backward", "silu",           "silu_backward", "threshold_backward",
    "native_dropout_backward", "clamp",     "clamp_min",     "clamp_max",      "neg",         "exp",
    "rsqrt",   "sqrt",         "pow",       "tanh",          "tanh_backward",  "sigmoid",     "sigmoid_backward",
    "addcmul", "addcdiv",      "lerp",      "reciprocal",    "abs",            "copy",        "fill",
    "zero",    "native_dropout", "_softmax", "_log_softmax", "_softmax_backward_data",       "native_layer_norm"};

// Ops whose every overload takes one tensor, or two, besides an out= destination.
constexpr std::string_view kUnary[] = {"relu", "gelu", "silu", "neg", "exp", "rsqrt", "sqrt",
                                       "tanh", "sigmoid", "reciprocal", "abs"};
constexpr std::string_view kBinary[] = {"add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt",
                                        "ge", "gelu_backward", "silu_backward", "threshold_backward", "tanh_backward",
                                        "sigmoid_backward"};

bool in(std::string_view base, std::span<const std::string_view> names) {
  return std::find(names.begin(), names.end(), base) != names.end();
}

// "aten::add_" -> ("add", true); not an aten op -> ("", false).
std::pair<std::string_view, bool> aten_base(std::string_view name) {
  if (!name.starts_with("aten::")) return {{}, false};
  std::string_view b = name.substr(6);
  const bool inplace = b.size() > 1 && b.back() == '_' && b[b.size() - 2] != '_';
  if (inplace) b.remove_suffix(1);
  return {b, inplace};
}

bool memory_bound_base(std::string_view base) {
  return !base.empty() && (in(base, kComparisons) || in(base, kReductions) || in(base, kElementwise));
}

}  // namespace

std::optional<std::int64_t> dims_numel(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (std::int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > (std::int64_t{1} << 57)) return std::nullopt;
  return n;
}

bool is_inductor_reduction_name(std::string_view name) {
  return name.starts_with("triton_per_") || name.starts_with("triton_red_");
}
bool is_inductor_kernel_name(std::string_view name) { return name.starts_with("triton_poi_") || is_inductor_reduction_name(name); }

bool is_memory_bound_op_name(std::string_view name) {
  return memory_bound_base(aten_base(name).first) || is_inductor_kernel_name(name);
}

std::optional<MemoryTraffic> memory_op_traffic(std::string_view name, const std::vector<std::vector<std::int64_t>>& dims,
                                               const std::vector<std::string_view>& types) {
  const auto [base, inplace] = aten_base(name);
  const bool inductor = is_inductor_kernel_name(name);
  if ((!inductor && !memory_bound_base(base)) || dims.size() != types.size()) return std::nullopt;
  struct Input {
    std::int64_t numel;
    int elem;
  };
  std::vector<Input> t;  // tensor inputs, in order
  std::string_view first_type;
  bool mixed = false;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (types[i].empty() || types[i] == "Scalar" || types[i] == "ScalarList" || types[i] == "TensorList") continue;
    // A bool input is a mask or condition, which masked_fill's and where's functors take as bool.
    if (types[i] != "bool") {
      if (first_type.empty())
        first_type = types[i];
      else if (types[i] != first_type && canonical_dtype(std::string(types[i])) != canonical_dtype(std::string(first_type)))
        mixed = true;
    }
    const int elem = dtype_bytes_from_name(std::string(types[i]));
    if (elem == 0) return std::nullopt;
    // A trace's shapes are input: a tensor no real one is, or ops moving 2^61 bytes, say nothing.
    const auto n = dims_numel(dims[i]);
    if (!n) return std::nullopt;
    t.push_back(Input{*n, elem});
  }
  if (t.empty() || t.size() > 64) return std::nullopt;
  auto bytes = [](const Input& x) { return x.numel * x.elem; };  // < 2^60: numel < 2^57, elem <= 8
  if (inductor) {  // its arguments, each read or written once
    MemoryTraffic out;
    for (const auto& x : t) {
      // 64 arguments of 2^60 bytes would overflow: a sum past 2^61 says nothing, as below.
      if (__builtin_add_overflow(out.bytes, bytes(x), &out.bytes) || out.bytes > (std::int64_t{1} << 61)) return std::nullopt;
      out.elements = std::max(out.elements, x.numel);
      out.largest = std::max(out.largest, bytes(x));
    }
    return out;
  }
  // Its largest tensor: an input's (or out= destination's) bytes, or the output's (the elements it
  // writes at the widest input dtype), never more than the bytes it moves.
  std::int64_t largest = 0, widest = 0;
  for (const auto& x : t) largest = std::max(largest, bytes(x)), widest = std::max<std::int64_t>(widest, x.elem);
  auto traffic = [&](std::int64_t moved, std::int64_t elements, bool casts) {
    return MemoryTraffic{moved, elements, casts, std::min(moved, std::max(largest, elements * widest))};
  };
  // An out= overload (torch.mul(a, b, out=c)) lists its destination after the op's own tensors:
  // one tensor more than the op takes, of the output's elements. It is written, not read.
  std::optional<Input> out;
  const std::size_t arity = in(base, kUnary) ? 1 : in(base, kBinary) ? 2 : 0;
  if (!inplace && arity > 0 && t.size() == arity + 1) {
    std::int64_t output = 0;
    for (std::size_t i = 0; i < arity; ++i) output = std::max(output, t[i].numel);
    if (t.back().numel == output) out = t.back(), t.pop_back();
  }
  std::int64_t read = 0;
  for (const auto& x : t)
    if (__builtin_add_overflow(read, bytes(x), &read) || read > (std::int64_t{1} << 61)) return std::nullopt;
  if (out) return traffic(read + bytes(*out), out->numel, mixed);
  if (in(base, kReductions)) return traffic(bytes(t[0]), t[0].numel, false);
  if (base == "copy") {
    if (t.size() < 2) return std::nullopt;
    return traffic(bytes(t[0]) + bytes(t[1]), t[0].numel, false);
  }
  if (base == "fill" || base == "zero") return traffic(bytes(t[0]), t[0].numel, false);
  if (base == "native_dropout") return traffic(bytes(t[0]) * 2 + t[0].numel, t[0].numel, false);
  // Writes a tensor like the first input: softmax and LayerNorm forward, the softmax backward
  // (like the gradient), an in-place op (its target).
  if (base == "_softmax" || base == "_log_softmax" || base == "native_layer_norm" || base == "_softmax_backward_data" ||
      inplace)
    return traffic(read + bytes(t[0]), t[0].numel, mixed);
  const Input* big = &t[0];
  for (const auto& x : t)
    if (x.numel > big->numel || (x.numel == big->numel && big->elem == 1 && x.elem > 1)) big = &x;
  const int out_elem = in(base, kComparisons) ? 1 : big->elem;
  return traffic(read + big->numel * out_elem, big->numel, mixed);
}

std::optional<std::int64_t> memory_op_bytes(std::string_view name, const std::vector<std::vector<std::int64_t>>& dims,
                                            const std::vector<std::string_view>& types) {
  if (auto t = memory_op_traffic(name, dims, types)) return t->bytes;
  return std::nullopt;
}

std::string canonical_dtype(const std::string& raw) {
  std::string n = lower(raw);
  if (n.rfind("c10::", 0) == 0) n = n.substr(5);
  if (n == "bfloat16" || n == "bf16") return "bf16";
  if (n == "half" || n == "f16" || n == "fp16" || n == "float16") return "fp16";
  if (n == "float" || n == "float32" || n == "f32" || n == "fp32") return "fp32";
  if (n == "double" || n == "float64" || n == "f64") return "fp64";
  if (n == "long" || n == "long int" || n == "int64" || n == "int64_t" || n == "i64") return "int64";
  if (n == "int" || n == "int32" || n == "int32_t" || n == "i32") return "int32";
  if (n == "int8" || n == "int8_t" || n == "i8" || n == "char" || n == "signed char") return "int8";
  if (n == "uint8" || n == "uint8_t" || n == "u8" || n == "unsigned char" || n == "byte") return "uint8";
  return raw;
}

Time parse_us_text(std::string_view text) {
  // Kineto prints microseconds, with up to 3 decimals in newer versions; at 1.7e15 us a double
  // cannot hold the nanoseconds, so integer and fraction are read as decimal digits. The text
  // ends at its end or at a NUL character. A time beyond 2^62 ns (146 years) is no real trace
  // timestamp: an input error (the reader adds the file), never a wrapped value.
  auto too_large = [&]() {
    return InputError(fmt::format("\"{}\" us: expected a time within 2^62 ns (146 years)", text.substr(0, 40)));
  };
  std::size_t i = 0;
  auto at = [&](std::size_t k) { return k < text.size() ? text[k] : '\0'; };
  bool neg = false;
  if (at(i) == '-') { neg = true; ++i; }
  std::int64_t whole = 0;
  bool digits = false, overflow = false;
  while (at(i) >= '0' && at(i) <= '9') {
    overflow = overflow || __builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, at(i) - '0', &whole);
    ++i;
    digits = true;
  }
  std::int64_t frac_ns = 0;
  if (at(i) == '.') {
    ++i;
    int k = 0;
    while (at(i) >= '0' && at(i) <= '9') {
      if (k < 3) frac_ns = frac_ns * 10 + (at(i) - '0');
      else if (k == 3 && at(i) >= '5') frac_ns += 1;  // round half up on the 4th decimal
      ++k;
      ++i;
    }
    for (; k < 3; ++k) frac_ns *= 10;
  }
  if (at(i) != '\0' || !digits) {
    // Exponent form or something odd: fall back to the double value.
    const double ns = std::strtod(std::string(text).c_str(), nullptr) * 1e3;
    if (!(std::fabs(ns) <= 4611686018427387904.0)) throw too_large();
    return Time{std::llround(ns)};
  }
  std::int64_t ns = 0;
  if (overflow || __builtin_mul_overflow(whole, 1000, &ns) || __builtin_add_overflow(ns, frac_ns, &ns) ||
      ns > (std::int64_t{1} << 62))
    throw too_large();
  return Time{neg ? -ns : ns};
}

}  // namespace stepsim::trace
