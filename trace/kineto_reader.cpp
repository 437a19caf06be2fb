// Streaming Kineto / Chrome trace reader. JsonStream (json_stream.hpp) scans the text in place;
// each trace event is one step: its fields go into reusable views and, when the event object
// closes, turn into at most one compact record (or none: python_function but DeepSpeed's monitor
// write, flow events and annotations are dropped; a cpu_op keeps only its name and span unless it is a step, a
// collective call, the optimizer, a backward node, a GEMM or an attention op). The JSON document is never built, and the "args" of
// an event whose record cannot use them (most of the bytes: python_function, cpu_op) are
// skipped without being decoded.

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "trace/gunzip.hpp"
#include "trace/json_stream.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/read_ahead.hpp"
#include "sim/core/data_dir.hpp"
#include "sim/core/error.hpp"
#include "sim/core/input_files.hpp"

namespace stepsim::trace {

namespace {

// Comparisons with literals, inlined (std::string_view's == calls memcmp with a run-time
// length; these run for every key and event).
template <std::size_t N>
bool eq(std::string_view s, const char (&lit)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}
template <std::size_t N>
bool starts_with(std::string_view s, const char (&prefix)[N]) {
  return s.size() >= N - 1 && std::memcmp(s.data(), prefix, N - 1) == 0;
}

// Keys of an event object, and of its "args", that a record can use. Matched on the decoded key
// by length first: this runs for every key of every event.
enum class EventKey { Other, Ph, Cat, Name, Pid, Tid, Ts, Dur, Args };

EventKey event_key(std::string_view k) {
  switch (k.size()) {
    case 2:
      if (eq(k, "ph")) return EventKey::Ph;
      if (eq(k, "ts")) return EventKey::Ts;
      break;
    case 3:
      if (eq(k, "cat")) return EventKey::Cat;
      if (eq(k, "pid")) return EventKey::Pid;
      if (eq(k, "tid")) return EventKey::Tid;
      if (eq(k, "dur")) return EventKey::Dur;
      break;
    case 4:
      if (eq(k, "name")) return EventKey::Name;
      if (eq(k, "args")) return EventKey::Args;
      break;
    default: break;
  }
  return EventKey::Other;
}

enum class ArgKey {
  Other, Stream, Correlation, Device, Bytes, InElems, OutElems, GroupSize, TotalAllocated, TotalReserved, Reserved, DeviceType, DeviceId,
  Total, Dtype, CollectiveName, GroupName, StepsimOp, StepsimCollective, Phase, InputDims, InputType, IssueNs, Addr, BlockBytes, Grid
};

ArgKey arg_key(std::string_view k) {
  switch (k.size()) {
    case 4:
      if (eq(k, "comm")) return ArgKey::GroupName;
      if (eq(k, "grid")) return ArgKey::Grid;
      if (eq(k, "Addr")) return ArgKey::Addr;
      break;
    case 5:
      if (eq(k, "bytes")) return ArgKey::Bytes;
      if (eq(k, "Bytes")) return ArgKey::BlockBytes;
      if (eq(k, "dtype")) return ArgKey::Dtype;
      if (eq(k, "phase")) return ArgKey::Phase;
      if (eq(k, "ranks")) return ArgKey::GroupSize;
      if (eq(k, "total")) return ArgKey::Total;
      break;
    case 6:
      if (eq(k, "stream")) return ArgKey::Stream;
      if (eq(k, "device")) return ArgKey::Device;
      break;
    case 8:
      if (eq(k, "issue_ns")) return ArgKey::IssueNs;
      if (eq(k, "reserved")) return ArgKey::Reserved;
      break;
    case 9:
      if (eq(k, "Device Id")) return ArgKey::DeviceId;
      break;
    case 10:
      if (eq(k, "Group size") || eq(k, "group_size")) return ArgKey::GroupSize;
      if (eq(k, "Input Dims")) return ArgKey::InputDims;
      if (eq(k, "Input type")) return ArgKey::InputType;
      if (eq(k, "stepsim_op")) return ArgKey::StepsimOp;
      if (eq(k, "collective")) return ArgKey::StepsimCollective;
      break;
    case 11:
      if (eq(k, "correlation")) return ArgKey::Correlation;
      if (eq(k, "Device Type")) return ArgKey::DeviceType;
      if (eq(k, "total_bytes")) return ArgKey::Total;
      break;
    case 13:
      if (eq(k, "In msg nelems")) return ArgKey::InElems;
      break;
    case 14:
      if (eq(k, "Out msg nelems")) return ArgKey::OutElems;
      if (eq(k, "Total Reserved")) return ArgKey::TotalReserved;
      break;
    case 15:
      if (eq(k, "Collective name")) return ArgKey::CollectiveName;
      if (eq(k, "Total Allocated")) return ArgKey::TotalAllocated;
      break;
    case 18:
      if (eq(k, "Process Group Name")) return ArgKey::GroupName;
      break;
    default: break;
  }
  return ArgKey::Other;
}

// A scalar as the event fields need it: integers exactly; float tokens and strings (Chrome
// traces may quote ts/dur) by their text, valid until the event's step ends.
struct Num {
  enum class Kind : std::uint8_t { Unset, Int, Float, Text };
  Kind kind = Kind::Unset;
  std::int64_t i = 0;
  std::string_view text;

