// Streaming Kineto / Chrome trace reader. nlohmann's SAX parser feeds scalars one at a time; we
// keep the fields of the current event in reusable buffers and, when the event object closes,
// turn it into at most one compact record (or drop it: python_function, cpu_op, flow events
// and most annotations are dropped). The JSON document is never built.

#include <boost/iostreams/filter/gzip.hpp>
#include <boost/iostreams/filtering_stream.hpp>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "calibrate/trace/kineto_trace.hpp"
#include "sim/core/error.hpp"

namespace stepsim::trace {

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

enum class Key { Other, KCollective_name, KDevice_Id, KDevice_Type, KGroup_size, Kgroup_size, KIn_msg_nelems, KInput_Dims, KInput_type, KOut_msg_nelems, KProcess_Group_Name, KTotal_Allocated, Kargs, Kbackend, Kbytes, Kcat, Kcollective, Kcomm, KcomputeMajor, KcomputeMinor, Kcorrelation, Kdevice, KdeviceProperties, KdistributedInfo, Kdtype, Kdur, Kid, Kname, KnumSms, Kph, Kphase, Kpid, Krank, Kranks, Kstepsim, Kstepsim_op, Kstream, Ktid, Ktotal, KtotalGlobalMem, Ktotal_bytes, KtraceEvents, Kts, Kworld_size };

Key classify_key(const std::string& k) {
  // One lookup per key instead of a chain of string compares per scalar (the hot path).
  static const std::unordered_map<std::string, Key> table = {
      {"Collective name", Key::KCollective_name},
      {"Device Id", Key::KDevice_Id},
      {"Device Type", Key::KDevice_Type},
      {"Group size", Key::KGroup_size},
      {"group_size", Key::Kgroup_size},
      {"In msg nelems", Key::KIn_msg_nelems},
      {"Input Dims", Key::KInput_Dims},
      {"Input type", Key::KInput_type},
      {"Out msg nelems", Key::KOut_msg_nelems},
      {"Process Group Name", Key::KProcess_Group_Name},
      {"Total Allocated", Key::KTotal_Allocated},
      {"args", Key::Kargs},
      {"backend", Key::Kbackend},
      {"bytes", Key::Kbytes},
      {"cat", Key::Kcat},
      {"collective", Key::Kcollective},
      {"comm", Key::Kcomm},
      {"computeMajor", Key::KcomputeMajor},
      {"computeMinor", Key::KcomputeMinor},
      {"correlation", Key::Kcorrelation},
      {"device", Key::Kdevice},
      {"deviceProperties", Key::KdeviceProperties},
      {"distributedInfo", Key::KdistributedInfo},
      {"dtype", Key::Kdtype},
      {"dur", Key::Kdur},
      {"id", Key::Kid},
      {"name", Key::Kname},
      {"numSms", Key::KnumSms},
      {"ph", Key::Kph},
      {"phase", Key::Kphase},
      {"pid", Key::Kpid},
      {"rank", Key::Krank},
      {"ranks", Key::Kranks},
      {"stepsim", Key::Kstepsim},
      {"stepsim_op", Key::Kstepsim_op},
      {"stream", Key::Kstream},
      {"tid", Key::Ktid},
      {"total", Key::Ktotal},
      {"totalGlobalMem", Key::KtotalGlobalMem},
      {"total_bytes", Key::Ktotal_bytes},
      {"traceEvents", Key::KtraceEvents},
      {"ts", Key::Kts},
      {"world_size", Key::Kworld_size},
  };
  auto it = table.find(k);
  return it == table.end() ? Key::Other : it->second;
}

// A JSON scalar as the event fields need it: integers exactly, floats with their text.
struct Num {
  bool set = false;
  bool is_int = true;
  std::int64_t i = 0;
  double d = 0;
  std::string text;  // the float's token (exact decimal), empty for integers

