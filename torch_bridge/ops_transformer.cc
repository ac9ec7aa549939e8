// torch.nn's "better transformer" fast path on the trn device:
// _native_multi_head_attention and _transformer_encoder_layer_fwd.
//
// Note [nn.Transformer fast path]: in eval mode nn.TransformerEncoderLayer,
// nn.TransformerEncoder, nn.TransformerDecoderLayer and nn.MultiheadAttention
// call these fused ops for CPU, CUDA and the PrivateUse1 device alike. Their
// kernels exist for CPU and CUDA only, so on trn every encoder layer ran
// through the CPU fallback (copies both ways, all of its math on the host).
// Here they are trn ops: the packed in-projection as one linear (three when
// query, key and value differ), the fused attention kernel, the out
// projection, layer norms and the feed-forward, as torch's composite
// transformer_encoder_layer_forward orders them. Masks follow torch's fast
// path, which casts a float mask to bool (nonzero = masked out; the modules
// pass -inf / 0 masks): mask_type 0 is [L, S], 1 a key padding [B, S], 2
// [B, H or 1, L, S]. A row with every key masked is NaN on the CPU
// (_masked_softmax) and 0 here (the attention kernel's bool mask).
#include <ATen/NestedTensorImpl.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_nested_tensor_from_mask_left_aligned.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/softmax.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

// [B, T, E] -> [B, heads, T, E / heads]
at::Tensor SplitHeads(const at::Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

// The fast path's mask as the attention kernel's bool mask (true = attend),
// broadcastable to [B, H, L, S].
at::Tensor AttendMask(const at::Tensor& mask, std::optional<int64_t> mask_type, int64_t batch,
                      int64_t seq_k, const char* name) {
  const at::Tensor attend = mask.scalar_type() == at::kBool ? mask.logical_not() : mask.eq(0);
  const int64_t type = mask_type.value_or(mask.dim() == 2 ? 0 : 2);
  if (type == 1) {
    TORCH_CHECK(mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == seq_k, name,
                ": expected a key padding mask (mask_type 1) of [", batch, ", ", seq_k,
                "], got ", mask.sizes());
    return attend.view({batch, 1, 1, seq_k});
  }
  TORCH_CHECK(type == 0 || type == 2, name, ": expected mask_type 0, 1 or 2, got ", type);
  TORCH_CHECK(mask.dim() == (type == 0 ? 2 : 4), name, ": expected a ", type == 0 ? 2 : 4,
              "-D mask for mask_type ", type, ", got ", mask.sizes());
  return attend;
}

std::tuple<at::Tensor, at::Tensor> MultiHeadAttention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
    int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  const char* name = "aten::_native_multi_head_attention";
  CommonDevice(name, {&query, &key, &value, &qkv_weight, &qkv_bias, &proj_weight, &proj_bias});
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, name,
              ": expected batched 3-D query, key and value, got ", query.sizes(), ", ",
              key.sizes(), ", ", value.sizes());
  TORCH_CHECK(num_head > 0 && embed_dim % num_head == 0 && query.size(2) == embed_dim, name,
              ": expected embed_dim ", embed_dim, " divisible by num_head ", num_head,
              " and query of [B, L, ", embed_dim, "], got ", query.sizes());
  TORCH_CHECK(qkv_weight.dim() == 2 && qkv_weight.size(0) == 3 * embed_dim, name,
              ": expected qkv_weight of [", 3 * embed_dim, ", ", embed_dim, "], got ",
              qkv_weight.sizes());
  at::Tensor q, k, v;
  if (query.is_same(key) && key.is_same(value)) {
    const std::vector<at::Tensor> qkv = at::linear(query, qkv_weight, qkv_bias).chunk(3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    const std::vector<at::Tensor> w = qkv_weight.chunk(3, 0), b = qkv_bias.chunk(3, 0);
    q = at::linear(query, w[0], b[0]);
    k = at::linear(key, w[1], b[1]);
    v = at::linear(value, w[2], b[2]);
  }
  q = SplitHeads(q, num_head), k = SplitHeads(k, num_head), v = SplitHeads(v, num_head);
  const int64_t batch = query.size(0), seq_q = query.size(1), seq_k = key.size(1);
  std::optional<at::Tensor> attend;
  if (mask.has_value() && mask->defined()) {
    attend = AttendMask(*mask, mask_type, batch, seq_k, name);
  }
  at::Tensor out, weights;
  if (!need_weights) {
    out = at::scaled_dot_product_attention(q, k, v, attend);
    weights = at::empty({0}, query.options());
  } else {  // the probabilities are an output: the math path
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(q.size(-1)));
    if (attend) scores = scores.masked_fill(attend->logical_not(), -INFINITY);
    weights = at::softmax(scores, -1);
    out = at::matmul(weights, v);
    if (average_attn_weights) weights = weights.mean(1);
  }
  out = out.transpose(1, 2).reshape({batch, seq_q, embed_dim});
  return {at::linear(out, proj_weight, proj_bias), weights};
}

