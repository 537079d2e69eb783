// Stands in for fbgemm (a submodule with its own nested submodule, asmjit).
#include "fbgemm/fbgemm.h"

#include "asmjit/asmjit.h"

namespace fbgemm {
long gemm_checksum(long n) {
  long total = 0;
  for (long i = 0; i < n; ++i) total += asmjit::emit(i);
  return total;
}
}  // namespace fbgemm