  void clear() { set = false; is_int = true; i = 0; d = 0; text.clear(); }
  std::int64_t as_int() const { return is_int ? i : static_cast<std::int64_t>(std::llround(d)); }
  Time as_us_time() const { return is_int ? Time{i * 1000} : parse_us_text(text); }
};

// pid/tid are integers in Kineto but strings for the synthetic "Spans"/"Traces" rows.
struct Id {
  std::int64_t v = 0;
  void set_int(std::int64_t x) { v = x; }
  void set_str(const std::string& s) { v = static_cast<std::int64_t>(std::hash<std::string>{}(s) | (1ULL << 62)); }
};

struct EventFields {
  std::string ph, cat, name;
  Id pid, tid;
  Num ts, dur;
  // args
  Num stream, correlation, device, bytes, in_elems, out_elems, group_size, total_allocated, device_type,
      device_id, counter_total;
  std::int64_t counter_sum = 0;
  bool counter_any = false;
  std::vector<std::pair<std::string, Bytes>> counter_args;
  std::string dtype, coll_name, pg_name, stepsim_op, stepsim_coll, phase, meta_name;
  std::vector<std::vector<std::int64_t>> input_dims;
  std::vector<std::string> input_types;

  void clear() {
    ph.clear(); cat.clear(); name.clear();
    pid = {}; tid = {};
    for (Num* n : {&ts, &dur, &stream, &correlation, &device, &bytes, &in_elems, &out_elems, &group_size,
                   &total_allocated, &device_type, &device_id, &counter_total})
      n->clear();
    counter_sum = 0; counter_any = false; counter_args.clear();
    for (std::string* s : {&dtype, &coll_name, &pg_name, &stepsim_op, &stepsim_coll, &phase, &meta_name}) s->clear();
    input_dims.clear(); input_types.clear();
  }
};

std::int64_t fold_thread(Id pid, Id tid) { return pid.v * 1000003 ^ tid.v; }

class Handler {
 public:
  explicit Handler(KinetoTrace& out) : out_(out) {}

  // --- SAX interface ----------------------------------------------------------------------
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(std::int64_t v) { return number(Num{true, true, v, static_cast<double>(v), {}}); }
  bool number_unsigned(std::uint64_t v) {
    return number(Num{true, true, static_cast<std::int64_t>(v), static_cast<double>(v), {}});
  }
  bool number_float(double v, const std::string& text) {
    return number(Num{true, false, static_cast<std::int64_t>(v), v, text});
  }
  bool string(std::string& s);
  bool binary(nlohmann::json::binary_t&) { return true; }
  bool key(std::string& k) {
    key_ = k;
    key_id_ = classify_key(k);
    return true;
  }
  bool start_object(std::size_t);
  bool end_object();
  bool start_array(std::size_t);
  bool end_array();
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& e) {
    throw InputError(out_.file + ": byte " + std::to_string(pos) + ": " + e.what() + ": expected a JSON trace");
  }

 private:
  enum class Ctx { Other, Root, Events, Event, Args, InputDims, InputDimsInner, InputTypes, DistInfo, DevProps, Device,
                   Stepsim };
  Ctx top() const { return stack_.empty() ? Ctx::Other : stack_.back(); }
  bool number(const Num& n);
  void finish_event();
  int intern(const std::string& s) {
    auto [it, inserted] = name_ids_.try_emplace(s, static_cast<int>(out_.names.size()));
    if (inserted) out_.names.push_back(s);
    return it->second;
  }

  KinetoTrace& out_;
  std::vector<Ctx> stack_;
  std::string key_;
  Key key_id_ = Key::Other;
  EventFields ev_;
  DeviceInfo dev_;
  std::unordered_map<std::string, int> name_ids_;
};

bool Handler::start_object(std::size_t) {
  Ctx parent = top();
  Ctx c = Ctx::Other;
  if (stack_.empty()) c = Ctx::Root;
  else if (parent == Ctx::Root && key_id_ == Key::KdistributedInfo) c = Ctx::DistInfo;
  else if (parent == Ctx::Root && key_id_ == Key::Kstepsim) c = Ctx::Stepsim;
  else if (parent == Ctx::Events) { c = Ctx::Event; ev_.clear(); }
  else if (parent == Ctx::Event && key_id_ == Key::Kargs) c = Ctx::Args;
  else if (parent == Ctx::DevProps) { c = Ctx::Device; dev_ = DeviceInfo{}; }
  if (c == Ctx::Stepsim) out_.stepsim_trace = true;
  stack_.push_back(c);
  return true;
}

bool Handler::end_object() {
  Ctx c = top();
  stack_.pop_back();
  if (c == Ctx::Event) {
    ++out_.event_count;
    finish_event();
  } else if (c == Ctx::Device) {
    out_.devices.push_back(dev_);
  }
  return true;
}

bool Handler::start_array(std::size_t) {
  Ctx parent = top();
  Ctx c = Ctx::Other;
  if (stack_.empty() || (parent == Ctx::Root && key_id_ == Key::KtraceEvents)) c = Ctx::Events;  // JSON-array form too
  else if (parent == Ctx::Root && key_id_ == Key::KdeviceProperties) c = Ctx::DevProps;
  else if (parent == Ctx::Args && key_id_ == Key::KInput_Dims) c = Ctx::InputDims;
  else if (parent == Ctx::Args && key_id_ == Key::KInput_type) c = Ctx::InputTypes;
  else if (parent == Ctx::InputDims) { c = Ctx::InputDimsInner; ev_.input_dims.emplace_back(); }
  stack_.push_back(c);
  return true;
}

bool Handler::end_array() {
  stack_.pop_back();
  return true;
}

bool Handler::number(const Num& n) {
  switch (top()) {
    case Ctx::Event:
      if (key_id_ == Key::Kts) ev_.ts = n;
      else if (key_id_ == Key::Kdur) ev_.dur = n;
      else if (key_id_ == Key::Kpid) ev_.pid.set_int(n.as_int());
      else if (key_id_ == Key::Ktid) ev_.tid.set_int(n.as_int());
      break;
    case Ctx::Args: {
      if (key_id_ == Key::Kstream) ev_.stream = n;
      else if (key_id_ == Key::Kcorrelation) ev_.correlation = n;
      else if (key_id_ == Key::Kdevice) ev_.device = n;
      else if (key_id_ == Key::Kbytes) ev_.bytes = n;
      else if (key_id_ == Key::KIn_msg_nelems) ev_.in_elems = n;
      else if (key_id_ == Key::KOut_msg_nelems) ev_.out_elems = n;
      else if (key_id_ == Key::KGroup_size || key_id_ == Key::Kranks || key_id_ == Key::Kgroup_size) ev_.group_size = n;
      else if (key_id_ == Key::KTotal_Allocated) ev_.total_allocated = n;
      else if (key_id_ == Key::KDevice_Type) ev_.device_type = n;
      else if (key_id_ == Key::KDevice_Id) ev_.device_id = n;
      else if (key_id_ == Key::Ktotal || key_id_ == Key::Ktotal_bytes) ev_.counter_total = n;
      // Counter events ("ph":"C"): every numeric arg is one series; their sum is the total.
      if (ev_.ph.empty() || ev_.ph == "C") {
        ev_.counter_sum += n.as_int();
        ev_.counter_any = true;
        if (key_id_ != Key::Ktotal && key_id_ != Key::Ktotal_bytes) ev_.counter_args.emplace_back(key_, Bytes{n.as_int()});
      }
      break;
    }
    case Ctx::InputDimsInner: ev_.input_dims.back().push_back(n.as_int()); break;
    case Ctx::Stepsim:
      if (key_ == "memory_capacity_bytes") out_.stepsim_capacity = Bytes{n.as_int()};
      break;
    case Ctx::DistInfo:
      if (key_id_ == Key::Krank) out_.rank = static_cast<int>(n.as_int());
      else if (key_id_ == Key::Kworld_size) out_.world_size = static_cast<int>(n.as_int());
      break;
    case Ctx::Device:
      if (key_id_ == Key::Kid) dev_.id = static_cast<int>(n.as_int());
      else if (key_id_ == Key::KtotalGlobalMem) dev_.memory = Bytes{n.as_int()};
      else if (key_id_ == Key::KnumSms) dev_.sms = static_cast<int>(n.as_int());
      else if (key_id_ == Key::KcomputeMajor) dev_.compute_major = static_cast<int>(n.as_int());
      else if (key_id_ == Key::KcomputeMinor) dev_.compute_minor = static_cast<int>(n.as_int());
      break;
    default: break;
  }
  return true;
}