at::Tensor TransformerEncoderLayer(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    bool use_gelu, bool norm_first, double eps, const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
    const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1,
    const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  if (src.numel() == 0) return src.clone();
  const auto norm = [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return at::layer_norm(x, {embed_dim}, w, b, eps);
  };
  at::Tensor x = norm_first ? norm(src, norm_weight_1, norm_bias_1) : src;
  x = std::get<0>(MultiHeadAttention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias,
                                     proj_weight, proj_bias, mask, false, true, mask_type)) +
      src;
  if (!norm_first) x = norm(x, norm_weight_1, norm_bias_1);
  const at::Tensor residual = x;
  if (norm_first) x = norm(x, norm_weight_2, norm_bias_2);
  x = at::linear(x, ffn_weight_1, ffn_bias_1);
  x = use_gelu ? at::gelu(x) : at::relu(x);
  x = at::linear(x, ffn_weight_2, ffn_bias_2) + residual;
  return norm_first ? x : norm(x, norm_weight_2, norm_bias_2);
}

// ---- nested sequences ---------------------------------------------------------------------
// Note [Nested sequences]: nn.TransformerEncoder (enable_nested_tensor=True, the
// default) packs a batch with a left-aligned src_key_padding_mask into a
// nested tensor, runs its layers on it and pads the result again
// (_nested_tensor_from_mask, _transformer_encoder_layer_fwd and
// to_padded_tensor, kernels for CPU and CUDA only). On trn the fallback could
// not copy a nested tensor back to the host and the forward raised
// NotImplementedError. Here a nested [B, *, E] tensor is a contiguous trn
// buffer of its rows (sizes on the host, as ATen keeps them); a layer pads it,
// runs the dense layer with the matching key padding mask and packs the rows
// again, so padded positions never reach the output (to_padded_tensor fills them).

// Host lengths of a nested [B, *, E] tensor, checked to be batched rows of E.
std::vector<int64_t> NestedLengths(const at::Tensor& nested, int64_t* width, const char* name) {
  const at::Tensor& sizes = at::native::get_nested_sizes(nested);
  TORCH_CHECK(sizes.dim() == 2 && sizes.size(1) == 2, name,
              ": expected a nested tensor of [seq, features] components, got components of ",
              sizes.dim() == 2 ? sizes.size(1) : -1, " dims");
  const at::Tensor s = sizes.to(at::kLong).contiguous();
  const int64_t* p = s.const_data_ptr<int64_t>();
  std::vector<int64_t> lengths(static_cast<size_t>(s.size(0)));
  *width = s.size(0) > 0 ? p[1] : 0;
  for (int64_t b = 0; b < s.size(0); ++b) {
    TORCH_CHECK(p[2 * b + 1] == *width, name, ": expected components of one width ", *width,
                ", got ", p[2 * b + 1]);
    lengths[b] = p[2 * b];
  }
  return lengths;
}

// Flat row indices (b * len + l, l < lengths[b]) of the components' rows in a
// padded [B, len, E] tensor, on `device`. Sizes known on the host: packing and
// padding take no synchronization (a bool mask would: its true count).
at::Tensor RowIndex(const std::vector<int64_t>& lengths, int64_t len, c10::Device device) {
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  at::Tensor idx = at::empty({total}, at::kLong);
  int64_t* p = idx.mutable_data_ptr<int64_t>();
  for (size_t b = 0; b < lengths.size(); ++b) {
    for (int64_t l = 0; l < lengths[b]; ++l) *p++ = static_cast<int64_t>(b) * len + l;
  }
  return idx.to(device);
}

// The nested tensor of padded's rows at `rows` (RowIndex), components [lengths[b], width].
at::Tensor PackRows(const at::Tensor& padded, const at::Tensor& rows,
                    const std::vector<int64_t>& lengths, int64_t width) {
  const at::Tensor buffer = padded.reshape({-1, width}).index_select(0, rows).view({-1});
  at::Tensor sizes = at::empty({static_cast<int64_t>(lengths.size()), 2}, at::kLong);
  int64_t* p = sizes.mutable_data_ptr<int64_t>();
  for (size_t b = 0; b < lengths.size(); ++b) p[2 * b] = lengths[b], p[2 * b + 1] = width;
  return at::detail::make_tensor<at::native::NestedTensorImpl>(buffer, sizes);
}

