// Stands in for asmjit (a nested submodule of fbgemm, as in PyTorch).
#pragma once
namespace asmjit {
inline long emit(long x) { return x * 3 + 1; }
}  // namespace asmjit
