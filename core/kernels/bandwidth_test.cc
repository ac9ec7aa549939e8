#include "core/kernels/bandwidth.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

// Every length around the vector width and every misalignment of dst: the
// non-temporal copy has an aligned body, a scalar head and a scalar tail.
TEST(Bandwidth, CopyNonTemporalMatchesEveryElement) {
  testing::ForEachTarget([](const char* target) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{15}, size_t{16}, size_t{33},
                     size_t{64}, size_t{1000}, size_t{4099}}) {
      for (size_t shift = 0; shift < 16; shift += 3) {
        std::vector<float> src(n + 16), dst(n + 32, -1.0f);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 3.0f;
        CopyNonTemporal(dst.data() + shift, src.data() + 1, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= shift && i < shift + n;
          const float want = inside ? src[i - shift + 1] : -1.0f;
          ASSERT_EQ(dst[i], want) << target << " n=" << n << " shift=" << shift << " i=" << i;
        }
      }
    }
  });
}

TEST(Bandwidth, MeasuresEveryMethodAndLeavesTheirResult) {
  const size_t n = size_t{1} << 18;  // 1 MiB per buffer
  std::vector<float> a(n), b(n), c(n);
  const std::vector<BandwidthSample> s = MeasureBandwidth(a.data(), b.data(), c.data(), n, 2);
  ASSERT_EQ(s.size(), 4u);
  const std::vector<std::string> want = {"memcpy", "copy_nontemporal", "copy", "add"};
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].method, want[i]);
    EXPECT_GT(s[i].bytes_per_s, 1e6) << s[i].method;  // a real copy, not a skipped one
  }
  // The last method run is add: c = a + b over the buffers it filled (1 and 2).
  for (size_t i = 0; i < n; i += 4097) ASSERT_EQ(c[i], 3.0f) << i;
  EXPECT_EQ(c[n - 1], 3.0f);
}

}  // namespace
}  // namespace trn::kernels
