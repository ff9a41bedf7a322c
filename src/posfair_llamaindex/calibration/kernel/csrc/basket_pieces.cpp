// The pieces of every query row's calibrated attention in one pass over the keys (DESIGN.md §2.1).
//
// For each query row and each basket of content keys, attention over that basket alone gives an output o_b
// and a log-sum-exp l_b. The calibrated output needs two sums over the live baskets: the plain one,
// sum_b softmax(l)_b o_b, and the unweighted sum_b o_b. Calling a flash kernel once per basket writes every
// o_b to memory and reads it back; here each (sequence, head, block of query rows) keeps both sums in cache
// while it walks the baskets, so the cost stays close to one attention pass. The isolated tokens and the
// variants' targets are applied afterwards, in Python, from the returned pieces.
// The tensor type, one factory and pybind's tensor casters: about half the build time of <torch/extension.h>,
// which brings in the whole C++ frontend (16.8 s against 36.9 s on 2 cores, RESULTS.md §8.6).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

// single precision GEMM of the BLAS that PyTorch links (column-major)
extern "C" void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                       const int*, const float*, const int*, const float*, float*, const int*);

namespace {

using Vec = at::vec::Vectorized<float>;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kQueryBlock = 256;  // query rows per work item: scores of a chunk stay in the core's L2
constexpr int64_t kChunkKeys = 512;   // keys per score GEMM; baskets are cut from it

void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float* c, int64_t ldc) {
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const int ia = static_cast<int>(lda), ib = static_cast<int>(ldb), ic = static_cast<int>(ldc);
  const float beta = 0.f;
  sgemm_(&ta, &tb, &im, &in, &ik, &alpha, a, &ia, b, &ib, &beta, c, &ic);
}

// softmax numerator of one basket's scores in place; returns (max, sum of exp(s - max))
std::pair<float, float> exp_in_place(float* s, const float* bias, int64_t size) {
  if (bias != nullptr) at::vec::map2([](Vec x, Vec y) { return x + y; }, s, s, bias, size);
  const float best = at::vec::reduce_all<float>([](Vec& x, Vec& y) { return at::vec::maximum(x, y); }, s, size);
  if (best == kNegInf) return {kNegInf, 0.f};  // the row sees none of the basket's keys
  const Vec shift(best);
  at::vec::map<float>([shift](Vec x) { return (x - shift).exp_u20(); }, s, s, size);
  return {best, at::vec::reduce_all<float>([](Vec& x, Vec& y) { return x + y; }, s, size)};
}

}  // namespace

