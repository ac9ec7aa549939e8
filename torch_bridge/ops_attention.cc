// scaled_dot_product_attention on trn: one launch of the fused attention
// kernel (core/kernels/attention.h).
//
// Note [sdpa routing]
// In torch 2.13 aten::scaled_dot_product_attention is CompositeImplicitAutograd:
// it asks the device's _fused_sdp_choice_stub (a DispatchStub with a
// PrivateUse1 slot) for a backend, converts a bool mask to an additive one
// (0 / -inf in the query dtype: two fills and a where on trn) and, for
// SDPBackend::overrideable, calls
// aten::_scaled_dot_product_fused_attention_overrideable (q, k, v, attn_bias,
// dropout_p, is_causal, return_debug_mask, scale; no enable_gqa: grouped heads
// arrive with Hq != Hkv). That op has an autograd formula and a meta kernel.
// trn registers four things:
// - the choice stub (FusedSdpChoice): overrideable unless dropout_p > 0, the
//   inputs are not 3-D/4-D, Hq != Hkv without enable_gqa (unless Hkv == 1,
//   which the math path broadcasts alike), or the user disabled the
//   overrideable backend (torch.nn.attention.sdpa_kernel);
// - the fused op for PrivateUse1 (FusedAttention, one launch, bool or float mask);
// - its backward (FusedAttentionBackward, aten ops on trn from the saved
//   logsumexp), so inputs that require grad take the fused forward too;
// - scaled_dot_product_attention itself for PrivateUse1 and AutogradPrivateUse1
//   (ScaledDotProductAttention): when the choice is overrideable it calls the
//   fused op with the mask as given, so a bool mask costs no conversion
//   launches (eager: exactly one launch; AOT graphs: the fused op with the
//   bool mask); otherwise it runs torch's own composite
//   (at::native::scaled_dot_product_attention), which at the autograd key
//   records the math path's backward as before. Registered at the autograd
//   key, the fused op's own autograd kernel still records its backward.
#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scaled_dot_product_attention_native.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tril.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "core/kernels/attention.h"
#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

constexpr const char* kOp = "aten::_scaled_dot_product_fused_attention_overrideable";

int64_t FusedSdpChoice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                       std::optional<double> scale, bool enable_gqa) {
  const auto math = static_cast<int64_t>(at::SDPBackend::math);
  if (dropout_p > 0.0 || q.is_nested()) return math;
  if (!at::globalContext().userEnabledOverrideableSDP()) return math;
  if ((q.dim() != 3 && q.dim() != 4) || k.dim() != q.dim() || v.dim() != q.dim()) return math;
  const int64_t hq = q.size(-3), hkv = k.size(-3);
  if (!enable_gqa && hq != hkv && hkv != 1) return math;
  return static_cast<int64_t>(at::SDPBackend::overrideable);
}

// A new tensor of `sizes` whose memory order follows q's strides (as the meta
// kernel's alloc_with_matching_layout: out of a [B, S, H, D]-strided query is
// [B, S, H, D]-strided too).
at::Tensor EmptyLike4(const at::Tensor& q, at::IntArrayRef sizes, int device) {
  std::array<int64_t, 4> order = {0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return q.stride(a) > q.stride(b); });
  std::array<int64_t, 4> permuted, inverse;
  for (int i = 0; i < 4; ++i) {
    permuted[i] = sizes[order[i]];
    inverse[order[i]] = i;
  }
  return Empty(permuted, q.scalar_type(), device).permute(inverse);
}

using OverrideableResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt,
                                      c10::SymInt, at::Tensor, at::Tensor, at::Tensor>;

