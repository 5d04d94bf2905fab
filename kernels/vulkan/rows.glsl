// Shared part of the last-dim row kernels (softmax.comp, norm.comp): 256 threads per
// work-group, 2^tpr_log2 threads per row (256 >> tpr_log2 rows per work-group); each thread
// walks its row in strides of the row's thread count, then the row's threads combine their
// partials in shared memory by a fixed tree (deterministic).
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require

#if defined(T_F16)
#define T float16_t
#else
#define T float
#endif

layout(local_size_x = 256) in;

shared float red[256];

// The row's threads are lanes [0, tpr) of the segment starting at thread t - lane; every
// thread of the work-group must call this (it has barriers). Returns the row's sum or max.
float row_reduce(float v, uint t, uint lane, uint tpr, bool is_max) {
  red[t] = v;
  barrier();
  for (uint s = tpr >> 1; s > 0u; s >>= 1) {
    if (lane < s) {
      float a = red[t], b = red[t + s];
      red[t] = is_max ? (b > a ? b : a) : a + b;
    }
    barrier();
  }
  float r = red[t - lane];
  barrier();  // everyone has read before red is written again
  return r;
}