  static Num of(const JsonNumber& n) { return n.is_int ? Num{Kind::Int, n.i, {}} : Num{Kind::Float, 0, n.text}; }
  bool set() const { return kind != Kind::Unset; }
  // A float rounds to the nearest integer; a string reads as 0.
  std::int64_t as_int() const {
    if (kind == Kind::Int) return i;
    if (kind == Kind::Float) return static_cast<std::int64_t>(std::llround(JsonNumber{false, 0, text}.to_double()));
    return 0;
  }
  Time as_us_time() const {
    if (kind != Kind::Int) return parse_us_text(text);
    std::int64_t ns = 0;
    if (__builtin_mul_overflow(i, 1000, &ns) || ns > (std::int64_t{1} << 62) || ns < -(std::int64_t{1} << 62))
      throw InputError(fmt::format("{} us: expected a time within 2^62 ns (146 years)", i));
    return Time{ns};
  }
};

// pid/tid are integers in Kineto but strings for the synthetic "Spans"/"Traces" rows.
struct Id {
  std::int64_t v = 0;
  void set_int(std::int64_t x) { v = x; }
  void set_str(std::string_view s) {
    v = static_cast<std::int64_t>(std::hash<std::string_view>{}(s) | (1ULL << 62));
  }
};

// Unsigned arithmetic: ids are hashes or arbitrary integers, and the product may wrap (defined).
std::int64_t fold_thread(Id pid, Id tid) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(pid.v) * 1000003u ^ static_cast<std::uint64_t>(tid.v));
}

// The fields of the current event. Views point into the JsonStream window (valid for the step).
struct EventFields {
  struct Scalars {
    std::string_view ph, cat, name;
    bool ph_seen = false, cat_seen = false, name_seen = false;
    bool args_skipped = false;
    Id pid, tid;
    Num ts, dur;
    // args
    Num stream, correlation, device, bytes, in_elems, out_elems, group_size, total_allocated, total_reserved, device_type,
        device_id, counter_total, counter_reserved, issue_ns, addr, block_bytes;
    std::int64_t counter_sum = 0;
    bool counter_any = false;
    std::string_view dtype, coll_name, pg_name, stepsim_op, stepsim_coll, phase;
  };
  Scalars s;
  std::vector<std::pair<std::string, Bytes>> counter_args;
  std::vector<std::vector<std::int64_t>> input_dims;
  std::vector<std::string_view> input_types;
  std::int64_t grid_ctas = 0;  // args.grid of a kernel: its CTAs (0 = not recorded)

  void clear() {
    s = Scalars{};
    counter_args.clear();
    input_dims.clear();
    input_types.clear();
    grid_ctas = 0;
  }
};

bool is_gemm_name(std::string_view n) {
  return eq(n, "aten::mm") || eq(n, "aten::addmm") || eq(n, "aten::bmm") || eq(n, "aten::baddbmm");
}

// The ops that launch a fused attention kernel: flash_attn's autograd functions (FlashAttnFunc,
// FlashAttnVarlenFunc, ...QKVPacked..., and their Backward nodes) and PyTorch sdpa's flash,
// memory-efficient and cuDNN ops with their backward.
bool is_attention_name(std::string_view n) {
  return starts_with(n, "FlashAttn") || starts_with(n, "aten::_scaled_dot_product_flash_attention") ||
         starts_with(n, "aten::_scaled_dot_product_efficient_attention") ||
         starts_with(n, "aten::_scaled_dot_product_cudnn_attention") || starts_with(n, "aten::_flash_attention_") ||
         starts_with(n, "aten::_efficient_attention_");
}

// DeepSpeed's monitor write as the profiler's Python tracer names it: the function of
// deepspeed/monitor/monitor.py (MonitorMaster.write_events), under any install prefix.
bool is_deepspeed_monitor_write(std::string_view n) {
  return n.find("deepspeed/monitor/monitor.py(") != std::string_view::npos && n.ends_with("): write_events");
}

