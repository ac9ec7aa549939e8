#include "core/export/device_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/export/json_sink.h"
#include "core/isa/inspect.h"
#include "core/isa/target.h"
#include "core/model/cost.h"

namespace trn::exporter {
namespace {

using isa::Engine;

constexpr int kPid = 1;
constexpr int kDmaTidBase = 100;
constexpr int kCounterBins = 400;  // "DMA GB/s" samples over the run
// Chrome's reserved colour names (chrome://tracing honours "cname"; Perfetto
// colours by name): one per source op, cycling.
constexpr const char* kColours[] = {"thread_state_running",
                                    "rail_response",
                                    "rail_animation",
                                    "rail_load",
                                    "cq_build_passed",
                                    "startup",
                                    "good",
                                    "yellow",
                                    "olive",
                                    "generic_work"};

int64_t Ns(double ns) { return std::llround(ns); }

class Writer {
 public:
  Writer(const isa::Executable& exe, const model::Timeline& t, const std::string& path,
         uint64_t max_flows)
      : exe_(exe), t_(t), spec_(isa::Spec(exe.target)), sink_(path), max_flows_(max_flows) {}

  DeviceTraceStats Run() {
    sink_.Raw("{\"traceEvents\":[\n");
    Metadata();
    IndexFlows();
    for (uint32_t i = 0; i < exe_.instructions.size(); ++i) Instruction(i);
    Counters();
    sink_.Raw("\n],\"displayTimeUnit\":\"ns\",\"trnscope_device\":");
    Summary();
    sink_.Raw("}\n");
    sink_.Commit();
    return stats_;
  }

 private:
  void Begin() {
    if (stats_.events++ > 0) sink_.Raw(",\n");
  }
  void Lane(int tid, const std::string& name, int order) {
    Begin();
    sink_.Raw(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":)",
                          kPid, tid));
    sink_.Str(name);
    sink_.Raw("}}");
    Begin();
    sink_.Raw(fmt::format(
        R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
        kPid, tid, order));
  }
  void Metadata() {
    Begin();
    sink_.Raw(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":)", kPid));
    sink_.Str(fmt::format("NeuronCore 0 \xe2\x80\x94 modelled ({}, {})", spec_.name, spec_.core));
    sink_.Raw("}}");
    for (int e = 0; e < isa::kNumEngines; ++e) {
      if (static_cast<Engine>(e) == Engine::kDma) continue;
      Lane(e + 1, isa::EngineName(static_cast<Engine>(e)), e);
    }
    for (int q = 0; q < model::kDmaEngines; ++q) {
      Lane(kDmaTidBase + q, fmt::format("dma {}", q), 10 + q);
    }
  }

  // Dependencies by producer, so each "s" follows its producer's slice
  // (Note [Flow binding] in chrome_trace.cc); t_.dependencies is in consumer order.
  void IndexFlows() {
    const size_t n = exe_.instructions.size();
    const size_t kept = std::min<uint64_t>(t_.dependencies.size(), max_flows_);
    stats_.flows_truncated = kept < t_.dependencies.size();
    from_start_.assign(n + 1, 0);
    for (size_t k = 0; k < kept; ++k) ++from_start_[t_.dependencies[k].from + 1];
    for (size_t i = 0; i < n; ++i) from_start_[i + 1] += from_start_[i];
    by_from_.resize(kept);
    std::vector<uint32_t> fill(from_start_.begin(), from_start_.end() - 1);
    for (uint32_t k = 0; k < kept; ++k) by_from_[fill[t_.dependencies[k].from]++] = k;
    // The first DMA transfer of each dma_copy is its slice for flows.
    first_transfer_.assign(n, UINT32_MAX);
    for (uint32_t k = t_.transfers.size(); k-- > 0;) {
      first_transfer_[t_.transfers[k].instruction] = k;
    }
    transfers_at_ = 0;
    kept_ = kept;
  }

