#include "core/model/report.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/isa/target.h"

namespace trn::model {
namespace {

using isa::Engine;
using isa::Opcode;

constexpr double kSmallRunBytes = 2048;    // "at least 2 KiB per partition to be efficient"
constexpr double kSmallRunShare = 0.25;    // of DMA bytes
constexpr double kTargetDmaBytes = 32768;  // "average DMA size (target >= 32 KiB)"
constexpr double kTransposeShare = 0.10;   // "transposes over 10 % of hardware FLOPs"
constexpr double kUsefulShare = 0.50;      // "useful FLOPs under 50 % of active FLOPs"
constexpr double kBusyShare = 0.80;        // an engine this busy bounds the run

double Active(const Timeline& t, Engine e) { return t.engine_active_ns[static_cast<int>(e)]; }

std::string Bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1 << 20) return fmt::format("{:.1f} MiB", b / (1 << 20));
  if (b >= 1 << 10) return fmt::format("{:.1f} KiB", b / (1 << 10));
  return fmt::format("{:.0f} B", b);
}

std::string Count(int64_t n) {  // 132096 -> "132,096"
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

}  // namespace

std::vector<std::string> Recommendations(const isa::Executable& exe, const Timeline& t) {
  const Metrics m = ComputeMetrics(exe, t);
  std::vector<std::string> r;
  const double total = std::max(t.total_ns, 1e-9);
  const double dma = Active(t, Engine::kDma) / total, tensor = Active(t, Engine::kTensor) / total;
  if (m.memory_bound && dma >= kBusyShare) {
    r.push_back(fmt::format(
        "DMA-bound: DMA is active {:.1f} % of the run and the arithmetic intensity is {:.1f} "
        "FLOP/B, under the ridge point {:.1f}; reuse loaded tiles across more matmuls (hoist "
        "loads out of the inner loop, block the free dims)",
        100 * dma, m.arithmetic_intensity, m.ridge_point));
  }
  double small = 0;
  for (const DmaTransfer& x : t.transfers) {
    if (x.runs > 0 && static_cast<double>(x.bytes) / x.runs < kSmallRunBytes) small += x.bytes;
  }
  if (t.dma_bytes > 0 && small / t.dma_bytes > kSmallRunShare) {
    r.push_back(fmt::format(
        "{:.0f} % of DMA bytes move in runs under 2 KiB per partition, where a DMA engine "
        "spends a large share of its time on per-run overhead; load wider tiles (>= 2 KiB, "
        "ideally >= 4 KiB per partition)",
        100 * small / t.dma_bytes));
  }
  if (t.dma_count > 0 && m.average_dma_bytes < kTargetDmaBytes) {
    r.push_back(
        fmt::format("the average dma_copy moves {} (target >= 32 KiB): merge small "
                    "transfers into larger tiles",
                    Bytes(m.average_dma_bytes)));
  }
  if (t.tensor_flops > 0 && t.transpose_flops / t.tensor_flops > kTransposeShare) {
    r.push_back(
        fmt::format("transposes are {:.0f} % of the Tensor engine's FLOPs: load operands "
                    "already transposed (a DMA transpose) or keep them in the layout the "
                    "matmul wants",
                    100 * t.transpose_flops / t.tensor_flops));
  }
  if (t.tensor_flops > 0 && t.useful_flops / t.tensor_flops < kUsefulShare) {
    r.push_back(fmt::format("only {:.0f} % of the Tensor engine's FLOPs are matmul work",
                            100 * t.useful_flops / t.tensor_flops));
  }
  int fp32 = 0, matmuls = 0;
  for (const isa::Instruction& ins : exe.instructions) {
    if (ins.opcode != Opcode::kMultiplyMoving) continue;
    ++matmuls;
    fp32 += ins.src0.dtype == DType::kFloat32 || ins.src1.dtype == DType::kFloat32;
  }
  if (matmuls > 0 && 2 * fp32 > matmuls) {
    r.push_back(fmt::format(
        "{:.0f} % of the matmuls are fp32: two passes at a quarter of the bf16 rate, so HFU "
        "cannot pass 25 %; use bf16 (or fp8) inputs where the accuracy allows",
        100.0 * fp32 / matmuls));
  }
  if (!m.memory_bound && tensor < kBusyShare && t.useful_flops > 0) {
    r.push_back(
        fmt::format("compute-bound but the Tensor engine is active only {:.1f} %: "
                    "overlap loads with matmuls (more buffers) so it never waits",
                    100 * tensor));
  }
  if (r.empty()) {
    r.push_back("no threshold crossed: the engines are balanced for this program");
  }
  if (r.size() > 4) r.resize(4);
  return r;
}

std::string FormatDeviceProfile(const isa::Executable& exe, const Timeline& t) {
  const isa::TargetSpec& spec = isa::Spec(exe.target);
  const Metrics m = ComputeMetrics(exe, t);
  std::string s = fmt::format(
      "device profile: {} \xe2\x80\x94 modelled ({}, {}), error bound \xc2\xb1{} %; not a "
      "measurement\n",
      exe.name, spec.name, spec.core, kErrorBoundPct);
  int64_t instructions = 0;
  for (int64_t c : t.instruction_counts) instructions += c;
  s += fmt::format("{:<22}{:.3f} ms\n", "total", t.total_ns / 1e6);
  s += fmt::format("{:<22}{} hardware instructions ({} in the executable)\n", "instructions",
                   Count(instructions), Count(static_cast<int64_t>(exe.instructions.size())));
  s += fmt::format("{:<22}{:.2f} % / {:.2f} % / {:.2f} %\n", "HFU / MFU / MBU", 100 * m.hfu,
                   100 * m.mfu, 100 * m.mbu);
  s += fmt::format("{:<22}{:.1f} FLOP/B vs ridge point {:.1f} FLOP/B: {}-bound\n",
                   "arithmetic intensity", m.arithmetic_intensity, m.ridge_point,
                   m.memory_bound ? "memory" : "compute");
  s += fmt::format("{:<22}{} per dma_copy ({} dma_copy, {} from/to HBM)\n", "average DMA size",
                   Bytes(m.average_dma_bytes), Count(t.dma_count),
                   Bytes(static_cast<double>(t.hbm_bytes)));
  s +=
      fmt::format("\n{:<8}{:>12}{:>10}{:>15}\n", "engine", "active ms", "active %", "instructions");
  for (int e = 0; e < isa::kNumEngines; ++e) {
    const double a = t.engine_active_ns[e];
    s += fmt::format("{:<8}{:>12.3f}{:>9.1f} %{:>15}\n", isa::EngineName(static_cast<Engine>(e)),
                     a / 1e6, t.total_ns > 0 ? 100 * a / t.total_ns : 0.0,
                     Count(t.instruction_counts[e]));
  }
  s += "\nrecommendations:\n";
  int k = 0;
  for (const std::string& r : Recommendations(exe, t)) s += fmt::format("  {}. {}\n", ++k, r);
  return s;
}

}  // namespace trn::model
