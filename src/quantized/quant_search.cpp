#include "quantized/quant_search.h"

#include <algorithm>

namespace candle::quantized::detail {

namespace {

// the weight of element i: the importance weight, or x^2
inline float weight_or_square(const float* qw, const float* x, int i) { return qw ? qw[i] : x[i] * x[i]; }

inline int clamp_level(int l, int lo, int hi) { return std::max(lo, std::min(hi, l)); }

}  // namespace

float make_qx_quants(int n, int nmax, const float* x, int8_t* L, const float* qw) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  // weighted sums of x * l and l^2 for the levels that scale `iscale` gives
  auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = 0;
    suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      float w = weight_or_square(qw, x, i);
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<int8_t>(nmax + clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  sums(iscale, sumlx, suml2);
  assign(iscale);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      assign(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      float w = x[i] * x[i];
      float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        int new_l = clamp_level(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          float nl = static_cast<float>(new_l);
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

float make_qkx_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min,
                      uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad,
                      bool zero_if_max_le_min) {
  float min = x[0], max = x[0];
  float sum_w = weight_or_square(weights, x, 0);
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    float w = weight_or_square(weights, x, i);
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (zero_if_max_le_min ? max <= min : max == min) {
    std::fill(L, L + n, uint8_t{0});
    *neg_min = -min;
    return 0.0f;
  }
  auto error_of = [&](const uint8_t* levels, float scale, float mn) {
    float err = 0;
    for (int i = 0; i < n; ++i) {
      float diff = scale * static_cast<float>(levels[i]) + mn - x[i];
      diff = use_mad ? std::fabs(diff) : diff * diff;
      err += weight_or_square(weights, x, i) * diff;
    }
    return err;
  };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i)
    L[i] = static_cast<uint8_t>(clamp_level(nearest_int(iscale * (x[i] - min)), 0, nmax));
  float best_error = error_of(L, scale, min);
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = clamp_level(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      float w = weight_or_square(weights, x, i);
      float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = error_of(Laux, this_scale, this_min);
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];  // a NaN propagates, as in ggml
  if (max < kGroupMaxEps) {
    std::fill(L, L + n, uint8_t{0});
    return 0.0f;
  }
  const float fmax_level = static_cast<float>(nmax);
  float iscale = fmax_level / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    float diff = x[i] - scale * static_cast<float>(L[i]);
    best_mse += quant_weights[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    float iscale_is = (0.1f * static_cast<float>(is) + fmax_level) / max;
    float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::min(nmax, nearest_int(iscale_is * x[i]));
      float diff = x[i] - scale_is * static_cast<float>(l);
      mse += quant_weights[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    float w = quant_weights[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      float w = quant_weights[i];
      float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      float sl2 = suml2 - w * li * li;
      if (slx > 0 && sl2 > 0) {
        int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          float nl = static_cast<float>(new_l);
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace candle::quantized::detail
