// index_select (and embedding through it) and cat: pure data movement, so
// no SIMD math: every copy is expressed as "strided view <- strided view" and
// coalesced, which turns the common contiguous cases into one memcpy per run.
#include <cstring>
#include <string>

#include "core/common/assert.h"
#include "core/kernels/kernels.h"
#include "core/kernels/indexing_internal.h"

namespace trn::kernels {
namespace {

using internal::CopyView;
using internal::Narrow;
using internal::Select;

int64_t IndexAt(const TensorRef& index, int64_t i) {
  const int64_t off = index.ndim == 0 ? 0 : i * index.strides[0];
  return index.dtype == DType::kInt64 ? index.ptr<const int64_t>()[off]
                                      : index.ptr<const int32_t>()[off];
}

const char* NameFor(const char* const names[7], DType dt) {
  return names[static_cast<int>(dt)];  // DType order: f32 f64 bf16 f16 i32 i64 bool
}

}  // namespace

Status IndexSelect(const TensorRef& out, const TensorRef& in, int dim, const TensorRef& index) {
  TRN_ASSERT(index.dtype == DType::kInt32 || index.dtype == DType::kInt64,
             "index must be int32 or int64");
  TRN_ASSERT(index.ndim <= 1, "index must be 0-D or 1-D");
  TRN_ASSERT(in.ndim >= 1 ? (dim >= 0 && dim < in.ndim) : dim == 0, "dim out of range");
  TRN_ASSERT(out.dtype == in.dtype, "index_select out must have in's dtype");
  const int64_t count = index.numel();
  // A 0-d input behaves as size 1 along dim 0 (torch).
  const int64_t size = in.ndim == 0 ? 1 : in.sizes[dim];
  // Validate every index before writing anything: a failed kernel leaves out untouched.
  // Like torch's CPU index_select, negative indices are out of range (no wrap).
  for (int64_t j = 0; j < count; ++j) {
    const int64_t v = IndexAt(index, j);
    if (v < 0 || v >= size) {
      return Status::Error("index " + std::to_string(v) + " is out of range for dimension " +
                           std::to_string(dim) + " with size " + std::to_string(size));
    }
  }
  if (in.ndim == 0) {
    if (count > 0) std::memcpy(out.data, in.data, ItemSize(in.dtype));
    return Status::Ok();
  }
  TRN_ASSERT(out.ndim == in.ndim && out.sizes[dim] == count, "index_select out shape");
  for (int64_t j = 0; j < count; ++j) {
    CopyView(Select(out, dim, j), Select(in, dim, IndexAt(index, j)));
  }
  return Status::Ok();
}

KernelInfo DescribeIndexSelect(const TensorRef& out, const TensorRef& index,
                               const char* aten_op) {
  static const char* const kNames[7] = {
      "index_select_f32", "index_select_f64", "index_select_bf16", "index_select_f16",
      "index_select_i32", "index_select_i64", "index_select_bool"};
  KernelInfo info;
  info.name = NameFor(kNames, out.dtype);
  info.op = aten_op;
  info.engine = rt::Engine::kDma;
  info.bytes_read = out.nbytes() + index.nbytes();
  info.bytes_written = out.nbytes();
  return info;
}

Status Cat(const TensorRef& out, const std::vector<TensorRef>& inputs, int dim) {
  TRN_ASSERT(dim >= 0 && dim < out.ndim, "cat dim out of range");
  int64_t offset = 0;
  for (const TensorRef& in : inputs) {
    if (in.numel() == 0) continue;  // includes torch's legacy 1-D empty tensors
    TRN_ASSERT(in.ndim == out.ndim && in.dtype == out.dtype, "cat input must match out");
    const int64_t len = in.sizes[dim];
    TRN_ASSERT(offset + len <= out.sizes[dim], "cat inputs exceed out along dim");
    CopyView(Narrow(out, dim, offset, len), in);
    offset += len;
  }
  TRN_ASSERT(offset == out.sizes[dim] || out.numel() == 0, "cat inputs must fill out");
  return Status::Ok();
}

KernelInfo DescribeCat(const TensorRef& out, const char* aten_op) {
  static const char* const kNames[7] = {"cat_f32", "cat_f64", "cat_bf16", "cat_f16",
                                        "cat_i32", "cat_i64", "cat_bool"};
  KernelInfo info;
  info.name = NameFor(kNames, out.dtype);
  info.op = aten_op;
  info.engine = rt::Engine::kDma;
  info.bytes_read = out.nbytes();
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace trn::kernels
