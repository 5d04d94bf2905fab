// The ISA clones of the CPU kernels: GCC's target_clones (AVX-512F, AVX2 and a baseline, one
// picked at load time). Clang does not clone function templates; a clang build (the fuzz
// preset) compiles each kernel once, for the baseline ISA.
#pragma once

#if defined(__clang__)
#define CANDLE_TARGET_CLONES
#else
#define CANDLE_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