  // The (tid, start) a flow of instruction i binds to.
  std::pair<int, double> Anchor(uint32_t i) const {
    const isa::Instruction& ins = exe_.instructions[i];
    if (ins.engine != Engine::kDma) return {static_cast<int>(ins.engine) + 1, t_.start_ns[i]};
    const uint32_t k = first_transfer_[i];
    if (k == UINT32_MAX) return {kDmaTidBase, t_.start_ns[i]};
    return {kDmaTidBase + t_.transfers[k].dma_engine, t_.transfers[k].start_ns};
  }

  // Opens a slice up to its args object; the caller writes the fields and
  // CloseSlice() ends it.
  void OpenSlice(const char* name, const char* cat, int tid, double start, double end,
                 const char* cname) {
    Begin();
    sink_.Raw("{\"ph\":\"X\",\"name\":");
    sink_.Str(name);
    sink_.Raw(fmt::format(",\"cat\":\"{}\",\"pid\":{},\"tid\":{},\"ts\":", cat, kPid, tid));
    sink_.Milli(Ns(start));
    sink_.Raw(",\"dur\":");
    sink_.Milli(std::max<int64_t>(0, Ns(end) - Ns(start)));
    if (cname != nullptr) sink_.Raw(fmt::format(",\"cname\":\"{}\"", cname));
    sink_.Raw(",\"args\":{");
  }
  void CloseSlice() { sink_.Raw("}}"); }

  void Field(const char* key, std::string_view value) {
    sink_.Raw(fmt::format(",\"{}\":", key));
    sink_.Str(value);
  }

  // The instruction's fields of a slice's args.
  void Args(uint32_t i) {
    const isa::Instruction& ins = exe_.instructions[i];
    const isa::Operands io = isa::OperandsOf(ins);
    sink_.Raw(fmt::format("\"instruction\":{},\"engine\":\"{}\"", i, isa::EngineName(ins.engine)));
    if (io.writes_dst || io.reads_dst) Field("dst", isa::FormatOperand(exe_, ins.dst));
    if (io.reads_src0) Field("src0", isa::FormatOperand(exe_, ins.src0));
    if (io.reads_src1 || io.writes_src1) Field("src1", isa::FormatOperand(exe_, ins.src1));
    if (ins.source == isa::kNone) return;
    const isa::SourceLoc& src = exe_.sources[ins.source];
    if (!src.file.empty()) Field("source", fmt::format("{}:{}", src.file, src.line));
    if (!src.op.empty()) Field("op", src.op);
    if (src.kernel_id >= 0) sink_.Raw(fmt::format(",\"kernel_id\":{}", src.kernel_id));
  }

  void Instruction(uint32_t i) {
    const isa::Instruction& ins = exe_.instructions[i];
    const char* cname =
        ins.source == isa::kNone ? nullptr : kColours[ins.source % std::size(kColours)];
    if (ins.engine == Engine::kDma) {
      for (; transfers_at_ < t_.transfers.size() && t_.transfers[transfers_at_].instruction == i;
           ++transfers_at_) {
        const model::DmaTransfer& x = t_.transfers[transfers_at_];
        OpenSlice("dma_copy", "gpu_memcpy", kDmaTidBase + x.dma_engine, x.start_ns, x.end_ns,
                  cname);
        Args(i);
        sink_.Raw(fmt::format(",\"bytes\":{},\"runs\":{}", x.bytes, x.runs));
        CloseSlice();
      }
    } else {
      OpenSlice(isa::OpcodeName(ins.opcode), "kernel", static_cast<int>(ins.engine) + 1,
                t_.start_ns[i], t_.end_ns[i], cname);
      Args(i);
      CloseSlice();
    }
    Flows(i);
  }

  void Flow(const char* ph, const model::Dependency& d, uint64_t id, uint32_t at) {
    const auto [tid, ts] = Anchor(at);
    Begin();
    sink_.Raw(
        fmt::format(R"({{"ph":"{}","name":"{}","cat":"dependency","id":{},"pid":{},"tid":{},)", ph,
                    model::DepKindName(d.kind), id, kPid, tid));
    if (ph[0] == 'f') sink_.Raw("\"bp\":\"e\",");
    sink_.Raw("\"ts\":");
    sink_.Milli(Ns(ts));
    sink_.Raw("}");
    ++stats_.flows;
  }