bool Handler::string(std::string& s) {
  switch (top()) {
    case Ctx::Event:
      if (key_id_ == Key::Kph) ev_.ph = s;
      else if (key_id_ == Key::Kcat) ev_.cat = s;
      else if (key_id_ == Key::Kname) ev_.name = s;
      else if (key_id_ == Key::Kpid) ev_.pid.set_str(s);
      else if (key_id_ == Key::Ktid) ev_.tid.set_str(s);
      else if (key_id_ == Key::Kts) { ev_.ts = Num{true, false, 0, 0, s}; }
      else if (key_id_ == Key::Kdur) { ev_.dur = Num{true, false, 0, 0, s}; }
      break;
    case Ctx::Args: {
      if (key_id_ == Key::Kdtype) ev_.dtype = s;
      else if (key_id_ == Key::KCollective_name) ev_.coll_name = s;
      else if (key_id_ == Key::KProcess_Group_Name) ev_.pg_name = s;
      else if (key_id_ == Key::Kstepsim_op) ev_.stepsim_op = s;
      else if (key_id_ == Key::Kcollective) ev_.stepsim_coll = s;
      else if (key_id_ == Key::Kphase) ev_.phase = s;
      else if (key_id_ == Key::Kcomm) ev_.pg_name = s;
      else if (key_id_ == Key::Kname) ev_.meta_name = s;
      break;
    }
    case Ctx::InputTypes: ev_.input_types.push_back(s); break;
    case Ctx::Stepsim:
      if (key_id_ == Key::Kdevice) out_.stepsim_device = s;
      break;
    case Ctx::DistInfo:
      if (key_id_ == Key::Kbackend) out_.backend = s;
      break;
    case Ctx::Device:
      if (key_id_ == Key::Kname) dev_.name = s;
      break;
    default: break;
  }
  return true;
}

void fill_comm_from_args(const EventFields& ev, CommParams& c) {
  if (!ev.coll_name.empty()) c.kind = collective_from_op_name(ev.coll_name);
  if (!ev.stepsim_coll.empty()) c.kind = collective_from_op_name(ev.stepsim_coll);
  if (ev.in_elems.set) c.in_elems = ev.in_elems.as_int();
  if (ev.out_elems.set) c.out_elems = ev.out_elems.as_int();
  if (ev.group_size.set) c.group_size = static_cast<int>(ev.group_size.as_int());
  if (!ev.dtype.empty()) {
    c.dtype = ev.dtype;
    c.elem_bytes = dtype_bytes_from_name(ev.dtype);
  }
  c.group_name = ev.pg_name;
}