OverrideableResult FusedAttention(const at::Tensor& query, const at::Tensor& key,
                                  const at::Tensor& value,
                                  const std::optional<at::Tensor>& attn_bias, double dropout_p,
                                  bool is_causal, bool return_debug_mask,
                                  std::optional<double> scale) {
  const char* name = "scaled_dot_product_attention";
  TORCH_CHECK(dropout_p == 0.0, name, " on trn: dropout_p must be 0 (the fused kernel is for ",
              "inference), got ", dropout_p);
  TORCH_CHECK(!return_debug_mask, name, " on trn: return_debug_mask=True is not supported");
  TORCH_CHECK((query.dim() == 3 || query.dim() == 4) && key.dim() == query.dim() &&
                  value.dim() == query.dim(),
              name, ": expected query, key and value to be all 3-D or all 4-D, got ",
              query.dim(), "-D, ", key.dim(), "-D and ", value.dim(), "-D");
  const at::Tensor mask = attn_bias.value_or(at::Tensor());
  const int device = CommonDevice(name, {&query, &key, &value, &mask});
  const at::ScalarType dtype = query.scalar_type();
  TORCH_CHECK(key.scalar_type() == dtype && value.scalar_type() == dtype, name,
              ": expected query, key and value to have the same dtype, got ", dtype, ", ",
              key.scalar_type(), " and ", value.scalar_type());
  TORCH_CHECK(at::isFloatingType(dtype), name, ": expected a floating dtype, got ", dtype);
  ComputeDType(dtype, name);
  const bool batched = query.dim() == 4;
  const at::Tensor q = batched ? query : query.unsqueeze(0);
  const at::Tensor k = batched ? key : key.unsqueeze(0);
  const at::Tensor v = batched ? value : value.unsqueeze(0);
  const int64_t B = q.size(0), hq = q.size(1), sq = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), skv = k.size(2), dv = v.size(3);
  TORCH_CHECK(k.size(0) == B && v.size(0) == B, name,
              ": expected key and value to have the query's batch size ", B, ", got ", k.size(0),
              " and ", v.size(0));
  TORCH_CHECK(v.size(1) == hkv, name, ": expected key and value to have the same number of ",
              "heads, got ", hkv, " and ", v.size(1));
  TORCH_CHECK(hkv > 0 && hq % hkv == 0, name, ": the number of query heads (", hq,
              ") must be a multiple of the number of key/value heads (", hkv, ")");
  TORCH_CHECK(v.size(2) == skv, name, ": expected key and value to have the same sequence ",
              "length, got ", skv, " and ", v.size(2));
  TORCH_CHECK(k.size(3) == d, name, ": expected key to have the query's head dim ", d, ", got ",
              k.size(3));
  const std::array<int64_t, 4> score_sizes = {B, hq, sq, skv};
  if (mask.defined()) {
    TORCH_CHECK(mask.scalar_type() == at::kBool || at::isFloatingType(mask.scalar_type()), name,
                ": expected a bool or floating attn_mask, got ", mask.scalar_type());
    TORCH_CHECK(at::is_expandable_to(mask.sizes(), score_sizes), name, ": attn_mask of shape ",
                mask.sizes(), " does not broadcast to the attention scores [B, Hq, Sq, Skv] = ",
                at::IntArrayRef(score_sizes));
    if (mask.scalar_type() != at::kBool) ComputeDType(mask.scalar_type(), name);
  }
  const double sc = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(d));

  at::Tensor out = EmptyLike4(q, {B, hq, sq, dv}, device);
  at::Tensor lse = Empty({B, hq, sq}, at::kFloat, device);
  const TensorRef ro = Ref(out, kOp), rq = Ref(q, kOp), rk = Ref(k, kOp), rv = Ref(v, kOp);
  const TensorRef rm = mask.defined() ? RefExpanded(mask, score_sizes, kOp) : NoRef();
  const TensorRef rl = Ref(lse, kOp);
  if (out.numel() != 0 || lse.numel() != 0) {
    Launch(device, kernels::DescribeAttention(ro, rq, rk, rv, rm, is_causal, rl, kOp),
           [=] { return kernels::Attention(ro, rq, rk, rv, rm, sc, is_causal, rl); });
  }
  if (!batched) {
    out = out.squeeze(0);
  }
  // cum_seq_q/k and debug_attn_mask are None, philox seed/offset 0-dim
  // int64 tensors, as the meta kernel says (compiled graphs save them for the
  // backward and check their types).
  const at::Tensor philox_seed = Empty({}, at::kLong, device);
  const at::Tensor philox_offset = Empty({}, at::kLong, device);
  return {out,         lse,           at::Tensor(), at::Tensor(), c10::SymInt(sq), c10::SymInt(skv),
          philox_seed, philox_offset, at::Tensor()};
}