at::Tensor NestedToPadded(const at::Tensor& self, double padding,
                          at::OptionalIntArrayRef output_size) {
  const char* name = "aten::to_padded_tensor";
  int64_t width = 0;
  const std::vector<int64_t> lengths = NestedLengths(self, &width, name);
  int64_t len = 0;
  for (int64_t l : lengths) len = std::max(len, l);
  if (output_size.has_value()) {
    TORCH_CHECK(output_size->size() == 3 && (*output_size)[0] == static_cast<int64_t>(lengths.size()) &&
                    (*output_size)[1] >= len && (*output_size)[2] == width,
                name, ": expected output_size [", lengths.size(), ", >= ", len, ", ", width,
                "], got ", *output_size);
    len = (*output_size)[1];
  }
  const at::Tensor buffer = at::native::get_nested_tensor_impl(self)->get_buffer();
  at::Tensor out = at::full({static_cast<int64_t>(lengths.size()), len, width}, padding,
                            buffer.options());
  out.view({-1, width}).index_put_({RowIndex(lengths, len, buffer.device())},
                                   buffer.view({-1, width}));
  return out;
}

at::Tensor NestedFromMask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  const char* name = "aten::_nested_tensor_from_mask";
  CommonDevice(name, {&t, &mask});
  TORCH_CHECK(mask.scalar_type() == at::kBool, name, ": expected a bool mask, got ",
              mask.scalar_type());
  TORCH_CHECK(t.dim() == 3 && mask.dim() == 2 && mask.size(0) == t.size(0) &&
                  mask.size(1) == t.size(1),
              name, ": expected t of [B, L, E] and a mask of [B, L], got ", t.sizes(), " and ",
              mask.sizes());
  if (mask_check) {
    TORCH_CHECK(at::_nested_tensor_from_mask_left_aligned(t, mask), name,
                ": expected a left-aligned mask (every row's true values first)");
  }
  // As ATen: component b is the first sum(mask[b]) rows of t[b].
  const at::Tensor counts = mask.sum(1).cpu();
  const std::vector<int64_t> lengths(counts.const_data_ptr<int64_t>(),
                                     counts.const_data_ptr<int64_t>() + counts.numel());
  return PackRows(t, RowIndex(lengths, t.size(1), t.device()), lengths, t.size(2));
}

bool NestedFromMaskLeftAligned(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool && mask.dim() == 2,
              "aten::_nested_tensor_from_mask_left_aligned: expected a 2-D bool mask, got ",
              mask.scalar_type(), " of ", mask.sizes());
  if (mask.size(1) < 2) return true;
  // no false followed by a true within a row
  return mask.narrow(1, 1, mask.size(1) - 1).le(mask.narrow(1, 0, mask.size(1) - 1)).all().item<bool>();
}

at::Tensor NestedEncoderLayer(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    bool use_gelu, bool norm_first, double eps, const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
    const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1,
    const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  const char* name = "aten::_transformer_encoder_layer_fwd";
  TORCH_CHECK(!mask.has_value() || !mask->defined(), name,
              ": a nested input takes no mask (its padding is the components' lengths)");
  int64_t width = 0;
  const std::vector<int64_t> lengths = NestedLengths(src, &width, name);
  const at::Tensor padded = NestedToPadded(src, 0.0, std::nullopt);
  const int64_t batch = padded.size(0), len = padded.size(1);
  // Key padding mask (true = masked): position l of row b is padding past lengths[b].
  at::Tensor padding = at::ones({batch, len}, at::kBool);
  for (int64_t b = 0; b < batch; ++b) padding[b].narrow(0, 0, lengths[b]).fill_(false);
  const at::Tensor out = TransformerEncoderLayer(
      padded, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
      norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
      ffn_bias_1, ffn_weight_2, ffn_bias_2, padding.to(padded.device()), 1);
  return PackRows(out, RowIndex(lengths, len, padded.device()), lengths, width);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl("_native_multi_head_attention", TORCH_FN(MultiHeadAttention));
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(TransformerEncoderLayer));
  m.impl("_nested_tensor_from_mask", TORCH_FN(NestedFromMask));
  m.impl("_nested_tensor_from_mask_left_aligned", TORCH_FN(NestedFromMaskLeftAligned));
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(NestedEncoderLayer));
  m.impl("to_padded_tensor", TORCH_FN(NestedToPadded));
}

}  // namespace trn::bridge::ops
