#include "wheel/chunk_list.hpp"

namespace delayd::wheel {

void ChunkPool::grow() {
  // Whole blocks keep the allocator out of the per-timer path; the chunks are threaded onto the
  // free list in address order so that a fresh block is handed out sequentially.
  // for_overwrite: entries are written before they are read, so the block is not cleared.
  auto block = std::make_unique_for_overwrite<EntryChunk[]>(chunks_per_block);
  for (std::size_t i = chunks_per_block; i-- > 0;) {
    block[i].next = free_;
    free_ = &block[i];
  }
  free_count_ += chunks_per_block;
  blocks_.push_back(std::move(block));
}

}  // namespace delayd::wheel