// Whether the record finish_event() makes of an event with these ph/cat/name can depend on its
// "args" (conservatively true while one of them is not known yet). Must follow finish_event:
// without `fit_records`, a GEMM's, attention's or memory-bound op's shapes make no record.
bool args_may_matter(const EventFields::Scalars& e, bool fit_records) {
  if (!e.ph_seen) return true;
  if (eq(e.ph, "C")) return true;
  if (eq(e.ph, "i")) return !e.name_seen || eq(e.name, "[memory]");
  if (!eq(e.ph, "X")) return false;
  if (!e.cat_seen) return true;
  const std::string_view cat = e.cat;
  if (eq(cat, "kernel") || eq(cat, "Kernel") || eq(cat, "gpu_memcpy") || eq(cat, "Memcpy") || eq(cat, "gpu_memset") ||
      eq(cat, "Memset") || eq(cat, "cuda_runtime") || eq(cat, "cuda_driver") || eq(cat, "Runtime"))
    return true;
  if (eq(cat, "python_function") || eq(cat, "gpu_user_annotation") || eq(cat, "Trace")) return false;
  if (!e.name_seen) return true;
  return eq(e.name, "record_param_comms") || starts_with(e.name, "nccl:") ||
         (fit_records && (is_gemm_name(e.name) || is_attention_name(e.name) || is_memory_bound_op_name(e.name)));
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Reader {
 public:
  Reader(std::istream& in, KinetoTrace& out, std::size_t chunk_bytes, const ReadOptions& options)
      : s_(in, out.file, chunk_bytes), out_(out), options_(options) {}
  void run();

 private:
  void root_members();
  void event_elements();
  void event(bool skip_args);
  void args();
  void input_dims();
  void input_types();
  void grid();
  void distributed_info();
  void device_properties();
  void stepsim_info();
  bool read_text(char c, std::string_view& text, bool& seen);
  bool read_id(char c, Id& id);
  bool read_time(char c, Num& n);
  void finish_event();
  void finish_complete_event();
  void add_gpu_op(GpuOp::Kind kind, Time start, Time end);
  void add_cpu_span(Time start, Time end);
  void finish_memory_event();
  void finish_counter_event();
  // `store`, after checking that it may take one more record (ReadOptions::max_records).
  template <class Store>
  Store& bounded(Store& store, std::string_view what) {
    if (store.size() >= options_.max_records) too_many(what);
    return store;
  }
  [[noreturn]] void too_many(std::string_view what) const {
    throw InputError(fmt::format("{}/{}: {} {}: expected at most {} in one trace (docs/limits.md)", events_path_,
                                 out_.event_count - 1, options_.max_records + 1, what, options_.max_records));
  }
  int intern(std::string_view s) {
    if (auto it = name_ids_.find(s); it != name_ids_.end()) return it->second;
    int id = static_cast<int>(bounded(out_.names, "distinct names").size());
    out_.names.emplace_back(s);
    name_ids_.emplace(out_.names.back(), id);
    return id;
  }

  // Whether a kernel of this interned name is a communication kernel (is_comm_kernel_name),
  // decided once per name: a trace launches a few hundred names tens of thousands of times, and
  // the search of each launch's name was 4 % of an analyze. -1: not decided yet.
  bool comm_kernel_name(int name) {
    const auto n = static_cast<std::size_t>(name);
    if (n >= comm_name_.size()) comm_name_.resize(out_.names.size(), -1);
    if (comm_name_[n] < 0) comm_name_[n] = is_comm_kernel_name(out_.names[n]) ? 1 : 0;
    return comm_name_[n] == 1;
  }

  JsonStream s_;
  KinetoTrace& out_;
  ReadOptions options_;
  EventFields ev_;
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> name_ids_;
  std::vector<std::int8_t> comm_name_;  // by interned name: comm_kernel_name's answers
  std::set<std::pair<std::int64_t, std::int64_t>> step_numbers_;  // (thread, ProfilerStep number)
  std::string events_path_ = "/traceEvents";                      // "" for the JSON-array form
};

void Reader::run() {
  char top = 0;
  s_.step([&] {
    top = s_.peek();
    if (top == '{' || top == '[') s_.advance();
    else s_.skip_value();
  });
  if (top == '{') root_members();
  else if (top == '[') {
    events_path_.clear();
    event_elements();  // the JSON-array form: events only
  }
  s_.step([&] {
    if (!s_.at_end()) s_.unexpected("the end of input");
  });
}

void Reader::root_members() {
  // One step per member; traceEvents then streams its elements one step each.
  std::set<std::string, std::less<>> seen;  // a key twice is an input error (docs/limits.md)
  for (bool first = true;; first = false) {
    bool done = false, events = false;
    std::string member;
    s_.step([&] {
      std::string_view key;
      if (!s_.next_member(first, key)) {
        done = true;
        return;
      }
      if (seen.count(key)) throw InputError(fmt::format("/{}: duplicate key: expected each key once in the root object", key));
      member = std::string(key);  // recorded once the step has run (a step may be re-run)
      char c = s_.peek();
      if (eq(key, "traceEvents") && c == '[') {
        s_.advance();
        events = true;
      } else if (eq(key, "distributedInfo") && c == '{') {
        distributed_info();
      } else if (eq(key, "deviceProperties") && c == '[') {
        device_properties();
      } else if (eq(key, "stepsim") && c == '{') {
        stepsim_info();
      } else {
        s_.skip_value();
      }
    });
    if (done) return;
    seen.insert(std::move(member));
    if (events) event_elements();
  }
}

void Reader::event_elements() {
  for (bool first = true;; first = false) {
    bool done = false;
    s_.step([&] {
      if (!s_.next_element(first)) {
        done = true;
        return;
      }
      if (s_.peek() != '{') {
        s_.skip_value();  // not an event
        return;
      }
      const char* start = s_.position();
      event(true);
      if (ev_.s.args_skipped && args_may_matter(ev_.s, options_.fit_records)) {
        // A later duplicate key changed what the event is: read it again, args included.
        s_.seek(start);
        event(false);
      }
      ++out_.event_count;
      finish_event();
    });
    if (done) return;
  }
}

void Reader::event(bool skip_args) {
  s_.advance();  // '{'
  ev_.clear();
  EventFields::Scalars& e = ev_.s;
  std::string_view key;
  for (bool first = true; s_.next_member(first, key); first = false) {
    char c = s_.peek();
    switch (event_key(key)) {
      case EventKey::Ph:
        if (read_text(c, e.ph, e.ph_seen)) continue;
        break;
      case EventKey::Cat:
        if (read_text(c, e.cat, e.cat_seen)) continue;
        break;
      case EventKey::Name:
        if (read_text(c, e.name, e.name_seen)) continue;
        break;
      case EventKey::Pid:
        if (read_id(c, e.pid)) continue;
        break;
      case EventKey::Tid:
        if (read_id(c, e.tid)) continue;
        break;
      case EventKey::Ts:
        if (read_time(c, e.ts)) continue;
        break;
      case EventKey::Dur:
        if (read_time(c, e.dur)) continue;
        break;
      case EventKey::Args:
        if (c != '{') break;
        if (skip_args && !args_may_matter(e, options_.fit_records)) {
          e.args_skipped = true;
          break;
        }
        s_.advance();
        args();
        continue;
      case EventKey::Other: break;
    }
    s_.skip_value();
  }
}

// The readers of one event member whose value starts with `c`: each reads the value and returns
// true, or returns false for a value of another type (which event() skips, as an unknown key).

bool Reader::read_text(char c, std::string_view& text, bool& seen) {
  if (c != '"') return false;
  text = s_.string();
  seen = true;
  return true;
}

// pid/tid: an integer, or a string (hashed).
bool Reader::read_id(char c, Id& id) {
  if (c == '"') {
    id.set_str(s_.string());
    return true;
  }
  if (JsonStream::starts_number(c)) {
    id.set_int(Num::of(s_.number()).as_int());
    return true;
  }
  return false;
}

// ts/dur: a number, or its text quoted (Chrome traces).
bool Reader::read_time(char c, Num& n) {
  if (c == '"') {
    n = Num{Num::Kind::Text, 0, s_.string()};
    return true;
  }
  if (JsonStream::starts_number(c)) {
    n = Num::of(s_.number());
    return true;
  }
  return false;
}

void Reader::args() {
  EventFields::Scalars& e = ev_.s;
  std::string_view key;
  for (bool first = true; s_.next_member(first, key); first = false) {
    char c = s_.peek();
    ArgKey k = arg_key(key);
    if (c == '"') {
      std::string_view v = s_.string();
      switch (k) {
        case ArgKey::Dtype: e.dtype = v; break;
        case ArgKey::CollectiveName: e.coll_name = v; break;
        case ArgKey::GroupName: e.pg_name = v; break;
        case ArgKey::StepsimOp: e.stepsim_op = v; break;
        case ArgKey::StepsimCollective: e.stepsim_coll = v; break;
        case ArgKey::Phase: e.phase = v; break;
        default: break;
      }
    } else if (JsonStream::starts_number(c)) {
      Num n = Num::of(s_.number());
      switch (k) {
        case ArgKey::Stream: e.stream = n; break;
        case ArgKey::Correlation: e.correlation = n; break;
        case ArgKey::Device: e.device = n; break;
        case ArgKey::Bytes: e.bytes = n; break;
        case ArgKey::InElems: e.in_elems = n; break;
        case ArgKey::OutElems: e.out_elems = n; break;
        case ArgKey::GroupSize: e.group_size = n; break;
        case ArgKey::TotalAllocated: e.total_allocated = n; break;
        case ArgKey::TotalReserved: e.total_reserved = n; break;
        case ArgKey::DeviceType: e.device_type = n; break;
        case ArgKey::DeviceId: e.device_id = n; break;
        case ArgKey::Total: e.counter_total = n; break;
        case ArgKey::IssueNs: e.issue_ns = n; break;
        case ArgKey::Addr: e.addr = n; break;
        case ArgKey::BlockBytes: e.block_bytes = n; break;
        default: break;
      }
      // Counter events ("ph":"C"): every numeric arg is one series; their sum is the total.
      // "reserved" (stepsim's reserved counter) is not a category of the allocated total.
      if ((e.ph.empty() || eq(e.ph, "C")) && k == ArgKey::Reserved) {
        e.counter_reserved = n;
      } else if (e.ph.empty() || eq(e.ph, "C")) {
        if (__builtin_add_overflow(e.counter_sum, n.as_int(), &e.counter_sum))
          throw InputError("counter event: args sum beyond 2^63: expected the byte counts of a real trace");
        e.counter_any = true;
        if (k != ArgKey::Total) ev_.counter_args.emplace_back(std::string(key), Bytes{n.as_int()});
      }
    } else if (c == '[' && k == ArgKey::InputDims) {
      input_dims();
    } else if (c == '[' && k == ArgKey::InputType) {
      input_types();
    } else if (c == '[' && k == ArgKey::Grid) {
      grid();
    } else {
      s_.skip_value();
    }
  }
}

void Reader::input_dims() {
  // [[d0, d1, ...], ...]: one list per input tensor; anything else inside is ignored.
  s_.advance();
  for (bool first = true; s_.next_element(first); first = false) {
    if (s_.peek() != '[') {
      s_.skip_value();
      continue;
    }
    s_.advance();
    auto& dims = ev_.input_dims.emplace_back();
    for (bool f = true; s_.next_element(f); f = false) {
      if (JsonStream::starts_number(s_.peek())) dims.push_back(Num::of(s_.number()).as_int());
      else s_.skip_value();
    }
  }
}

void Reader::grid() {
  // A kernel's launch grid [x, y, z]: its CTAs are the product (0 when not three positive counts).
  s_.advance();
  std::int64_t ctas = 1;
  int dims = 0;
  for (bool first = true; s_.next_element(first); first = false) {
    if (!JsonStream::starts_number(s_.peek())) {
      s_.skip_value();
      ctas = 0;
      continue;
    }
    const std::int64_t d = Num::of(s_.number()).as_int();
    ctas = d > 0 && d <= (std::int64_t{1} << 31) && ctas <= (std::int64_t{1} << 31) ? ctas * d : 0;
    ++dims;
  }
  ev_.grid_ctas = dims == 3 ? ctas : 0;
}

void Reader::input_types() {
  s_.advance();
  for (bool first = true; s_.next_element(first); first = false) {
    if (s_.peek() == '"') ev_.input_types.push_back(s_.string());
    else s_.skip_value();
  }
}

// The root-level objects are steps of their own: re-running one on a refill assigns the same
// values again, and devices are appended only when the array is complete.
void Reader::distributed_info() {
  s_.advance();
  std::string_view key;
  for (bool first = true; s_.next_member(first, key); first = false) {
    char c = s_.peek();
    if (JsonStream::starts_number(c) && (eq(key, "rank") || eq(key, "world_size"))) {
      // Checked here, as read: a world size of 0 or -8 would give a busbw factor of 1 and a
      // rank "of -8" (docs/limits.md: 1 to 2^20 ranks).
      const JsonNumber n = s_.number();
      const std::int64_t v = Num::of(n).as_int();
      const bool world = eq(key, "world_size");
      if (!n.is_int || v < (world ? 1 : 0) || v >= kMaxTraceWorldSize + (world ? 1 : 0))
        throw InputError(fmt::format("/distributedInfo/{}: {}: expected an integer from {} to {}", key,
                                     n.is_int ? std::to_string(v) : std::string(n.text),
                                     world ? 1 : 0, world ? kMaxTraceWorldSize : kMaxTraceWorldSize - 1));
      (world ? out_.world_size : out_.rank) = static_cast<int>(v);
    } else if (eq(key, "rank") || eq(key, "world_size")) {
      throw InputError(fmt::format("/distributedInfo/{}: expected an integer", key));
    } else if (c == '"' && eq(key, "backend")) {
      out_.backend = std::string(s_.string());
    } else {
      s_.skip_value();
    }
  }
  if (out_.world_size > 0 && out_.rank >= out_.world_size)
    throw InputError(fmt::format("/distributedInfo/rank: {}: expected a rank below world_size {}", out_.rank, out_.world_size));
}

void Reader::device_properties() {
  s_.advance();
  std::vector<DeviceInfo> devices;
  for (bool first = true; s_.next_element(first); first = false) {
    if (s_.peek() != '{') {
      s_.skip_value();
      continue;
    }
    s_.advance();
    DeviceInfo& d = devices.emplace_back();
    std::string_view key;
    for (bool f = true; s_.next_member(f, key); f = false) {
      char c = s_.peek();
      if (JsonStream::starts_number(c)) {
        std::int64_t v = Num::of(s_.number()).as_int();
        if (eq(key, "id")) d.id = static_cast<int>(v);
        else if (eq(key, "totalGlobalMem")) d.memory = Bytes{v};
        else if (eq(key, "numSms")) d.sms = static_cast<int>(v);
        else if (eq(key, "computeMajor")) d.compute_major = static_cast<int>(v);
        else if (eq(key, "computeMinor")) d.compute_minor = static_cast<int>(v);
      } else if (c == '"' && eq(key, "name")) {
        d.name = std::string(s_.string());
      } else {
        s_.skip_value();
      }
    }
  }
  out_.devices.insert(out_.devices.end(), devices.begin(), devices.end());
}

void Reader::stepsim_info() {
  s_.advance();
  out_.stepsim_trace = true;
  std::string_view key;
  for (bool first = true; s_.next_member(first, key); first = false) {
    char c = s_.peek();
    if (JsonStream::starts_number(c) && eq(key, "memory_capacity_bytes")) {
      out_.stepsim_capacity = Bytes{Num::of(s_.number()).as_int()};
    } else if (c == '"' && eq(key, "device")) {
      out_.stepsim_device = std::string(s_.string());
    } else if (c == '{' && eq(key, "non_pytorch_breakdown")) {
      s_.advance();
      std::string_view part;
      for (bool first_part = true; s_.next_member(first_part, part); first_part = false) {
        std::string name(part);
        if (!JsonStream::starts_number(s_.peek())) {
          s_.skip_value();
          continue;
        }
        out_.stepsim_non_pytorch.push_back(NonPytorchPart{std::move(name), "", Bytes{Num::of(s_.number()).as_int()}});
      }
    } else {
      s_.skip_value();
    }
  }
}

void fill_comm_from_args(const EventFields::Scalars& ev, CommParams& c) {
  if (!ev.coll_name.empty()) c.kind = collective_from_op_name(std::string(ev.coll_name));
  if (!ev.stepsim_coll.empty()) c.kind = collective_from_op_name(std::string(ev.stepsim_coll));
  if (ev.in_elems.set()) c.in_elems = ev.in_elems.as_int();
  if (ev.out_elems.set()) c.out_elems = ev.out_elems.as_int();
  if (ev.group_size.set()) c.group_size = static_cast<int>(ev.group_size.as_int());
  if (!ev.dtype.empty()) {
    c.dtype = std::string(ev.dtype);
    c.elem_bytes = dtype_bytes_from_name(c.dtype);
  }
  c.group_name = std::string(ev.pg_name);
}

// The elements of a nccl:* op's Input Dims: the input tensors (one list per tensor, its type in
// Input type), their elements added; the first typed tensor gives the dtype. Unchanged when no
// tensor has a known type and a dimension.
void comm_elems_from_inputs(const std::vector<std::vector<std::int64_t>>& dims, const std::vector<std::string_view>& types,
                            CommParams& comm) {
  std::int64_t total = 0;
  bool any = false;
  for (std::size_t i = 0; i < dims.size() && i < types.size(); ++i) {
    int eb = dtype_bytes_from_name(std::string(types[i]));
    if (eb == 0 || dims[i].empty()) continue;
    const auto p = dims_numel(dims[i]);
    std::int64_t sum = 0;
    if (!p || __builtin_add_overflow(total, *p, &sum)) continue;
    total = sum;
    any = true;
    if (comm.elem_bytes == 0) {
      comm.elem_bytes = eb;
      comm.dtype = std::string(types[i]);
    }
  }
  if (any) comm.in_elems = total;
}

// One record per event at most: "X" events make GPU ops, runtime calls or CPU spans; "i"
// [memory] events and "C" counters make memory samples; everything else is dropped.
void Reader::finish_event() {
  const EventFields::Scalars& ev = ev_.s;
  // GPU work and steps carry the numbers every result is made of: one without its start, its
  // duration or its kind would vanish from the totals (compute 0, idle 100 %), one with a
  // negative duration would subtract. Both are input errors, naming the event.
  const bool gpu = eq(ev.cat, "kernel") || eq(ev.cat, "Kernel") || eq(ev.cat, "gpu_memcpy") || eq(ev.cat, "Memcpy") ||
                   eq(ev.cat, "gpu_memset") || eq(ev.cat, "Memset");
  const bool step = starts_with(ev.name, "ProfilerStep#") && !eq(ev.cat, "gpu_user_annotation") && !eq(ev.cat, "Trace");
  const std::uint64_t index = out_.event_count - 1;
  const auto event_error = [&](const std::string& what, const std::string& expected) {
    throw InputError(fmt::format("{}/{}{}: expected {} ({} \"{}\")", events_path_, index, what, expected,
                                 gpu ? std::string(ev.cat) : "step", std::string(ev.name.substr(0, 80))));
  };
  if (gpu || step) {
    if (!eq(ev.ph, "X"))
      event_error(ev.ph_seen ? fmt::format("/ph: \"{}\"", std::string(ev.ph.substr(0, 20))) : ": no \"ph\"",
                  "a complete event (\"ph\": \"X\")");
    if (!ev.ts.set()) event_error(": no \"ts\"", "a start time (\"ts\", microseconds)");
    if (!ev.dur.set()) event_error(": no \"dur\"", "a duration (\"dur\", microseconds)");
  }
  if (eq(ev.ph, "X") && ev.dur.set()) {
    const Time dur = ev.dur.as_us_time();
    if (dur < Time{} || (step && dur == Time{}))
      event_error(fmt::format("/dur: {}", ev.dur.kind == Num::Kind::Int ? std::to_string(ev.dur.i) : std::string(ev.dur.text)),
                  step ? "a positive duration" : "a duration >= 0");
  }
  if (eq(ev.ph, "X")) {
    if (ev.ts.set()) finish_complete_event();
    return;
  }
  if (eq(ev.ph, "i") && eq(ev.name, "[memory]")) {
    finish_memory_event();
    return;
  }
  if (eq(ev.ph, "C")) finish_counter_event();
}

// A complete ("X") event with a start: by its category a GPU op, a runtime call, or a CPU span.
void Reader::finish_complete_event() {
  const EventFields::Scalars& ev = ev_.s;
  Time start = ev.ts.as_us_time();
  Time end = start + (ev.dur.set() ? ev.dur.as_us_time() : Time{});
  const std::string_view cat = ev.cat;
  if (eq(cat, "kernel") || eq(cat, "Kernel")) return add_gpu_op(GpuOp::Kind::Kernel, start, end);
  if (eq(cat, "gpu_memcpy") || eq(cat, "Memcpy")) return add_gpu_op(GpuOp::Kind::Memcpy, start, end);
  if (eq(cat, "gpu_memset") || eq(cat, "Memset")) return add_gpu_op(GpuOp::Kind::Memset, start, end);
  if (eq(cat, "cuda_runtime") || eq(cat, "cuda_driver") || eq(cat, "Runtime")) {
    if (ev.correlation.set())
      bounded(out_.runtime, "runtime calls").push_back(RuntimeCall{ev.correlation.as_int(), fold_thread(ev.pid, ev.tid), start, end, intern(ev.name)});
    return;
  }
  if (eq(cat, "python_function")) {
    if (options_.host_ops) bounded(out_.python_ops, "Python frames").push_back(HostOp{intern(ev.name), fold_thread(ev.pid, ev.tid), start, end});
    if (is_deepspeed_monitor_write(ev.name)) bounded(out_.cpu, "CPU spans").push_back(CpuSpan{.kind = CpuSpan::Kind::MonitorWrite, .thread = fold_thread(ev.pid, ev.tid), .start = start, .end = end, .name = intern(ev.name)});
    else if (starts_with(ev.name, "<built-in method run_backward of "))
      bounded(out_.cpu, "CPU spans").push_back(CpuSpan{.kind = CpuSpan::Kind::RunBackward, .thread = fold_thread(ev.pid, ev.tid), .start = start, .end = end, .name = intern(ev.name)});
    return;
  }
  if (eq(cat, "gpu_user_annotation") || eq(cat, "Trace")) return;
  if (options_.host_ops && (eq(cat, "cpu_op") || eq(cat, "Operator"))) bounded(out_.host_ops, "CPU operators").push_back(HostOp{intern(ev.name), fold_thread(ev.pid, ev.tid), start, end});
  add_cpu_span(start, end);
}

void Reader::add_gpu_op(GpuOp::Kind kind, Time start, Time end) {
  const EventFields::Scalars& ev = ev_.s;
  GpuOp op;
  op.kind = kind;
  op.name = intern(ev.name);
  op.device = ev.device.set() ? static_cast<int>(ev.device.as_int()) : static_cast<int>(ev.pid.v);
  op.stream = ev.stream.set() ? ev.stream.as_int() : ev.tid.v;
  op.start = start;
  op.end = end;
  op.correlation = ev.correlation.set() ? ev.correlation.as_int() : -1;
  op.bytes = ev.bytes.set() ? ev.bytes.as_int() : 0;
  if (!ev.phase.empty()) op.phase = intern(ev.phase);
  op.ctas = ev_.grid_ctas;
  if (ev.issue_ns.set()) op.issue = Time{ev.issue_ns.as_int()};
  if (kind == GpuOp::Kind::Kernel) {
    op.collective = eq(ev.stepsim_op, "collective") || comm_kernel_name(op.name);
    if (op.collective) {
      CommParams& comm = bounded(out_.comms, "collective kernels and calls").emplace_back();
      fill_comm_from_args(ev, comm);
      if (eq(ev.stepsim_op, "collective") && ev.bytes.set()) comm.bytes = ev.bytes.as_int();
      op.comm = static_cast<int>(out_.comms.size() - 1);
    }
  }
  bounded(out_.gpu_ops, "GPU ops").push_back(std::move(op));
}

// A CPU op kept as a span when its name says what it is (a step, a collective call, the
// optimizer, a backward node, a GEMM, attention or memory-bound op with its input shapes);
// others dropped.
void Reader::add_cpu_span(Time start, Time end) {
  const EventFields::Scalars& ev = ev_.s;
  const std::string_view n = ev.name;
  CpuSpan span;
  span.thread = fold_thread(ev.pid, ev.tid);
  span.start = start;
  span.end = end;
  if (starts_with(n, "ProfilerStep#")) {
    span.kind = CpuSpan::Kind::Step;
    try {
      span.step_number = std::stoll(std::string(n.substr(13)));
    } catch (const std::exception&) {
      return;  // "ProfilerStep#abc": not a step span
    }
    // Two steps of one number on one thread would be merged into one step.
    if (!step_numbers_.insert({span.thread, span.step_number}).second)
      throw InputError(fmt::format("{}/{}/name: \"{}\": expected each ProfilerStep number once per thread (a repeated "
                                   "step would be merged)",
                                   events_path_, out_.event_count - 1, std::string(n.substr(0, 80))));
  } else if (eq(n, "record_param_comms") || starts_with(n, "nccl:")) {
    span.kind = CpuSpan::Kind::CommOp;
    CommParams& comm = bounded(out_.comms, "collective kernels and calls").emplace_back();
    span.comm = static_cast<int>(out_.comms.size() - 1);
    fill_comm_from_args(ev, comm);
    if (!eq(n, "record_param_comms") && comm.kind == TraceCollective::Unknown)
      comm.kind = collective_from_op_name(std::string(n.substr(5)));
    if (comm.in_elems < 0 && !ev_.input_dims.empty() && !ev_.input_types.empty())
      comm_elems_from_inputs(ev_.input_dims, ev_.input_types, comm);
    span.comm_has_params = comm.in_elems >= 0 || comm.kind != TraceCollective::Unknown;
  } else if (starts_with(n, "Optimizer.step#")) {
    span.kind = CpuSpan::Kind::Optimizer;
  } else if (starts_with(n, "autograd::engine::evaluate_function")) {
    span.kind = CpuSpan::Kind::Backward;
  } else if (!options_.fit_records) {
    return;  // a GEMM, attention or memory-bound op span: only fit --trace reads them
  } else if (const bool gemm = is_gemm_name(n); (gemm || is_attention_name(n)) && !ev_.input_dims.empty()) {
    span.kind = gemm ? CpuSpan::Kind::Gemm : CpuSpan::Kind::Attention;
    OpInputs& inputs = bounded(out_.inputs, "GEMM and attention op spans").emplace_back();
    span.inputs = static_cast<int>(out_.inputs.size() - 1);
    inputs.dims = ev_.input_dims;
    if (!ev_.input_types.empty()) inputs.type = std::string(ev_.input_types.front());
  } else {
    // A memory-bound op whose shapes give its traffic is kept apart (56 bytes); others dropped.
    if (auto traffic = memory_op_traffic(n, ev_.input_dims, ev_.input_types); traffic && traffic->bytes > 0)
      bounded(out_.memory_ops, "memory-bound op spans").push_back(
          MemoryOpSpan{span.thread, start, end, traffic->bytes, traffic->elements, intern(n), traffic->casts, traffic->largest});
    return;
  }
  span.name = intern(n);
  bounded(out_.cpu, "CPU spans").push_back(std::move(span));
}

// Kineto's allocator instant event: a sample of the CUDA device's allocated and reserved bytes.
void Reader::finish_memory_event() {
  const EventFields::Scalars& ev = ev_.s;
  // Kineto: Device Type 1 is CUDA (c10::DeviceType); CPU allocations are type 0.
  if (ev.device_type.set() && ev.device_type.as_int() == 1 && ev.total_allocated.set() && ev.ts.set())
    bounded(out_.memory, "memory samples").push_back(MemSample{ev.ts.as_us_time(), static_cast<int>(ev.device_id.as_int()), -1,
                                    Bytes{ev.total_allocated.as_int()},
                                    Bytes{ev.total_reserved.set() ? ev.total_reserved.as_int() : 0}, true,
                                    ev.addr.set() ? ev.addr.as_int() : 0,
                                    ev.block_bytes.set() ? ev.block_bytes.as_int() : 0});
}

// A counter ("C") event: the allocated total (its "total" arg, else the sum of its series) and
// the reserved bytes; with only a reserved counter, a sample of the reserved bytes alone.
void Reader::finish_counter_event() {
  const EventFields::Scalars& ev = ev_.s;
  if (ev.ts.set() && ev.counter_any) {
    std::int64_t total = ev.counter_total.set() ? ev.counter_total.as_int() : ev.counter_sum;
    int categories = -1;
    if (!ev_.counter_args.empty()) {
      bounded(out_.categories, "counter samples").push_back(ev_.counter_args);
      categories = static_cast<int>(out_.categories.size() - 1);
    }
    bounded(out_.memory, "memory samples").push_back(MemSample{ev.ts.as_us_time(), static_cast<int>(ev.pid.v), categories, Bytes{total},
                                    Bytes{ev.counter_reserved.set() ? ev.counter_reserved.as_int() : 0}, true});
  } else if (ev.ts.set() && ev.counter_reserved.set()) {
    bounded(out_.memory, "memory samples").push_back(MemSample{ev.ts.as_us_time(), static_cast<int>(ev.pid.v), -1, Bytes{},
                                    Bytes{ev.counter_reserved.as_int()}, false});
  }
}

}  // namespace

