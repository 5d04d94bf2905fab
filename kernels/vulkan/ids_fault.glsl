// The indexing kernels' side of the device index checks (ids_check.comp ran first). Include
// after declaring the ids buffer `ids` (uvec2 elements with ID_I64, else uint) and the fault
// block `fault`.
//
// True when the check of this op (tag) found a bad id: the kernel then writes nothing, and its
// `leader` thread copies the first bad id into fault words 2..3 for the error message.
bool ids_faulted(uint tag, uint ids_off, bool leader) {
  if (fault[0] != tag) return false;
  if (leader) {
#if defined(ID_I64)
    uvec2 bad = ids[ids_off + fault[1]];
    fault[2] = bad.x;
    fault[3] = bad.y;
#else
    fault[2] = ids[ids_off + fault[1]];
    fault[3] = 0u;
#endif
  }
  return true;
}