void Handler::finish_event() {
  const EventFields& ev = ev_;
  if (ev.ph == "X") {
    if (!ev.ts.set) return;
    Time start = ev.ts.as_us_time();
    Time end = start + (ev.dur.set ? ev.dur.as_us_time() : Time{});
    const std::string& cat = ev.cat;
    bool kernel = cat == "kernel" || cat == "Kernel";
    bool memcpy = cat == "gpu_memcpy" || cat == "Memcpy";
    bool memset = cat == "gpu_memset" || cat == "Memset";
    if (kernel || memcpy || memset) {
      GpuOp op;
      op.kind = kernel ? GpuOp::Kind::Kernel : memcpy ? GpuOp::Kind::Memcpy : GpuOp::Kind::Memset;
      op.name = intern(ev.name);
      op.device = ev.device.set ? static_cast<int>(ev.device.as_int()) : static_cast<int>(ev.pid.v);
      op.stream = ev.stream.set ? ev.stream.as_int() : ev.tid.v;
      op.start = start;
      op.end = end;
      op.correlation = ev.correlation.set ? ev.correlation.as_int() : -1;
      op.bytes = ev.bytes.set ? ev.bytes.as_int() : 0;
      op.phase = ev.phase;
      if (kernel) {
        op.collective = ev.stepsim_op == "collective" || is_nccl_kernel_name(ev.name);
        if (op.collective) {
          fill_comm_from_args(ev, op.comm);
          if (ev.stepsim_op == "collective" && ev.bytes.set) op.comm.bytes = ev.bytes.as_int();
        }
      }
      out_.gpu_ops.push_back(std::move(op));
      return;
    }
    if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "Runtime") {
      if (ev.correlation.set)
        out_.runtime.push_back(RuntimeCall{ev.correlation.as_int(), fold_thread(ev.pid, ev.tid), start, end});
      return;
    }
    if (cat == "python_function" || cat == "gpu_user_annotation" || cat == "Trace") return;
    const std::string& n = ev.name;
    CpuSpan span;
    span.thread = fold_thread(ev.pid, ev.tid);
    span.start = start;
    span.end = end;
    if (starts_with(n, "ProfilerStep#")) {
      span.kind = CpuSpan::Kind::Step;
      try {
        span.step_number = std::stoll(n.substr(13));
      } catch (const std::exception&) {
        return;  // "ProfilerStep#abc": not a step span
      }
    } else if (n == "record_param_comms" || starts_with(n, "nccl:")) {
      span.kind = CpuSpan::Kind::CommOp;
      fill_comm_from_args(ev, span.comm);
      if (n != "record_param_comms" && span.comm.kind == TraceCollective::Unknown)
        span.comm.kind = collective_from_op_name(n.substr(5));
      // Input Dims of nccl:* ops: the input tensors (one list per tensor); their elements add.
      if (span.comm.in_elems < 0 && !ev.input_dims.empty() && !ev.input_types.empty()) {
        std::int64_t total = 0;
        bool any = false;
        for (std::size_t i = 0; i < ev.input_dims.size() && i < ev.input_types.size(); ++i) {
          int eb = dtype_bytes_from_name(ev.input_types[i]);
          if (eb == 0 || ev.input_dims[i].empty()) continue;
          std::int64_t p = 1;
          for (auto d : ev.input_dims[i]) p *= d;
          total += p;
          any = true;
          if (span.comm.elem_bytes == 0) {
            span.comm.elem_bytes = eb;
            span.comm.dtype = ev.input_types[i];
          }
        }
        if (any) span.comm.in_elems = total;
      }
      span.comm_has_params = span.comm.in_elems >= 0 || span.comm.kind != TraceCollective::Unknown;
    } else if (starts_with(n, "Optimizer.step#")) {
      span.kind = CpuSpan::Kind::Optimizer;
    } else if (starts_with(n, "autograd::engine::evaluate_function")) {
      span.kind = CpuSpan::Kind::Backward;
    } else if ((n == "aten::mm" || n == "aten::addmm" || n == "aten::bmm" || n == "aten::baddbmm") &&
               !ev.input_dims.empty()) {
      span.kind = CpuSpan::Kind::Gemm;
      span.input_dims = ev.input_dims;
      if (!ev.input_types.empty()) span.input_type = ev.input_types.front();
    } else {
      return;
    }
    span.name = intern(n);
    out_.cpu.push_back(std::move(span));
    return;
  }
  if (ev.ph == "i" && ev.name == "[memory]") {
    // Kineto: Device Type 1 is CUDA (c10::DeviceType); CPU allocations are type 0.
    if (ev.device_type.set && ev.device_type.as_int() == 1 && ev.total_allocated.set && ev.ts.set)
      out_.memory.push_back(MemSample{ev.ts.as_us_time(), static_cast<int>(ev.device_id.as_int()),
                                      Bytes{ev.total_allocated.as_int()}});
    return;
  }
  if (ev.ph == "C" && ev.ts.set && ev.counter_any) {
    std::int64_t total = ev.counter_total.set ? ev.counter_total.as_int() : ev.counter_sum;
    out_.memory.push_back(MemSample{ev.ts.as_us_time(), static_cast<int>(ev.pid.v), Bytes{total}, ev.counter_args});
  }
}

