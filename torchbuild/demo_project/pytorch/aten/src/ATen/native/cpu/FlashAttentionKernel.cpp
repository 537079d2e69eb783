// The demo's heavy unit, as PyTorch's flash-attention kernels are: one translation unit that needs
// about three times the compiler memory of the others (3500 tile instantiations folded into one kernel),
// so the build profile, `inv build --explain` and the memory pool have a real one to show.
#include <cstddef>
#include <utility>

namespace at {
namespace native {
namespace {
template <std::size_t I>
struct Tile {
  static long run(long x) { return (x ^ static_cast<long>(I * 2654435761u)) % 1009; }
};

template <std::size_t... I>
long all_tiles(long x, std::index_sequence<I...>) {
  return (Tile<I>::run(x) + ...);
}
}  // namespace

long flash_attention_cpu(long x) { return all_tiles(x, std::make_index_sequence<3500>{}); }
}  // namespace native
}  // namespace at
