// index_select and cat against element-by-element references over every
// dtype, dim and layout, and index_select's out-of-range errors. These
// kernels are memcpy/strided copies without Highway code, so they are not
// repeated per SIMD target.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

using testing::Empty;
using testing::Layout;
using testing::MakeLayout;
using testing::MakeRandom;
using testing::TestTensor;

const DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kFloat16,
                            DType::kInt32,   DType::kInt64,   DType::kBool};

// Row-major multi-index of linear index i in `sizes`.
std::vector<int64_t> Unravel(int64_t i, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> idx(sizes.size());
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    idx[d] = i % sizes[d];
    i /= sizes[d];
  }
  return idx;
}
int64_t Ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& sizes) {
  int64_t i = 0;
  for (size_t d = 0; d < sizes.size(); ++d) i = i * sizes[d] + idx[d];
  return i;
}

TestTensor MakeIndex(DType dt, const std::vector<int64_t>& values, bool strided) {
  const int64_t n = static_cast<int64_t>(values.size());
  TestTensor t = MakeLayout(dt, {n}, strided ? Layout::kStep2 : Layout::kContiguous);
  for (int64_t i = 0; i < n; ++i) t.Set(i, static_cast<double>(values[i]));
  return t;
}

TEST(IndexSelect, DTypesDimsLayouts) {
  const std::vector<int64_t> sizes = {4, 5, 6};
  for (DType dt : kAllDTypes) {
    for (Layout layout : {Layout::kContiguous, Layout::kTransposed, Layout::kStep2,
                          Layout::kBroadcast, Layout::kMisaligned}) {
      TestTensor in = MakeRandom(dt, sizes, layout, 11, -1000, 1000);
      for (int dim = 0; dim < 3; ++dim) {
        for (DType idx_dt : {DType::kInt32, DType::kInt64}) {
          SCOPED_TRACE(std::string(DTypeName(dt)) + " " + testing::LayoutName(layout) +
                       " dim " + std::to_string(dim) + " index " + DTypeName(idx_dt));
          const std::vector<int64_t> values = {3, 0, 3, 1, sizes[dim] - 1};
          TestTensor index = MakeIndex(idx_dt, values, dim != 2);
          std::vector<int64_t> out_sizes = sizes;
          out_sizes[dim] = static_cast<int64_t>(values.size());
          TestTensor out = MakeLayout(dt, out_sizes, dim == 2 ? Layout::kTransposed
                                                               : Layout::kContiguous);
          const Status st = IndexSelect(out.ref, in.ref, dim, index.ref);
          ASSERT_TRUE(st.ok()) << st.error;
          for (int64_t i = 0; i < out.numel(); ++i) {
            std::vector<int64_t> idx = Unravel(i, out_sizes);
            idx[dim] = values[idx[dim]];
            ASSERT_EQ(out.AtInt(i), in.AtInt(Ravel(idx, sizes))) << "element " << i;
            ASSERT_EQ(out.At(i), in.At(Ravel(idx, sizes))) << "element " << i;
          }
        }
      }
    }
  }
}

TEST(IndexSelect, EmbeddingLookup) {
  // Embedding: rows of a [vocab, dim] table gathered by token ids (int64).
  TestTensor table = MakeRandom(DType::kBFloat16, {10, 48}, Layout::kContiguous, 5);
  const std::vector<int64_t> tokens = {9, 0, 4, 4, 7, 1};
  TestTensor index = MakeIndex(DType::kInt64, tokens, false);
  TestTensor out = Empty(DType::kBFloat16, {6, 48});
  ASSERT_TRUE(IndexSelect(out.ref, table.ref, 0, index.ref).ok());
  for (int64_t t = 0; t < 6; ++t) {
    for (int64_t j = 0; j < 48; ++j) {
      ASSERT_EQ(out.At(t * 48 + j), table.At(tokens[t] * 48 + j));
    }
  }
}

// Note [Row gather]: rows along dim 0 that are contiguous runs, whatever their
// distance apart in `in` and `out` (column slices of wider rows), size-1 dims
// with any stride, and 1-D tables (rows of one element).
TEST(IndexSelect, RowGatherOfRowsApart) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kInt64}) {
    SCOPED_TRACE(DTypeName(dt));
    TestTensor in = MakeRandom(dt, {6, 8}, Layout::kContiguous, 3, -100, 100);
    in.ref.sizes[1] = 5;  // [6, 5] rows 8 apart
    TestTensor out = Empty(dt, {4, 7});
    out.ref.sizes[1] = 5;  // [4, 5] rows 7 apart
    const std::vector<int64_t> rows = {5, 0, 5, 2};
    TestTensor index = MakeIndex(DType::kInt32, rows, true);
    ASSERT_TRUE(IndexSelect(out.ref, in.ref, 0, index.ref).ok());
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t j = 0; j < 5; ++j) ASSERT_EQ(out.At(r * 5 + j), in.At(rows[r] * 5 + j));
    }
    TestTensor in3 = MakeRandom(dt, {6, 1, 3}, Layout::kContiguous, 4, -100, 100);
    in3.ref.strides[1] = 99;  // a size-1 dim's stride is never used
    TestTensor out3 = Empty(dt, {4, 1, 3});
    ASSERT_TRUE(IndexSelect(out3.ref, in3.ref, 0, index.ref).ok());
    for (int64_t i = 0; i < 12; ++i) ASSERT_EQ(out3.At(i), in3.At(rows[i / 3] * 3 + i % 3));
    TestTensor in1 = MakeRandom(dt, {6}, Layout::kContiguous, 5, -100, 100);
    TestTensor out1 = Empty(dt, {4});
    ASSERT_TRUE(IndexSelect(out1.ref, in1.ref, 0, index.ref).ok());
    for (int64_t r = 0; r < 4; ++r) ASSERT_EQ(out1.At(r), in1.At(rows[r]));
  }
  // Rows of 16, 32 and 64 bytes: the copies of a constant size.
  for (int64_t width : {4, 8, 16}) {
    SCOPED_TRACE("float32 rows of " + std::to_string(width));
    TestTensor in = MakeRandom(DType::kFloat32, {6, width + 3}, Layout::kContiguous, 6);
    in.ref.sizes[1] = width;
    TestTensor whole = Empty(DType::kFloat32, {4, width + 1});
    testing::FillRandom(whole, 7);
    const std::vector<double> before = whole.Values();
    TestTensor out = whole;
    out.ref.sizes[1] = width;
    const std::vector<int64_t> rows = {1, 5, 0, 1};
    TestTensor index = MakeIndex(DType::kInt64, rows, false);
    ASSERT_TRUE(IndexSelect(out.ref, in.ref, 0, index.ref).ok());
    for (int64_t i = 0; i < 4 * width; ++i) {
      ASSERT_EQ(out.At(i), in.At(rows[i / width] * width + i % width)) << i;
    }
    for (int64_t r = 0; r < 4; ++r) {  // the column past each row is not written
      ASSERT_EQ(whole.At(r * (width + 1) + width), before[r * (width + 1) + width]) << r;
    }
  }
  // No rows at all: an empty table by an empty index.
  TestTensor none = Empty(DType::kFloat32, {0, 3});
  TestTensor none_out = Empty(DType::kFloat32, {0, 3});
  TestTensor no_index = MakeIndex(DType::kInt64, {}, false);
  EXPECT_TRUE(IndexSelect(none_out.ref, none.ref, 0, no_index.ref).ok());
}

