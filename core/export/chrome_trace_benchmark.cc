// Chrome-trace export throughput (target >= 150 MB/s) on 1M device/runtime
// records + 250k host ops, next to its peer: fwrite of the same bytes from a
// pre-built buffer to a temporary file that is then renamed, i.e. what the
// file system alone costs. BM_ChromeTraceExport reports both rates and their
// ratio from interleaved runs; BM_ChromeTraceFwritePeer is the peer alone.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/export/chrome_trace.h"

namespace trn::exporter {
namespace {

using trace::Record;
using trace::RecordKind;

constexpr int kHostOps = 250'000;  // each launches 2 kernels: 4 records per op
constexpr const char* kPath = "/tmp/trn_chrome_trace_bench.json";

struct Input {
  trace::Collected collected;
  ExportInput input;
};

const Input& BenchInput() {
  static const Input* in = [] {
    static const char* kOps[] = {"aten::mul", "aten::add", "aten::pow", "aten::mean",
                                 "aten::rsqrt", "aten::mm"};
    static const char* kKernels[] = {"mul_f32", "add_f32", "pow_f32", "mean_f32", "rsqrt_f32",
                                     "gemm_f32"};
    auto* in = new Input;
    in->input.pid = 31337;
    in->input.metadata_json = R"({"study": "bench"})";
    in->collected.records.reserve(4 * kHostOps);
    int64_t t = 1'733'140'000'000'000'000;
    uint64_t launch = 0;
    for (int i = 0; i < kHostOps; ++i, t += 10'000) {
      const int k = i % 6;
      HostOp op;
      op.name = kOps[k];
      op.start_ns = t;
      op.end_ns = t + 6'000;
      op.tid = 4000 + i % 2;
      op.correlation_id = i + 1;
      op.input_shapes = "[[8, 4096], [8, 4096]]";
      op.input_dtypes = R"(["float", "float"])";
      op.sequence = i;
      in->input.host_ops.push_back(std::move(op));
      for (int j = 0; j < 2; ++j) {
        Record r;
        r.kind = RecordKind::kLaunch;
        r.start = t + 1'000 + 2'000 * j;
        r.end = r.start + 700;
        r.correlation_id = i + 1;
        r.launch_id = ++launch;
        r.name = "trnLaunchKernel";
        r.op = kOps[k];
        r.tid = 4000 + i % 2;
        r.device = static_cast<int16_t>(i % 2);
        r.stream = static_cast<int16_t>(j);
        in->collected.records.push_back(r);
        r.kind = RecordKind::kKernel;
        r.start += 1'500;
        r.end = r.start + 3'333;
        r.name = kKernels[k];
        r.flops = 32768;
        r.bytes_read = 262144;
        r.bytes_written = 131072;
        r.engine = rt::Engine::kVector;
        r.tid = 5000;
        in->collected.records.push_back(r);
      }
    }
    // The tracer's records are sorted by start.
    std::stable_sort(in->collected.records.begin(), in->collected.records.end(),
                     [](const Record& a, const Record& b) { return a.start < b.start; });
    in->collected.dropped_per_device.assign(trace::kMaxDevices, 0);
    in->input.device = &in->collected;
    return in;
  }();
  return *in;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The peer: the same bytes, already formatted, written and renamed the same way.
void FwriteAll(const std::string& bytes, const std::string& path) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) std::abort();
  constexpr size_t kChunk = size_t{4} << 20;
  for (size_t off = 0; off < bytes.size(); off += kChunk)
    std::fwrite(bytes.data() + off, 1, std::min(kChunk, bytes.size() - off), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

std::string WrittenBytes() {
  WriteChromeTrace(BenchInput().input, kPath);
  std::ifstream f(kPath, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void BM_ChromeTraceExport(benchmark::State& state) {
  const Input& in = BenchInput();
  const std::string bytes = WrittenBytes();
  const std::string peer_path = std::string(kPath) + ".peer";
  double export_s = 0, peer_s = 0;
  ExportStats stats;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    stats = WriteChromeTrace(in.input, kPath);
    const double s = Seconds(t0);
    state.SetIterationTime(s);
    export_s += s;
    t0 = std::chrono::steady_clock::now();
    FwriteAll(bytes, peer_path);
    peer_s += Seconds(t0);
  }
  const double n = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(stats.bytes) * state.iterations());
  state.counters["events"] = static_cast<double>(stats.events);
  state.counters["MB/s"] = stats.bytes * n / export_s / 1e6;
  state.counters["fwrite_MB/s"] = stats.bytes * n / peer_s / 1e6;
  state.counters["time_vs_fwrite"] = export_s / peer_s;
  std::remove(kPath);
  std::remove(peer_path.c_str());
}
BENCHMARK(BM_ChromeTraceExport)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(3);

void BM_ChromeTraceFwritePeer(benchmark::State& state) {
  const std::string bytes = WrittenBytes();
  for (auto _ : state) FwriteAll(bytes, kPath);
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size()) * state.iterations());
  std::remove(kPath);
}
BENCHMARK(BM_ChromeTraceFwritePeer)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace trn::exporter
