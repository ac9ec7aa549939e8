#include "core/analysis/analyses/units.h"

#include <fmt/format.h>

namespace trn::analysis {

std::string FormatNs(int64_t ns) {
  const double a = static_cast<double>(ns < 0 ? -ns : ns);
  if (a >= 1e9) return fmt::format("{:.3f} s", ns / 1e9);
  if (a >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  if (a >= 1e3) return fmt::format("{:.3f} us", ns / 1e3);
  return fmt::format("{} ns", ns);
}

std::string FormatBytes(uint64_t b) {
  const double v = static_cast<double>(b);
  if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", v / (1 << 30));
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", v / (1 << 20));
  if (b >= (uint64_t{1} << 10)) return fmt::format("{:.2f} KiB", v / (1 << 10));
  return fmt::format("{} B", b);
}

std::string FormatCount(double v) {
  if (v >= 1e12) return fmt::format("{:.2f} T", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.2f} K", v / 1e3);
  return fmt::format("{:.0f}", v);
}

}  // namespace trn::analysis