// q [N, H, Q, D]; keys [N, KV, W, D] and values [N, KV, W, Dv], the content span from offset 0, W a whole
// number of baskets; bias [N, 1 or H, W] additive (-inf = hidden) or empty. Returns the plain output over
// the baskets alone [N, Q, H, Dv], the sum of the live baskets' outputs [N, Q, H, Dv], the log-sum-exp over
// the baskets [N, H, Q] and the number of live baskets [N, H, Q].
std::vector<at::Tensor> basket_pieces(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                                      const at::Tensor& bias, double scale, int64_t basket_size) {
  TORCH_CHECK(q.dim() == 4 && keys.dim() == 4 && values.dim() == 4, "basket_pieces: 4-d q, keys, values");
  TORCH_CHECK(q.scalar_type() == at::kFloat && keys.scalar_type() == at::kFloat &&
                  values.scalar_type() == at::kFloat,
              "basket_pieces: float32 only");
  TORCH_CHECK(q.stride(3) == 1 && keys.stride(3) == 1 && values.stride(3) == 1,
              "basket_pieces: the head dimension must be contiguous");
  const int64_t N = q.size(0), H = q.size(1), Q = q.size(2), D = q.size(3);
  const int64_t KV = keys.size(1), W = keys.size(2), Dv = values.size(3);
  TORCH_CHECK(basket_size > 0 && W % basket_size == 0, "basket_pieces: W must be a multiple of the basket size");
  TORCH_CHECK(KV > 0 && H % KV == 0 && keys.size(3) == D, "basket_pieces: heads and head size do not match");
  const bool has_bias = bias.numel() > 0;
  TORCH_CHECK(!has_bias || (bias.scalar_type() == at::kFloat && bias.is_contiguous() && bias.dim() == 3 &&
                            bias.size(0) == N && bias.size(2) == W && (bias.size(1) == 1 || bias.size(1) == H)),
              "basket_pieces: bias must be a contiguous float32 [N, 1 or H, W]");
  const int64_t nb = W / basket_size, groups = H / KV, bias_heads = has_bias ? bias.size(1) : 1;
  auto options = q.options();
  auto plain = at::empty({N, Q, H, Dv}, options);
  auto basket_sum = at::empty({N, Q, H, Dv}, options);
  auto lse = at::empty({N, H, Q}, options);
  auto live = at::empty({N, H, Q}, options);

  const float* qd = q.data_ptr<float>();
  const float* kd = keys.data_ptr<float>();
  const float* vd = values.data_ptr<float>();
  const float* bd = has_bias ? bias.data_ptr<float>() : nullptr;
  float* plain_d = plain.data_ptr<float>();
  float* sum_d = basket_sum.data_ptr<float>();
  float* lse_d = lse.data_ptr<float>();
  float* live_d = live.data_ptr<float>();
  const int64_t blocks = (Q + kQueryBlock - 1) / kQueryBlock;
  const int64_t chunk = std::max<int64_t>(1, kChunkKeys / basket_size);
  const float alpha = static_cast<float>(scale);

  at::parallel_for(0, N * H * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kQueryBlock * chunk * basket_size), out(kQueryBlock * Dv), acc(kQueryBlock * Dv),
        sums(kQueryBlock * Dv), best(kQueryBlock), total(kQueryBlock), count(kQueryBlock), basket_max(kQueryBlock),
        basket_total(kQueryBlock);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / (H * blocks), h = (item / blocks) % H, q0 = (item % blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, Q - q0), kv = h / groups;
      const float* qp = qd + n * q.stride(0) + h * q.stride(1) + q0 * q.stride(2);
      const float* bias_row = has_bias ? bd + (n * bias_heads + (bias_heads > 1 ? h : 0)) * W : nullptr;
      std::fill(best.begin(), best.end(), kNegInf);
      std::fill(total.begin(), total.end(), 0.f);
      std::fill(count.begin(), count.end(), 0.f);
      std::fill(acc.begin(), acc.end(), 0.f);
      std::fill(sums.begin(), sums.end(), 0.f);
      for (int64_t c0 = 0; c0 < nb; c0 += chunk) {
        const int64_t c1 = std::min(nb, c0 + chunk), width = (c1 - c0) * basket_size;
        const float* kp = kd + n * keys.stride(0) + kv * keys.stride(1) + c0 * basket_size * keys.stride(2);
        // scores [rows, width] (row-major) = scale * q_block @ keys_chunk^T
        gemm('T', 'N', width, rows, D, alpha, kp, keys.stride(2), qp, q.stride(2), scores.data(), width);
        for (int64_t b = c0; b < c1; ++b) {
          const int64_t offset = (b - c0) * basket_size;
          const float* bias_b = bias_row != nullptr ? bias_row + b * basket_size : nullptr;
          bool any = false;
          for (int64_t r = 0; r < rows; ++r) {
            const auto [m, z] = exp_in_place(scores.data() + r * width + offset, bias_b, basket_size);
            basket_max[r] = m;
            basket_total[r] = z;
            any = any || z > 0.f;
          }
          if (!any) continue;
          const float* vp = vd + n * values.stride(0) + kv * values.stride(1) + b * basket_size * values.stride(2);
          // out [rows, Dv] = exp-scores [rows, basket] @ values_basket
          gemm('N', 'N', Dv, rows, basket_size, 1.f, vp, values.stride(2), scores.data() + offset, width, out.data(),
               Dv);
          for (int64_t r = 0; r < rows; ++r) {
            if (basket_total[r] == 0.f) continue;  // not live for this row: it adds nothing
            const float next = std::max(best[r], basket_max[r]);
            const float keep = std::exp(best[r] - next), gain = std::exp(basket_max[r] - next);
            total[r] = total[r] * keep + basket_total[r] * gain;
            best[r] = next;
            count[r] += 1.f;
            const Vec vkeep(keep), vgain(gain), vnorm(1.f / basket_total[r]);
            float* a = acc.data() + r * Dv;
            float* s = sums.data() + r * Dv;
            const float* o = out.data() + r * Dv;
            at::vec::map2([vkeep, vgain](Vec x, Vec y) { return x * vkeep + y * vgain; }, a, a, o, Dv);
            at::vec::map2([vnorm](Vec x, Vec y) { return x + y * vnorm; }, s, s, o, Dv);
          }
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t row = q0 + r;
        const float norm = total[r] > 0.f ? 1.f / total[r] : 0.f;
        float* po = plain_d + ((n * Q + row) * H + h) * Dv;
        float* so = sum_d + ((n * Q + row) * H + h) * Dv;
        const Vec vnorm(norm);
        at::vec::map<float>([vnorm](Vec x) { return x * vnorm; }, po, acc.data() + r * Dv, Dv);
        std::copy(sums.begin() + r * Dv, sums.begin() + (r + 1) * Dv, so);
        lse_d[(n * H + h) * Q + row] = total[r] > 0.f ? best[r] + std::log(total[r]) : kNegInf;
        live_d[(n * H + h) * Q + row] = count[r];
      }
    }
  });
  return {plain, basket_sum, lse, live};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("basket_pieces", &basket_pieces, "Plain and summed per-basket attention of every query row");
}