  // The flows ending at i (its dependencies are t_.dependencies[k] with to == i,
  // contiguous) and starting at i.
  void Flows(uint32_t i) {
    for (; deps_at_ < kept_ && t_.dependencies[deps_at_].to == i; ++deps_at_) {
      Flow("f", t_.dependencies[deps_at_], deps_at_ + 1, i);
    }
    for (uint32_t j = from_start_[i]; j < from_start_[i + 1]; ++j) {
      const uint32_t k = by_from_[j];
      Flow("s", t_.dependencies[k], k + 1, i);
    }
  }

  void Counter(const char* name, double ts, const char* key, double value) {
    Begin();
    sink_.Raw(fmt::format(R"({{"ph":"C","name":"{}","pid":{},"ts":)", name, kPid));
    sink_.Milli(Ns(ts));
    sink_.Raw(fmt::format(R"(,"args":{{"{}":{}}}}})", key, value));
  }

  void Counters() {
    for (const model::OccupancyPoint& p : t_.occupancy) {
      Counter("SBUF bytes", p.t_ns, "used", static_cast<double>(p.sbuf_bytes));
      Counter("PSUM bytes", p.t_ns, "used", static_cast<double>(p.psum_bytes));
    }
    if (t_.total_ns <= 0 || t_.transfers.empty()) return;
    // Bytes per bin, a transfer's bytes spread evenly over its duration.
    const double bin = t_.total_ns / kCounterBins;
    std::vector<double> bytes(kCounterBins + 1, 0.0);
    for (const model::DmaTransfer& x : t_.transfers) {
      const double dur = std::max(x.end_ns - x.start_ns, 1e-9);
      for (double s = x.start_ns; s < x.end_ns;) {
        const int b = std::min(kCounterBins, static_cast<int>(s / bin));
        const double e = std::min(x.end_ns, (b + 1) * bin);
        bytes[b] += x.bytes * (e - s) / dur;
        if (e <= s) break;
        s = e;
      }
    }
    for (int b = 0; b < kCounterBins; ++b) Counter("DMA GB/s", b * bin, "GB/s", bytes[b] / bin);
    Counter("DMA GB/s", t_.total_ns, "GB/s", 0);
  }

  void Summary() {
    const model::Metrics m = model::ComputeMetrics(exe_, t_);
    sink_.Raw(fmt::format(
        R"({{"modelled":true,"target":"{}","core":"{}","error_bound_pct":{},"executable":)",
        spec_.name, spec_.core, model::kErrorBoundPct));
    sink_.Str(exe_.name);
    sink_.Raw(fmt::format(R"(,"total_ns":{},"hfu":{},"mfu":{},"mbu":{},"arithmetic_intensity":{},)"
                          R"("ridge_point":{},"bound":"{}","flows_truncated":{}}})",
                          t_.total_ns, m.hfu, m.mfu, m.mbu, m.arithmetic_intensity, m.ridge_point,
                          m.memory_bound ? "memory" : "compute",
                          stats_.flows_truncated ? "true" : "false"));
  }

  const isa::Executable& exe_;
  const model::Timeline& t_;
  const isa::TargetSpec& spec_;
  Sink sink_;
  const uint64_t max_flows_;
  DeviceTraceStats stats_;
  std::vector<uint32_t> from_start_, by_from_, first_transfer_;
  size_t transfers_at_ = 0, deps_at_ = 0, kept_ = 0;
};

}  // namespace

Status WriteDeviceTrace(const isa::Executable& exe, const model::Timeline& t,
                        const std::string& path, DeviceTraceStats* stats, uint64_t max_flows) {
  try {
    *stats = Writer(exe, t, path, max_flows).Run();
  } catch (const Error& e) {  // Sink's write errors (Note [Errors in core])
    return Status::Error(e.what());
  }
  return Status::Ok();
}

}  // namespace trn::exporter