// Backward of the fused op (Note [sdpa routing]): the probabilities are
// recomputed from the saved logsumexp, P = exp(q k^T * scale + bias - lse),
// and the gradients follow from aten ops on trn in float32 (the S x S
// matrices are materialised here: training is not the fused kernel's goal):
// dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale,
// dK = dS^T Q * scale; grouped heads sum their query heads' dK/dV.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> FusedAttentionBackward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cum_seq_q,
    const at::Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p,
    bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    std::optional<double> scale) {
  const char* name = "scaled_dot_product_attention backward";
  TORCH_CHECK(dropout_p == 0.0, name, " on trn: dropout_p must be 0, got ", dropout_p);
  const bool batched = query.dim() == 4;
  const auto f32 = [&](const at::Tensor& t) {
    const at::Tensor t4 = batched ? t : t.unsqueeze(0);
    return t4.scalar_type() == at::kFloat ? t4 : t4.to(at::kFloat);
  };
  const at::Tensor q = f32(query), k = f32(key), v = f32(value);
  const at::Tensor dout = f32(grad_out), o = f32(out);
  const int64_t B = q.size(0), hq = q.size(1), sq = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), skv = k.size(2), group = hq / hkv;
  const double sc = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(d));
  // k/v of every query head (grouped heads repeated).
  const auto per_q_head = [&](const at::Tensor& t) {
    if (group == 1) return t;
    return t.unsqueeze(2).expand({B, hkv, group, skv, t.size(3)}).reshape({B, hq, skv, t.size(3)});
  };
  const at::Tensor kx = per_q_head(k), vx = per_q_head(v);
  at::Tensor s = at::matmul(q, kx.transpose(-1, -2)).mul_(sc);
  const double ninf = -std::numeric_limits<double>::infinity();
  if (attn_bias.defined()) {
    const at::Tensor bias = batched ? attn_bias : attn_bias.unsqueeze(0);
    s = bias.scalar_type() == at::kBool ? s.masked_fill(at::logical_not(bias), ninf)
                                        : s.add(bias.to(at::kFloat));
  }
  if (is_causal) {  // built on the host: a small bool matrix, one copy
    const at::Tensor keep = at::ones({sq, skv}, at::TensorOptions().dtype(at::kBool)).tril();
    s = s.masked_fill(at::logical_not(keep.to(q.device())), ninf);
  }
  at::Tensor lse = logsumexp.reshape({B, hq, sq, 1});  // [1, H, Sq] for 3-D inputs too
  lse = lse.masked_fill(lse.eq(ninf), 0.0);  // rows that attend nothing: P = 0
  const at::Tensor p = at::exp(s.sub(lse));
  const auto group_sum = [&](const at::Tensor& t) {
    if (group == 1) return t;
    return at::sum(t.view({B, hkv, group, skv, t.size(3)}), {2});
  };
  const auto finish = [&](at::Tensor t, const at::Tensor& like) {
    if (!batched) t = t.squeeze(0);
    return t.to(like.scalar_type());
  };
  at::Tensor gq, gk, gv, gb;
  if (grad_input_mask[2]) gv = finish(group_sum(at::matmul(p.transpose(-1, -2), dout)), value);
  if (grad_input_mask[0] || grad_input_mask[1] || grad_input_mask[3]) {
    const at::Tensor rowdot = at::sum(dout.mul(o), {-1}, /*keepdim=*/true);
    const at::Tensor ds = p.mul(at::matmul(dout, vx.transpose(-1, -2)).sub_(rowdot));
    if (grad_input_mask[0]) gq = finish(at::matmul(ds, kx).mul_(sc), query);
    if (grad_input_mask[1]) {
      gk = finish(group_sum(at::matmul(ds.transpose(-1, -2), q).mul_(sc)), key);
    }
    if (grad_input_mask[3] && attn_bias.defined() && attn_bias.scalar_type() != at::kBool) {
      const at::Tensor g = batched ? ds : ds.squeeze(0);
      gb = g.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
    }
  }
  return {gq, gk, gv, gb};
}

// Note [sdpa routing]: the fused op straight away when the choice is
// overrideable, torch's composite otherwise.
at::Tensor ScaledDotProductAttention(const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const std::optional<at::Tensor>& mask,
                                     double dropout_p, bool is_causal,
                                     std::optional<double> scale, bool enable_gqa) {
  const bool fused =
      FusedSdpChoice(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa) ==
          static_cast<int64_t>(at::SDPBackend::overrideable) &&
      (!mask.has_value() || !mask->defined() || mask->device() == q.device());
  if (!fused) {
    return at::native::scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, scale,
                                                    enable_gqa);
  }
  return std::get<0>(at::_scaled_dot_product_fused_attention_overrideable(
      q, k, v, mask, dropout_p, is_causal, /*return_debug_mask=*/false, scale));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(FusedAttention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         TORCH_FN(FusedAttentionBackward));
  m.impl("scaled_dot_product_attention", TORCH_FN(ScaledDotProductAttention));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("scaled_dot_product_attention", TORCH_FN(ScaledDotProductAttention));
}

}  // namespace trn::bridge::ops

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &trn::bridge::ops::FusedSdpChoice);
}  // namespace at::native