KinetoTrace read_kineto_trace_stream(std::istream& in, const std::string& label, std::size_t chunk_bytes,
                                     const ReadOptions& options) {
  KinetoTrace out;
  out.file = label;
  try {
    Reader(in, out, chunk_bytes, options).run();
  } catch (const InputError& e) {
    // Value errors raised below the reader (a timestamp out of range) do not know the file.
    if (std::string_view(e.what()).substr(0, label.size()) == label) throw;
    throw InputError(label + ": " + e.what());
  }
  return out;
}

namespace {
constexpr std::size_t kDefaultChunk = std::size_t{1} << 16;  // read_kineto_trace_stream's default
bool gzip_magic(const unsigned char* head, std::size_t n) { return n >= 2 && head[0] == 0x1f && head[1] == 0x8b; }

// A trace's bytes from the start of `raw`, which can seek back there: gzip (by its magic bytes)
// or JSON.
KinetoTrace read_trace_bytes(std::istream& raw, const std::string& label, const ReadOptions& options) {
  unsigned char magic[2] = {0, 0};
  raw.read(reinterpret_cast<char*>(magic), 2);
  const auto got = static_cast<std::size_t>(raw.gcount());
  raw.clear();
  raw.seekg(0);
  if (!gzip_magic(magic, got)) return read_kineto_trace_stream(raw, label, kDefaultChunk, options);
  // Inflated on a second thread, straight into the blocks the scanner reads, while it reads
  // those that are ready (trace/gunzip.hpp, trace/read_ahead.hpp).
  Gunzip gunzip(raw);
  ReadAheadBuf ahead([&gunzip](char* block, std::size_t n) { return gunzip.read(block, n); });
  std::istream ahead_in(&ahead);
  ahead_in.exceptions(std::ios::badbit);  // the GzipError the thread caught, rethrown here
  try {
    return read_kineto_trace_stream(ahead_in, label, kDefaultChunk, options);
  } catch (const GzipError& e) {
    throw InputError(label + ": " + e.what() + ": expected a gzip-compressed JSON trace");
  } catch (const std::ios::failure& e) {
    throw InputError(label + ": " + e.what() + ": expected a gzip-compressed JSON trace");
  }
}
}  // namespace

