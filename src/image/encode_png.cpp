// PNG encoding straight with zlib, in parallel.
//
// The filtered rows are cut into horizontal strips; each strip is deflated on its own (a raw
// deflate stream with a fresh dictionary) and ended with Z_SYNC_FLUSH, which byte-aligns it and
// leaves the final-block bit unset, the last with Z_FINISH. Concatenated behind one zlib header
// they are one valid zlib stream, whose Adler-32 is the strips' combined (adler32_combine). Each
// strip becomes one IDAT chunk, its CRC computed on the strip's thread. Any decoder reads it.
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "candle/image.h"
#include "image_internal.h"

namespace candle::image {
namespace {

enum Filter : uint8_t { kNone = 0, kSub = 1, kUp = 2, kAverage = 3, kPaeth = 4 };

inline uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return static_cast<uint8_t>(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

// One filtered row: out[0] the filter type, out[1..n] the bytes; prev is null for the first row.
void filter_row(Filter f, const uint8_t* row, const uint8_t* prev, size_t n, size_t bpp, uint8_t* out) {
  out[0] = f;
  uint8_t* o = out + 1;
  switch (f) {
    case kNone: std::memcpy(o, row, n); break;
    case kSub:
      for (size_t i = 0; i < bpp && i < n; ++i) o[i] = row[i];
      for (size_t i = bpp; i < n; ++i) o[i] = static_cast<uint8_t>(row[i] - row[i - bpp]);
      break;
    case kUp:
      if (!prev)
        std::memcpy(o, row, n);
      else
        for (size_t i = 0; i < n; ++i) o[i] = static_cast<uint8_t>(row[i] - prev[i]);
      break;
    case kAverage:
      for (size_t i = 0; i < n; ++i) {
        const unsigned a = i >= bpp ? row[i - bpp] : 0, b = prev ? prev[i] : 0;
        o[i] = static_cast<uint8_t>(row[i] - ((a + b) >> 1));
      }
      break;
    case kPaeth:
      for (size_t i = 0; i < n; ++i) {
        const int a = i >= bpp ? row[i - bpp] : 0, b = prev ? prev[i] : 0,
                  c = prev && i >= bpp ? prev[i - bpp] : 0;
        o[i] = static_cast<uint8_t>(row[i] - paeth(a, b, c));
      }
      break;
  }
}

// libpng's heuristic: the filter whose output, read as signed bytes, has the least sum of magnitudes.
void filter_row_adaptive(const uint8_t* row, const uint8_t* prev, size_t n, size_t bpp, uint8_t* out,
                         uint8_t* scratch) {
  uint64_t best = UINT64_MAX;
  for (Filter f : {kNone, kSub, kUp, kAverage, kPaeth}) {
    filter_row(f, row, prev, n, bpp, scratch);
    uint64_t sum = 0;
    for (size_t i = 1; i <= n; ++i) sum += scratch[i] < 128 ? scratch[i] : 256 - scratch[i];
    if (sum < best) best = sum, std::memcpy(out, scratch, n + 1);
  }
}

void put32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24), p[1] = uint8_t(v >> 16), p[2] = uint8_t(v >> 8), p[3] = uint8_t(v);
}

struct Strip {
  size_t y0 = 0, y1 = 0;
  std::vector<uint8_t> chunk;  // length, "IDAT", data (zlib header first, Adler-32 last), CRC
  uLong adler = 1, crc = 0;    // the CRC without the Adler-32 of the last strip
  size_t raw = 0;              // filtered bytes
  bool failed = false;
};

struct Job {
  const uint8_t* px;
  size_t stride, bpp, height;
  int level;
};

void deflate_strip(const Job& job, Strip& s, bool first, bool last) {
  z_stream z{};
  // levels 1-3: run-length matches only (Z_RLE), several times faster than level 1's hash chains
  // and smaller on filtered photographs; 4-9: zlib's own
  const int strategy = job.level >= 1 && job.level <= 3 ? Z_RLE : Z_DEFAULT_STRATEGY;
  if (deflateInit2(&z, job.level, Z_DEFLATED, -15, 8, strategy) != Z_OK) {
    s.failed = true;
    return;
  }
  const size_t n = job.stride, rows = s.y1 - s.y0;
  s.raw = (n + 1) * rows;
  // 8 bytes of chunk header, 2 of zlib header; deflateBound plus the sync marker; 4 + 4 at the end
  const size_t bound = deflateBound(&z, static_cast<uLong>(s.raw)) + 16;
  s.chunk.resize(8 + 2 + bound + 8);
  size_t pos = 8;
  if (first) {
    // CMF: deflate, 32 KiB window; FLG: the level class, and the check bits
    const unsigned cmf = 0x78, flevel = job.level < 2 ? 0 : job.level < 6 ? 1 : job.level == 6 ? 2 : 3;
    unsigned flg = flevel << 6;
    flg += (31 - (cmf * 256 + flg) % 31) % 31;
    s.chunk[pos++] = uint8_t(cmf), s.chunk[pos++] = uint8_t(flg);
  }
  std::vector<uint8_t> buf(n + 1), scratch(job.level >= 2 ? n + 1 : 0);
  z.next_out = s.chunk.data() + pos;
  z.avail_out = static_cast<uInt>(std::min<size_t>(s.chunk.size() - pos - 8, UINT32_MAX));
  uLong adler = adler32(0, nullptr, 0);
  bool ok = true;
  for (size_t y = s.y0; y < s.y1 && ok; ++y) {
    const uint8_t* row = job.px + y * n;
    const uint8_t* prev = y ? row - n : nullptr;
    if (job.level == 0)
      filter_row(kNone, row, prev, n, job.bpp, buf.data());
    else if (job.level == 1)
      filter_row(kPaeth, row, prev, n, job.bpp, buf.data());
    else
      filter_row_adaptive(row, prev, n, job.bpp, buf.data(), scratch.data());
    adler = adler32(adler, buf.data(), static_cast<uInt>(n + 1));
    z.next_in = buf.data();
    z.avail_in = static_cast<uInt>(n + 1);
    const int flush = y + 1 < s.y1 ? Z_NO_FLUSH : last ? Z_FINISH : Z_SYNC_FLUSH;
    const int rc = deflate(&z, flush);
    // the buffer is sized by deflateBound: it never runs out
    ok = z.avail_in == 0 && (flush == Z_FINISH ? rc == Z_STREAM_END : rc == Z_OK);
  }
  deflateEnd(&z);
  if (!ok) {
    s.failed = true;
    return;
  }
  pos = static_cast<size_t>(z.next_out - s.chunk.data());
  s.adler = adler;
  s.chunk.resize(pos + (last ? 4 : 0) + 4);
  put32(s.chunk.data(), static_cast<uint32_t>(pos - 8 + (last ? 4 : 0)));
  std::memcpy(s.chunk.data() + 4, "IDAT", 4);
  s.crc = crc32(0, s.chunk.data() + 4, static_cast<uInt>(pos - 4));
  if (!last) put32(s.chunk.data() + pos, static_cast<uint32_t>(s.crc));
}

// A whole chunk at `at`: 12 + n bytes
size_t put_chunk(uint8_t* at, const char* type, const uint8_t* data, size_t n) {
  put32(at, static_cast<uint32_t>(n));
  std::memcpy(at + 4, type, 4);
  if (n) std::memcpy(at + 8, data, n);
  put32(at + 8 + n, static_cast<uint32_t>(crc32(0, at + 4, static_cast<uInt>(4 + n))));
  return 12 + n;
}

}  // namespace

