// Per-core FMA throughput and copy bandwidth at 1..N threads: tells whether a machine's cores
// slow down when all run AVX-512 FMAs (frequency licence) and how copy bandwidth scales.
//   g++ -O2 -mavx512f -fopenmp tools/probe/cpu_probe.cpp -o cpu_probe && ./cpu_probe 16
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static double fma_gflops(int threads) {
  const long iters = 200000000L / 12;
  double secs = 0;
#pragma omp parallel num_threads(threads) reduction(max : secs)
  {
    const __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
    // 12 independent chains in registers (latency 4 x 2 FMA ports needs >= 8)
    __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3);
    __m512 a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7);
    __m512 a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i) {
      a0 = _mm512_fmadd_ps(a0, b, c);
      a1 = _mm512_fmadd_ps(a1, b, c);
      a2 = _mm512_fmadd_ps(a2, b, c);
      a3 = _mm512_fmadd_ps(a3, b, c);
      a4 = _mm512_fmadd_ps(a4, b, c);
      a5 = _mm512_fmadd_ps(a5, b, c);
      a6 = _mm512_fmadd_ps(a6, b, c);
      a7 = _mm512_fmadd_ps(a7, b, c);
      a8 = _mm512_fmadd_ps(a8, b, c);
      a9 = _mm512_fmadd_ps(a9, b, c);
      a10 = _mm512_fmadd_ps(a10, b, c);
      a11 = _mm512_fmadd_ps(a11, b, c);
    }
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                               _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    float s = _mm512_reduce_add_ps(sum);
    if (s == 1234.5f) std::printf("!");
  }
  return double(iters) * 12 * 32 / secs / 1e9;  // per thread
}

static double copy_gbs(int threads, size_t bytes_per_thread) {
  std::vector<std::vector<char>> src(threads), dst(threads);
  for (int t = 0; t < threads; ++t) src[t].assign(bytes_per_thread, 1), dst[t].assign(bytes_per_thread, 0);
  double secs = 0;
  const int reps = 10;
#pragma omp parallel num_threads(threads) reduction(max : secs)
  {
    int t = omp_get_thread_num();
    std::memcpy(dst[t].data(), src[t].data(), bytes_per_thread);
#pragma omp barrier
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) std::memcpy(dst[t].data(), src[t].data(), bytes_per_thread);
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return double(bytes_per_thread) * 2 * reps * threads / secs / 1e9;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 16;
  for (int t : {1, 2, 4, 8, n}) {
    if (t > n) continue;
    std::printf(
        "threads %2d: FMA %.1f GFLOP/s per thread; copy 64 MiB/thread %.1f GB/s total, 1 MiB/thread %.1f "
        "GB/s total\n",
        t, fma_gflops(t), copy_gbs(t, 64 << 20), copy_gbs(t, 1 << 20));
  }
}