bool looks_like_kineto_trace(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::array<char, 4096> head{};
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  const std::string_view h(head.data(), static_cast<std::size_t>(in.gcount()));
  if (gzip_magic(reinterpret_cast<const unsigned char*>(h.data()), h.size())) return true;
  if (h.find("\"schema\": \"stepsim.") != std::string_view::npos) return false;
  for (std::string_view key : {"\"traceEvents\"", "\"schemaVersion\"", "\"deviceProperties\"", "\"distributedInfo\""})
    if (h.find(key) != std::string_view::npos) return true;
  return false;
}

KinetoTrace read_kineto_trace(const std::filesystem::path& name, const ReadOptions& options) {
  const std::filesystem::path file = resolve_input_path(name);
  std::string label = name.string();
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw InputError(label + ": is a directory: expected a trace file");
  std::ifstream raw(file, std::ios::binary);
  if (!raw) throw InputError(label + ": cannot open: expected a readable trace file");
  note_input_file(file);
  KinetoTrace out = read_trace_bytes(raw, label, options);
  if (out.event_count == 0 && out.gpu_ops.empty())
    throw InputError(label + ": /traceEvents: missing or empty: expected a Kineto/Chrome trace");
  return out;
}

KinetoTrace read_kineto_trace_text(const std::string& bytes, const std::string& label, const ReadOptions& options) {
  std::istringstream in(bytes);
  return read_trace_bytes(in, label, options);
}

int KinetoTrace::main_device() const {
  std::map<int, std::size_t> count;
  for (const auto& op : gpu_ops) ++count[op.device];
  int best = 0;
  std::size_t best_n = 0;
  for (auto [d, n] : count)
    if (n > best_n) { best = d; best_n = n; }
  return best;
}

}  // namespace stepsim::trace