std::vector<uint8_t> encode_png(const uint8_t* pixels, size_t width, size_t height, size_t channels,
                                const EncodeOptions& opts) {
  detail::check_encode_shape("PNG", width, height, channels, kMaxSide, "1..");
  if (opts.png_level < 0 || opts.png_level > 9) {
    throw Error(ErrorKind::InvalidArgument,
                "PNG compression level " + std::to_string(opts.png_level) + " is not in 0-9");
  }
  if (!pixels) throw Error(ErrorKind::InvalidArgument, "PNG: no pixels");
  const size_t stride = width * channels;  // <= 262140: no overflow anywhere below
  const size_t row_bytes = stride + 1;

  unsigned threads = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, 64u);
  size_t rows_per = opts.strip_rows;
  if (rows_per == 0) {
    // strips of about 1 MiB, at least one per thread when there are rows enough
    rows_per = std::max<size_t>(1, (size_t{1} << 20) / row_bytes);
    rows_per = std::min(rows_per, std::max<size_t>(1, (height + threads - 1) / threads));
  }
  // a strip's chunk must stay below 2^31 bytes: at most 1 GiB of filtered rows
  rows_per = std::min(rows_per, std::max<size_t>(1, (size_t{1} << 30) / row_bytes));
  const size_t nstrips = (height + rows_per - 1) / rows_per;
  std::vector<Strip> strips(nstrips);
  for (size_t i = 0; i < nstrips; ++i)
    strips[i].y0 = i * rows_per, strips[i].y1 = std::min(height, (i + 1) * rows_per);

  Job job{pixels, stride, channels, height, opts.png_level};
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < nstrips;)
      deflate_strip(job, strips[i], i == 0, i + 1 == nstrips);
  };
  const unsigned nthreads = static_cast<unsigned>(std::min<size_t>(threads, nstrips));
  std::vector<std::thread> pool;
  pool.reserve(nthreads > 0 ? nthreads - 1 : 0);
  try {
    for (unsigned t = 1; t < nthreads; ++t) pool.emplace_back(work);
  } catch (...) {
    // no thread to spare: the others (and this one) do the work
  }
  work();
  for (auto& t : pool) t.join();

  // the stream's Adler-32 and the chunks' CRCs
  uLong adler = strips[0].adler;
  for (size_t i = 0; i < nstrips; ++i) {
    if (strips[i].failed) throw Error(ErrorKind::Internal, "PNG: deflate failed");
    if (i) adler = adler32_combine(adler, strips[i].adler, static_cast<z_off_t>(strips[i].raw));
  }
  size_t total = 8 + 25 + 12;
  for (auto& st : strips) total += st.chunk.size();
  std::vector<uint8_t> out(total);
  uint8_t* p = out.data();
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::memcpy(p, sig, 8);
  p += 8;
  uint8_t ihdr[13];
  put32(ihdr, static_cast<uint32_t>(width));
  put32(ihdr + 4, static_cast<uint32_t>(height));
  static const uint8_t color_type[5] = {0, 0, 4, 2, 6};
  ihdr[8] = 8, ihdr[9] = color_type[channels], ihdr[10] = 0, ihdr[11] = 0, ihdr[12] = 0;
  p += put_chunk(p, "IHDR", ihdr, 13);
  for (size_t i = 0; i < nstrips; ++i) {
    std::vector<uint8_t>& c = strips[i].chunk;
    if (i + 1 == nstrips) {
      uint8_t* a = c.data() + c.size() - 8;
      put32(a, static_cast<uint32_t>(adler));
      put32(a + 4, static_cast<uint32_t>(crc32(strips[i].crc, a, 4)));
    }
    std::memcpy(p, c.data(), c.size());
    p += c.size();
    std::vector<uint8_t>().swap(c);
  }
  put_chunk(p, "IEND", nullptr, 0);
  return out;
}

}  // namespace candle::image
