#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "candle/utils.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef CANDLE_HAVE_OPENBLAS
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace candle {
namespace {

size_t default_num_threads() {
  if (const char* env = std::getenv("CANDLE_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return static_cast<size_t>(v);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<size_t>(n);
  }
  return 1;
}

std::atomic<size_t>& thread_count() {
  static std::atomic<size_t> n{0};
  return n;
}

void apply(size_t n) {
  thread_count().store(n);
#ifdef _OPENMP
  omp_set_num_threads(static_cast<int>(n));
#endif
#ifdef CANDLE_HAVE_OPENBLAS
  openblas_set_num_threads(static_cast<int>(n));
#endif
}

}  // namespace

size_t get_num_threads() {
  size_t n = thread_count().load(std::memory_order_relaxed);
  if (n == 0) {
    static const size_t computed = [] {
      size_t d = default_num_threads();
      apply(d);
      return d;
    }();
    return thread_count().load() ? thread_count().load() : computed;
  }
  return n;
}

void set_num_threads(size_t n) { apply(n == 0 ? default_num_threads() : n); }

bool has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool has_avx512f() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

}  // namespace candle
