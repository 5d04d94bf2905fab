// Winograd F(4x4, 3x3) for f32 3x3 and 5x5 stride-1 dilation-1 convolutions (Lavin & Gray's
// transforms with the points 0, +-1, +-2, +-1/2): each 4x4 output tile costs 36 products per
// (c_in, c_out) pair instead of 144. Per block of tiles: the input tiles are transformed to
// V[36][c_in][T], 36 GEMMs give M[36][c_out][T] = U[36][c_out][c_in] x V, and the output
// transform writes the 4x4 tiles, then bias and activation. Blocks are rectangles of tiles
// fixed by the shape, each GEMM serial, so the bytes do not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "candle/utils.h"
#include "cpu/clones.h"
#include "cpu/conv_kernels.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(__clang__)
#define CANDLE_WG_CLONES CANDLE_TARGET_CLONES
#else
#define CANDLE_WG_CLONES
#endif

namespace candle::cpu {
namespace {

constexpr size_t kTile = 4, kXi = 36;
[[maybe_unused]] constexpr size_t kIn = 6;  // (unused where no ISA clone reads it)
// Target bytes of one worker's V and M panels.
constexpr size_t kWinogradBlockBytes = size_t{3} << 20;

// A k x k kernel (k = 3 or 5) is the sum of nsub x nsub 3x3 sub-kernels at offsets (3a, 3b)
// (zero-padded to 6x6 for k = 5); each sub-kernel's input windows are shifted by the same
// offsets, so they become extra input channels: U and V have nsub^2 * c_in "channels".
// U = G g G^T for every (co, sub, ci): [36][c_out][nsub^2 * c_in].
void transform_kernel(const float* ker, size_t cout, size_t cin, size_t k, float* u) {
  static const float G[6][3] = {{1.f / 4, 0, 0},
                                {-1.f / 6, -1.f / 6, -1.f / 6},
                                {-1.f / 6, 1.f / 6, -1.f / 6},
                                {1.f / 24, 1.f / 12, 1.f / 6},
                                {1.f / 24, -1.f / 12, 1.f / 6},
                                {0, 0, 1}};
  const size_t nsub = (k + 2) / 3, kc = nsub * nsub * cin;
  const size_t plane = cout * kc;
  parallel_for(cout, 1, [&](size_t c0, size_t c1) {
    for (size_t co = c0; co < c1; ++co) {
      for (size_t sc = 0; sc < kc; ++sc) {
        const size_t sub = sc / cin, ci = sc % cin, a = sub / nsub, b = sub % nsub;
        float g[9];
        for (size_t i = 0; i < 3; ++i)
          for (size_t j = 0; j < 3; ++j) {
            const size_t y = 3 * a + i, x = 3 * b + j;
            g[i * 3 + j] = (y < k && x < k) ? ker[((co * cin + ci) * k + y) * k + x] : 0.f;
          }
        float gg[6][3];
        for (size_t i = 0; i < 6; ++i)
          for (size_t j = 0; j < 3; ++j) gg[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
        for (size_t i = 0; i < 6; ++i)
          for (size_t j = 0; j < 6; ++j)
            u[(i * 6 + j) * plane + co * kc + sc] =
                gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2];
      }
    }
  });
}

// Tiles are transformed kLanes at a time (consecutive tiles of one tile row), the lanes
// being the innermost array index so that the arithmetic vectorizes and V / M are read
// and written in contiguous runs.
constexpr size_t kLanes = 16;

// Input transform of the tiles [ty0, ty1) x [tx0, tx1) of one image: V[xi][ci][t].
// The windows start at (4 ty - pad + off_y, 4 tx - pad + off_x); channel ci goes to row
// ch0 + ci of V, which has kc rows per xi.
CANDLE_WG_CLONES void transform_input(const ConvGeom& g, const float* img, size_t ty0, size_t ty1, size_t tx0,
                                      size_t tx1, size_t off_y, size_t off_x, size_t ch0, size_t kc,
                                      float* v) {
  const size_t cin = g.c_in, T = (ty1 - ty0) * (tx1 - tx0), xs = kc * T;
  const auto ih = static_cast<ptrdiff_t>(g.ih), iw = static_cast<ptrdiff_t>(g.iw);
  const auto pad = static_cast<ptrdiff_t>(g.pad_h);
  alignas(64) float d[6][6][kLanes];
  alignas(64) float tmp[6][6][kLanes];
  for (size_t ci = 0; ci < cin; ++ci) {
    const float* chan = img + ci * g.ih * g.iw;
    size_t t = 0;
    for (size_t ty = ty0; ty < ty1; ++ty) {
      const ptrdiff_t y0 = static_cast<ptrdiff_t>(ty * kTile + off_y) - pad;
      for (size_t txg = tx0; txg < tx1; txg += kLanes) {
        const size_t nl = std::min(kLanes, tx1 - txg);
        const ptrdiff_t x0 = static_cast<ptrdiff_t>(txg * kTile + off_x) - pad;
        const bool inside = y0 >= 0 && y0 + 6 <= ih && x0 >= 0 && x0 + ptrdiff_t(4 * (nl - 1) + 6) <= iw;
        if (inside && nl == kLanes) {
          // a de-interleave of 4 * kLanes + 2 consecutive values: columns 4 and 5 of tile l
          // are columns 0 and 1 of tile l + 1
          for (size_t r = 0; r < 6; ++r) {
            const float* row = chan + (y0 + ptrdiff_t(r)) * iw + x0;
            for (size_t l = 0; l < kLanes; ++l)
              for (size_t c = 0; c < 4; ++c) d[r][c][l] = row[4 * l + c];
            for (size_t l = 0; l + 1 < kLanes; ++l) {
              d[r][4][l] = d[r][0][l + 1];
              d[r][5][l] = d[r][1][l + 1];
            }
            d[r][4][kLanes - 1] = row[4 * kLanes];
            d[r][5][kLanes - 1] = row[4 * kLanes + 1];
          }
        } else {
          for (size_t r = 0; r < 6; ++r) {
            const ptrdiff_t y = y0 + ptrdiff_t(r);
            const bool row_in = y >= 0 && y < ih;
            const float* row = row_in ? chan + y * iw : chan;
            for (size_t l = 0; l < kLanes; ++l) {
              for (size_t c = 0; c < 6; ++c) {
                const ptrdiff_t x = x0 + ptrdiff_t(4 * l + c);
                float val = 0.f;
                if (l < nl && row_in && x >= 0 && x < iw) val = row[x];
                d[r][c][l] = val;
              }
            }
          }
        }
        // columns: tmp = B^T d
        for (size_t c = 0; c < 6; ++c) {
          for (size_t l = 0; l < kLanes; ++l) {
            const float d0 = d[0][c][l], d1 = d[1][c][l], d2 = d[2][c][l], d3 = d[3][c][l], d4 = d[4][c][l],
                        d5 = d[5][c][l];
            tmp[0][c][l] = 4.f * d0 - 5.f * d2 + d4;
            tmp[1][c][l] = -4.f * (d1 + d2) + d3 + d4;
            tmp[2][c][l] = 4.f * (d1 - d2) - d3 + d4;
            tmp[3][c][l] = 2.f * (d3 - d1) - d2 + d4;
            tmp[4][c][l] = 2.f * (d1 - d3) - d2 + d4;
            tmp[5][c][l] = 4.f * d1 - 5.f * d3 + d5;
          }
        }
        // rows: V = tmp B
        float* base = v + (ch0 + ci) * T + t;
        for (size_t r = 0; r < 6; ++r) {
          float o[6][kLanes];
          for (size_t l = 0; l < kLanes; ++l) {
            const float d0 = tmp[r][0][l], d1 = tmp[r][1][l], d2 = tmp[r][2][l], d3 = tmp[r][3][l],
                        d4 = tmp[r][4][l], d5 = tmp[r][5][l];
            o[0][l] = 4.f * d0 - 5.f * d2 + d4;
            o[1][l] = -4.f * (d1 + d2) + d3 + d4;
            o[2][l] = 4.f * (d1 - d2) - d3 + d4;
            o[3][l] = 2.f * (d3 - d1) - d2 + d4;
            o[4][l] = 2.f * (d1 - d3) - d2 + d4;
            o[5][l] = 4.f * d1 - 5.f * d3 + d5;
          }
          for (size_t k = 0; k < 6; ++k) std::memcpy(base + (r * 6 + k) * xs, o[k], nl * sizeof(float));
        }
        t += nl;
      }
    }
  }
}

// Output transform: Y = A^T M A for each (co, tile), written into the output planes.
CANDLE_WG_CLONES void transform_output(const ConvGeom& g, const float* m, size_t ty0, size_t ty1, size_t tx0,
                                       size_t tx1, float* out) {
  const size_t cout = g.c_out, T = (ty1 - ty0) * (tx1 - tx0), xs = cout * T;
  alignas(64) float tmp[4][6][kLanes];
  alignas(64) float y[4][4][kLanes];
  for (size_t co = 0; co < cout; ++co) {
    float* plane = out + co * g.oh * g.ow;
    size_t t = 0;
    for (size_t ty = ty0; ty < ty1; ++ty) {
      for (size_t txg = tx0; txg < tx1; txg += kLanes) {
        const size_t nl = std::min(kLanes, tx1 - txg);
        const float* src = m + co * T + t;
        for (size_t c = 0; c < 6; ++c) {
          float mm[6][kLanes];
          for (size_t r = 0; r < 6; ++r) {
            std::memcpy(mm[r], src + (r * 6 + c) * xs, nl * sizeof(float));
            for (size_t l = nl; l < kLanes; ++l) mm[r][l] = 0.f;
          }
          for (size_t l = 0; l < kLanes; ++l) {
            const float a = mm[1][l] + mm[2][l], b = mm[1][l] - mm[2][l];
            const float cc = mm[3][l] + mm[4][l], dd = mm[3][l] - mm[4][l];
            tmp[0][c][l] = mm[0][l] + a + cc;
            tmp[1][c][l] = b + 2.f * dd;
            tmp[2][c][l] = a + 4.f * cc;
            tmp[3][c][l] = b + 8.f * dd + mm[5][l];
          }
        }
        for (size_t r = 0; r < 4; ++r) {
          for (size_t l = 0; l < kLanes; ++l) {
            const float* q0 = &tmp[r][0][l];
            const float q[6] = {q0[0],          q0[kLanes],     q0[2 * kLanes],
                                q0[3 * kLanes], q0[4 * kLanes], q0[5 * kLanes]};
            const float a = q[1] + q[2], b = q[1] - q[2], cc = q[3] + q[4], dd = q[3] - q[4];
            y[r][0][l] = q[0] + a + cc;
            y[r][1][l] = b + 2.f * dd;
            y[r][2][l] = a + 4.f * cc;
            y[r][3][l] = b + 8.f * dd + q[5];
          }
        }
        const size_t oy0 = ty * kTile, ox0 = txg * kTile;
        const size_t nr = std::min(kTile, g.oh - oy0), ncol = std::min(kTile * nl, g.ow - ox0);
        for (size_t r = 0; r < nr; ++r) {
          float* dst = plane + (oy0 + r) * g.ow + ox0;
          float row[kTile * kLanes];
          for (size_t l = 0; l < kLanes; ++l)
            for (size_t c = 0; c < kTile; ++c) row[l * kTile + c] = y[r][c][l];
          std::memcpy(dst, row, ncol * sizeof(float));
        }
        t += nl;
      }
    }
  }
}

}  // namespace

bool conv2d_winograd_f32(const ConvGeom& g, const float* in, const float* ker, const float* bias,
                         std::optional<UnaryOp> act, float* out) {
  if (g.kh != g.kw || (g.kh != 3 && g.kh != 5) || g.s_h != 1 || g.s_w != 1 || g.d_h != 1 || g.d_w != 1 ||
      g.groups != 1)
    return false;
  // Blocks of tiles stay within one image: images of fewer than 16 tiles (a batch of small
  // maps, e.g. 12x12 MNIST features) make GEMMs too thin to pay for the transforms.
  if (g.pad_h != g.pad_w || g.c_in < 16 || g.c_out < 16 || g.oh < 8 || g.ow < 8 || g.oh * g.ow < 256)
    return false;
  const size_t cin = g.c_in, cout = g.c_out, nsub = (g.kh + 2) / 3, kc = nsub * nsub * cin;
  const size_t tiles_h = (g.oh + kTile - 1) / kTile, tiles_w = (g.ow + kTile - 1) / kTile;
  // block of tiles: a rectangle of rows x cols tiles, about kWinogradBlockBytes of panels
  const size_t per_tile = kXi * (kc + cout) * sizeof(float);
  size_t target = std::clamp<size_t>(kWinogradBlockBytes / per_tile, 16, 512);
  const size_t limit = conv_scratch_limit();
  target = std::max<size_t>(1, std::min(target, limit / per_tile));
  if (target < 4) return false;  // the cap leaves no room for useful blocks
  // balanced segments of a tile row (no thin last block)
  const size_t segs = (tiles_w + target - 1) / target;
  const size_t bw = (tiles_w + segs - 1) / segs;
  const size_t bh = std::min(tiles_h, std::max<size_t>(1, target / bw));
  const size_t nbx = (tiles_w + bw - 1) / bw, nby = (tiles_h + bh - 1) / bh;
  const size_t ntasks = g.b * nbx * nby;
  const size_t T = bw * bh;
  const size_t worker_bytes = per_tile * T;
  size_t workers = std::max<size_t>(1, std::min({get_num_threads(), ntasks, limit / worker_bytes}));
  if (double(g.b) * double(cout) * double(g.oh * g.ow) * double(cin * g.kh * g.kw) < double(1 << 21))
    workers = 1;

  std::vector<float> u(kXi * cout * kc);
  transform_kernel(ker, cout, cin, g.kh, u.data());
  // the 36 GEMMs' A operands, packed once for all blocks
  std::vector<PackedA<float>> up(kXi);
  for (size_t xi = 0; xi < kXi; ++xi)
    up[xi] = pack_a(cout, kc, MatRef<float>{u.data() + xi * cout * kc, kc, 1});
  const size_t ihw = g.ih * g.iw, ohw = g.oh * g.ow;

  parallel_for(workers, 1, [&](size_t w0, size_t w1) {
    std::unique_ptr<float[]> v(new float[kXi * kc * T]), m(new float[kXi * cout * T]);
    for (size_t w = w0; w < w1; ++w) {
      for (size_t task = w; task < ntasks; task += workers) {
        const size_t bx = task % nbx, rest = task / nbx, by = rest % nby, bi = rest / nby;
        const size_t ty0 = by * bh, ty1 = std::min(tiles_h, ty0 + bh);
        const size_t tx0 = bx * bw, tx1 = std::min(tiles_w, tx0 + bw);
        const size_t t = (ty1 - ty0) * (tx1 - tx0);
        for (size_t sub = 0; sub < nsub * nsub; ++sub) {
          transform_input(g, in + bi * cin * ihw, ty0, ty1, tx0, tx1, 3 * (sub / nsub), 3 * (sub % nsub),
                          sub * cin, kc, v.get());
        }
        for (size_t xi = 0; xi < kXi; ++xi) {
          const MatRef<float> b{v.get() + xi * kc * t, t, 1};
          // an output's bits must not depend on the block it falls in (an image tile then
          // gives the whole image's bits)
          gemm_tile_exact(up[xi], t, b, m.get() + xi * cout * t, t, false);
        }
        float* img_out = out + bi * cout * ohw;
        transform_output(g, m.get(), ty0, ty1, tx0, tx1, img_out);
        if (bias || act) {
          const size_t y0 = ty0 * kTile, y1 = std::min(g.oh, ty1 * kTile);
          const size_t x0 = tx0 * kTile, x1 = std::min(g.ow, tx1 * kTile);
          for (size_t co = 0; co < cout; ++co)
            for (size_t y = y0; y < y1; ++y)
              conv_epilogue_f32(img_out + co * ohw + y * g.ow + x0, x1 - x0, bias ? bias[co] : 0.f,
                                bias != nullptr, act);
        }
      }
    }
  });
  return true;
}

}  // namespace candle::cpu
