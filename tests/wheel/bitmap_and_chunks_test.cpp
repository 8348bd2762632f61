// The wheel's building blocks: the occupancy bitmap and the chunked slot lists.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "wheel/chunk_list.hpp"
#include "wheel/occupancy_bitmap.hpp"

using delayd::wheel::ChunkList;
using delayd::wheel::ChunkPool;
using delayd::wheel::entries_per_chunk;
using delayd::wheel::OccupancyBitmap;
using delayd::wheel::TimerEntry;

TEST_CASE("the bitmap finds the first occupied slot at or after a position, wrapping", "[wheel][bitmap]") {
  OccupancyBitmap bits(256);
  CHECK_FALSE(bits.any());
  CHECK(bits.find_from(0) == OccupancyBitmap::npos);

  bits.set(5);
  bits.set(64);
  bits.set(200);
  CHECK(bits.any());
  CHECK(bits.count() == 3);
  CHECK(bits.find_from(0) == 5);
  CHECK(bits.find_from(5) == 5);
  CHECK(bits.find_from(6) == 64);
  CHECK(bits.find_from(65) == 200);
  CHECK(bits.find_from(201) == 5);  // wrapped
  CHECK(bits.find_from(255) == 5);

  bits.clear(5);
  CHECK(bits.find_from(201) == 64);
  bits.clear(64);
  bits.clear(200);
  CHECK_FALSE(bits.any());
  CHECK(bits.consistent());
}

TEST_CASE("the bitmap wraps within the same word", "[wheel][bitmap]") {
  OccupancyBitmap bits(4);
  bits.set(1);
  CHECK(bits.find_from(2) == 1);
  CHECK(bits.find_from(1) == 1);
  OccupancyBitmap big(4096);
  big.set(4095);
  big.set(3);
  CHECK(big.find_from(4095) == 4095);
  CHECK(big.find_from(4) == 4095);
  big.clear(4095);
  CHECK(big.find_from(4) == 3);
  CHECK(big.consistent());
}

TEST_CASE("the bitmap agrees with a plain scan for every position", "[wheel][bitmap]") {
  OccupancyBitmap bits(256);
  std::vector<bool> plain(256, false);
  std::uint64_t x = 88172645463325252ULL;
  for (int round = 0; round < 200; ++round) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const std::size_t slot = x % 256;
    if (plain[slot]) {
      bits.clear(slot);
    } else {
      bits.set(slot);
    }
    plain[slot] = !plain[slot];
    for (std::size_t from = 0; from < 256; ++from) {
      std::size_t want = OccupancyBitmap::npos;
      for (std::size_t k = 0; k < 256; ++k) {
        if (plain[(from + k) % 256]) {
          want = (from + k) % 256;
          break;
        }
      }
      REQUIRE(bits.find_from(from) == want);
    }
  }
  CHECK(bits.consistent());
}

TEST_CASE("a chunk list is a FIFO across chunk boundaries and returns chunks to its pool", "[wheel][chunks]") {
  ChunkPool pool;
  ChunkList list;
  const std::size_t n = 3 * entries_per_chunk + 5;
  for (std::size_t i = 0; i < n; ++i) list.push_back(TimerEntry{i, i * 10, static_cast<std::uint32_t>(i), 1}, pool);
  CHECK(list.size() == n);
  CHECK(list.count_by_walking() == n);
  CHECK(pool.chunks_total() - pool.chunks_free() == 4);

  for (std::size_t i = 0; i < entries_per_chunk + 1; ++i) {
    REQUIRE(list.front().deadline == i);
    list.pop_front(pool);
  }
  CHECK(pool.chunks_total() - pool.chunks_free() == 3);  // the first chunk went back

  std::vector<std::uint64_t> rest;
  list.drain(pool, [&rest](const TimerEntry& e) { rest.push_back(e.deadline); });
  REQUIRE(rest.size() == n - entries_per_chunk - 1);
  for (std::size_t i = 0; i < rest.size(); ++i) CHECK(rest[i] == entries_per_chunk + 1 + i);
  CHECK(list.empty());
  CHECK(pool.chunks_free() == pool.chunks_total());
}

TEST_CASE("draining a list may refill other lists from the chunks it gives back", "[wheel][chunks]") {
  ChunkPool pool;
  ChunkList from;
  ChunkList to_even;
  ChunkList to_odd;
  const std::size_t n = 5 * entries_per_chunk;
  for (std::size_t i = 0; i < n; ++i) from.push_back(TimerEntry{i, 0, 0, 1}, pool);
  from.drain(pool, [&](const TimerEntry& e) { (e.deadline % 2 == 0 ? to_even : to_odd).push_back(e, pool); });
  std::uint64_t expect = 0;
  to_even.for_each([&expect](const TimerEntry& e) {
    CHECK(e.deadline == expect);
    expect += 2;
  });
  CHECK(expect == n);
  CHECK(to_even.size() + to_odd.size() == n);
  CHECK(pool.chunks_total() <= 64);  // recycled, not grown per entry
  to_even.clear(pool);
  to_odd.clear(pool);
  CHECK(pool.chunks_free() == pool.chunks_total());
}
