// Random number generation: a counter-based Philox4x32-10 stream per Generator, so the same seed
// gives the same numbers on any thread count (and, later, on CUDA).
#pragma once
#include <cstdint>
#include <mutex>

namespace ember {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) { manual_seed(seed); }
  void manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> g(mutex_);
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t initial_seed() const { return seed_; }
  // Reserves `n` 128-bit counter blocks; returns the first counter. Each op takes a fresh range.
  uint64_t reserve(uint64_t n) {
    std::lock_guard<std::mutex> g(mutex_);
    uint64_t start = offset_;
    offset_ += n;
    return start;
  }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    std::lock_guard<std::mutex> g(mutex_);
    seed_ = seed;
    offset_ = offset;
  }

 private:
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
  std::mutex mutex_;
};

Generator& default_generator();
inline Generator& gen_or_default(Generator* g) { return g ? *g : default_generator(); }

// Philox4x32-10: 4 random 32-bit words for (key, counter).
struct Philox {
  static inline void round(uint32_t ctr[4], const uint32_t key[2]) {
    constexpr uint64_t M0 = 0xD2511F53, M1 = 0xCD9E8D57;
    uint64_t p0 = M0 * ctr[0], p1 = M1 * ctr[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    uint32_t c0 = hi1 ^ ctr[1] ^ key[0], c2 = hi0 ^ ctr[3] ^ key[1];
    ctr[0] = c0;
    ctr[1] = lo1;
    ctr[2] = c2;
    ctr[3] = lo0;
  }
  static inline void generate(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    uint32_t ctr[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0};
    for (int i = 0; i < 10; ++i) {
      round(ctr, key);
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    for (int i = 0; i < 4; ++i) out[i] = ctr[i];
  }
};

}  // namespace ember