// nlohmann's istream adapter pays a streambuf call per character; this input iterator reads
// the (decompressed) stream in 1 MiB chunks and hands the lexer plain pointer increments.
// Memory: one chunk, whatever the file size.
class ChunkSource {
 public:
  explicit ChunkSource(std::istream& in) : in_(in), buf_(1 << 20) { refill(); }
  void refill() {
    in_.read(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    auto n = static_cast<std::size_t>(in_.gcount());
    p_ = buf_.data();
    e_ = p_ + n;
    eof_ = n == 0;
  }
  const char* p_ = nullptr;
  const char* e_ = nullptr;
  bool eof_ = false;

 private:
  std::istream& in_;
  std::vector<char> buf_;
};

class ChunkIter {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  ChunkIter() = default;  // the end
  explicit ChunkIter(ChunkSource* s) : s_(s) {}
  reference operator*() const { return *s_->p_; }
  ChunkIter& operator++() {
    if (++s_->p_ == s_->e_) s_->refill();
    return *this;
  }
  bool operator==(const ChunkIter& o) const { return at_end() == o.at_end(); }
  bool operator!=(const ChunkIter& o) const { return !(*this == o); }

 private:
  bool at_end() const { return s_ == nullptr || s_->eof_; }
  ChunkSource* s_ = nullptr;
};

void parse_stream(std::istream& in, KinetoTrace& out) {
  Handler h(out);
  try {
    ChunkSource src(in);
    nlohmann::json::sax_parse(ChunkIter(&src), ChunkIter(), &h);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(out.file + ": " + e.what() + ": expected a JSON trace");
  }
}

}  // namespace

KinetoTrace read_kineto_trace(const std::filesystem::path& file) {
  KinetoTrace out;
  out.file = file.string();
  std::ifstream raw(file, std::ios::binary);
  if (!raw) throw InputError(out.file + ": cannot open: expected a readable trace file");
  unsigned char magic[2] = {0, 0};
  raw.read(reinterpret_cast<char*>(magic), 2);
  raw.clear();
  raw.seekg(0);
  if (magic[0] == 0x1f && magic[1] == 0x8b) {
    boost::iostreams::filtering_istream in;
    in.push(boost::iostreams::gzip_decompressor());
    in.push(raw);
    try {
      parse_stream(in, out);
    } catch (const boost::iostreams::gzip_error& e) {
      throw InputError(out.file + ": " + e.what() + ": expected a gzip-compressed JSON trace");
    }
  } else {
    parse_stream(raw, out);
  }
  if (out.event_count == 0 && out.gpu_ops.empty())
    throw InputError(out.file + ": /traceEvents: missing or empty: expected a Kineto/Chrome trace");
  return out;
}

KinetoTrace read_kineto_trace_text(const std::string& json_text, const std::string& label) {
  KinetoTrace out;
  out.file = label;
  std::istringstream in(json_text);
  parse_stream(in, out);
  return out;
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