TEST(IndexSelect, OutOfRangeIsAnErrorAndLeavesOutUntouched) {
  TestTensor in = MakeRandom(DType::kFloat32, {10, 3}, Layout::kContiguous, 1);
  TestTensor out = Empty(DType::kFloat32, {3, 3});
  testing::FillRandom(out, 2);
  const std::vector<double> before = out.Values();
  for (DType idx_dt : {DType::kInt32, DType::kInt64}) {
    TestTensor index = MakeIndex(idx_dt, {1, 12, 2}, false);
    Status st = IndexSelect(out.ref, in.ref, 0, index.ref);
    EXPECT_EQ(st.error, "index 12 is out of range for dimension 0 with size 10");
    // torch's CPU index_select rejects negative indices too (no wrap-around).
    index = MakeIndex(idx_dt, {-1, 0, 0}, false);
    st = IndexSelect(out.ref, in.ref, 0, index.ref);
    EXPECT_EQ(st.error, "index -1 is out of range for dimension 0 with size 10");
    index = MakeIndex(idx_dt, {0, 3, 0}, false);
    TestTensor out1 = Empty(DType::kFloat32, {10, 3});
    st = IndexSelect(out1.ref, in.ref, 1, index.ref);
    EXPECT_EQ(st.error, "index 3 is out of range for dimension 1 with size 3");
  }
  EXPECT_EQ(out.Values(), before);
}

TEST(Cat, DTypesDimsLayouts) {
  for (DType dt : kAllDTypes) {
    for (int dim = 0; dim < 3; ++dim) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + " dim " + std::to_string(dim));
      std::vector<TestTensor> parts;
      std::vector<int64_t> out_sizes = {3, 4, 5};
      out_sizes[dim] = 0;
      const Layout layouts[] = {Layout::kContiguous, Layout::kTransposed, Layout::kStep2,
                                Layout::kMisaligned};
      for (int p = 0; p < 4; ++p) {
        std::vector<int64_t> s = {3, 4, 5};
        s[dim] = p + 1;
        parts.push_back(MakeRandom(dt, s, layouts[p], 20 + p, -100, 100));
        out_sizes[dim] += s[dim];
      }
      parts.insert(parts.begin() + 2, Empty(dt, {0}));  // torch's legacy empty input
      std::vector<TensorRef> refs;
      for (const TestTensor& t : parts) refs.push_back(t.ref);
      TestTensor out = MakeLayout(dt, out_sizes, dim == 0 ? Layout::kStep2 : Layout::kContiguous);
      ASSERT_TRUE(Cat(out.ref, refs, dim).ok());
      int64_t offset = 0;
      for (const TestTensor& t : parts) {
        if (t.numel() == 0) continue;
        const std::vector<int64_t> s = t.sizes();
        for (int64_t i = 0; i < t.numel(); ++i) {
          std::vector<int64_t> idx = Unravel(i, s);
          idx[dim] += offset;
          ASSERT_EQ(out.AtInt(Ravel(idx, out_sizes)), t.AtInt(i));
          ASSERT_EQ(out.At(Ravel(idx, out_sizes)), t.At(i));
        }
        offset += s[dim];
      }
    }
  }
}

TEST(IndexAndCat, Describe) {
  TestTensor out = Empty(DType::kInt64, {6, 8});
  TestTensor index = Empty(DType::kInt32, {6});
  KernelInfo info = DescribeIndexSelect(out.ref, index.ref, "aten::embedding");
  EXPECT_STREQ(info.name, "index_select_i64");
  EXPECT_STREQ(info.op, "aten::embedding");
  EXPECT_EQ(info.engine, rt::Engine::kDma);
  EXPECT_EQ(info.bytes_read, 6u * 8 * 8 + 6 * 4);
  EXPECT_EQ(info.bytes_written, 6u * 8 * 8);
  info = DescribeCat(out.ref, "aten::cat");
  EXPECT_STREQ(info.name, "cat_i64");
  EXPECT_EQ(info.bytes_written, 6u * 8 * 8);
}

}  // namespace
}  // namespace trn::kernels
