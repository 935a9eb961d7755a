// Sizes and strides live inline for up to 6 dims, so making a tensor costs no extra heap
// allocation for them.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

namespace ember {

class DimVector {
 public:
  static constexpr int64_t kInline = 6;
  DimVector() = default;
  explicit DimVector(int64_t n, int64_t value = 0) { assign(n, value); }
  DimVector(std::initializer_list<int64_t> il) { assign(il.begin(), il.end()); }
  DimVector(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT
  DimVector(const int64_t* b, const int64_t* e) { assign(b, e); }
  DimVector(const DimVector& o) { assign(o.begin(), o.end()); }
  DimVector& operator=(const DimVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  DimVector(DimVector&& o) noexcept { *this = std::move(o); }
  DimVector& operator=(DimVector&& o) noexcept {
    if (o.heap_) {
      heap_ = std::move(o.heap_);
      cap_ = o.cap_;
      size_ = o.size_;
    } else {
      assign(o.begin(), o.end());
    }
    o.size_ = 0;
    o.cap_ = kInline;
    return *this;
  }

  template <class It>
  void assign(It b, It e) {
    int64_t n = static_cast<int64_t>(std::distance(b, e));
    reserve(n);
    std::copy(b, e, data());
    size_ = n;
  }
  void assign(int64_t n, int64_t value) {
    reserve(n);
    std::fill(data(), data() + n, value);
    size_ = n;
  }
  void reserve(int64_t n) {
    if (n <= cap_) return;
    std::unique_ptr<int64_t[]> h(new int64_t[n]);
    std::copy(begin(), end(), h.get());
    heap_ = std::move(h);
    cap_ = n;
  }
  void resize(int64_t n, int64_t value = 0) {
    reserve(n);
    for (int64_t i = size_; i < n; ++i) data()[i] = value;
    size_ = n;
  }
  void push_back(int64_t v) {
    if (size_ == cap_) reserve(cap_ * 2);
    data()[size_++] = v;
  }
  void insert(int64_t pos, int64_t v) {
    push_back(0);
    int64_t* d = data();
    for (int64_t i = size_ - 1; i > pos; --i) d[i] = d[i - 1];
    d[pos] = v;
  }
  void erase(int64_t pos) {
    int64_t* d = data();
    for (int64_t i = pos; i + 1 < size_; ++i) d[i] = d[i + 1];
    --size_;
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }

  int64_t* data() { return heap_ ? heap_.get() : inline_; }
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t& operator[](int64_t i) { return data()[i]; }
  int64_t operator[](int64_t i) const { return data()[i]; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t back() const { return data()[size_ - 1]; }
  bool operator==(const DimVector& o) const {
    return size_ == o.size_ && std::equal(begin(), end(), o.begin());
  }
  bool operator!=(const DimVector& o) const { return !(*this == o); }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }

 private:
  int64_t inline_[kInline] = {};
  std::unique_ptr<int64_t[]> heap_;
  int64_t size_ = 0;
  int64_t cap_ = kInline;
};

}  // namespace ember
