// Fused scaled-dot-product attention (flash attention on a core's worker):
// out = softmax(q @ k^T * scale + mask) @ v without materialising the scores.
// Note [fused attention] in attention.cc explains the blocking.
#pragma once

#include "core/common/launch.h"
#include "core/common/tensor_ref.h"

namespace trn::kernels {

// q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv], out [B, Hq, Sq, Dv],
// any strides (stride 0 too: k/v expanded over heads). Hq is a multiple of Hkv
// and query head h reads key/value head h / (Hq / Hkv) (grouped-query heads).
// q/k/v/out share one floating dtype, computed in float32.
// mask: absent (data == nullptr) or [B, Hq, Sq, Skv] (broadcasts as stride 0);
// kBool (true = attend) or floating (added to the scaled scores).
// causal: query i attends keys j <= i (torch's top-left aligned tril of the
// Sq x Skv matrix); may be combined with a mask.
// A row that attends no key gives 0 (as CPU PyTorch) and lse -inf.
// lse: absent or float32 [B, Hq, Sq], receives log(sum(exp(scores))) per row.
Status Attention(const TensorRef& out, const TensorRef& q, const TensorRef& k,
                 const TensorRef& v, const TensorRef& mask, double scale, bool causal,
                 const TensorRef& lse);
// name sdpa_<dtype>; flops 2 * (D + Dv) per attended (query, key) pair (the
// causal blocks the kernel skips are not counted); bytes of q, k, v, mask
// (distinct elements, broadcasts counted once) read and out (+ lse) written.
rt::KernelInfo DescribeAttention(const TensorRef& out, const TensorRef& q, const TensorRef& k,
                                 const TensorRef& v, const TensorRef& mask, bool causal,
                                 const TensorRef& lse, const char* aten_op);

}  // namespace trn::kernels
