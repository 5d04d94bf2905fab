// A kernel timeline for machines without Nsight Systems: preloaded into a CUDA program, it records
// every kernel's, copy's and memset's GPU start and end through CUPTI's activity API (those replayed
// from a CUDA graph included, one record per node) and writes them at exit as CSV lines
// "start_ns,end_ns,graph_id,name" ("[memcpy kind K N bytes]", "[memset N bytes]" for the others)
// to $CUPTI_TRACE_OUT (default cupti_trace.csv). Build and use (tools/cuda_timeline_decode.sh does):
//   g++ -O2 -shared -fPIC tools/probe/cupti_trace.cpp -I/usr/local/cuda/include -L<libcupti's dir>
//     -lcupti -o /tmp/libcupti_trace.so
//   CUPTI_TRACE_OUT=t.csv LD_PRELOAD=/tmp/libcupti_trace.so program ...
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

FILE* g_out = nullptr;
constexpr size_t kBufferBytes = size_t{16} << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  for (char& c : s)
    if (c == ',') c = ';';
  return s;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (!g_out) continue;
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      std::fprintf(g_out, "%llu,%llu,%u,%s\n", static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->graphId, short_name(k->name).c_str());
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      std::fprintf(g_out, "%llu,%llu,%u,[memcpy kind %u %llu bytes]\n",
                   static_cast<unsigned long long>(c->start), static_cast<unsigned long long>(c->end),
                   c->graphId, static_cast<unsigned>(c->copyKind), static_cast<unsigned long long>(c->bytes));
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      std::fprintf(g_out, "%llu,%llu,%u,[memset %llu bytes]\n", static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), m->graphId,
                   static_cast<unsigned long long>(m->bytes));
    }
  }
  std::free(buffer);
}

__attribute__((constructor)) void start_trace() {
  const char* path = std::getenv("CUPTI_TRACE_OUT");
  g_out = std::fopen(path ? path : "cupti_trace.csv", "w");
  if (!g_out) return;
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS)
    std::fprintf(stderr, "cupti_trace: CUPTI did not start\n");
}

__attribute__((destructor)) void stop_trace() {
  cuptiActivityFlushAll(1);
  if (g_out) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace
