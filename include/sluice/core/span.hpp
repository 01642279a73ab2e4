#pragma once
// The view of contiguous elements that sluice's functions take and return. Not std::span: std::span's constructor
// from a container checks the C++20 range concepts for each element and container type, which costs the compiler
// 2 to 3 MB per element type (docs/building.md, "What a trainer parses"). Span converts from a vector, an array, a
// C array, a pointer and a count, an iterator pair and a std::span; a std::span takes it as the contiguous range it is.
#include <array>
#include <cstddef>
#include <iterator>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

namespace sluice {

template <class T>
class Span {
public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using size_type = std::size_t;
  using iterator = T*;
  using reverse_iterator = std::reverse_iterator<T*>;

  constexpr Span() noexcept = default;
  constexpr Span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  // A contiguous iterator pair, such as a vector's.
  template <class Iterator>
  requires std::is_convertible_v<decltype(std::to_address(std::declval<const Iterator&>())), T*>
  constexpr Span(Iterator first, Iterator last) noexcept
      : data_(std::to_address(first)), size_(static_cast<std::size_t>(last - first)) {}
  template <class Allocator>
  constexpr Span(std::vector<value_type, Allocator>& values) noexcept : data_(values.data()), size_(values.size()) {}
  template <class Allocator>
  requires std::is_const_v<T>
  constexpr Span(const std::vector<value_type, Allocator>& values) noexcept
      : data_(values.data()), size_(values.size()) {}
  template <std::size_t N>
  constexpr Span(std::array<value_type, N>& values) noexcept : data_(values.data()), size_(N) {}
  template <std::size_t N>
  requires std::is_const_v<T>
  constexpr Span(const std::array<value_type, N>& values) noexcept : data_(values.data()), size_(N) {}
  template <std::size_t N>
  constexpr Span(T (&values)[N]) noexcept : data_(values), size_(N) {}
  // From a view of the same elements, or of mutable ones where this one is const.
  template <class U, std::size_t Extent>
  requires std::is_convertible_v<U (*)[], T (*)[]>
  constexpr Span(std::span<U, Extent> values) noexcept : data_(values.data()), size_(values.size()) {}
  template <class U>
  requires(std::is_convertible_v<U (*)[], T (*)[]> && !std::is_same_v<U, T>) constexpr Span(Span<U> values) noexcept
      : data_(values.data()), size_(values.size()) {}

  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] constexpr T* begin() const noexcept { return data_; }
  [[nodiscard]] constexpr T* end() const noexcept { return data_ + size_; }
  [[nodiscard]] constexpr reverse_iterator rbegin() const noexcept { return reverse_iterator(end()); }
  [[nodiscard]] constexpr reverse_iterator rend() const noexcept { return reverse_iterator(begin()); }
  [[nodiscard]] constexpr T& operator[](std::size_t index) const noexcept { return data_[index]; }
  [[nodiscard]] constexpr T& front() const noexcept { return data_[0]; }
  [[nodiscard]] constexpr T& back() const noexcept { return data_[size_ - 1]; }
  [[nodiscard]] constexpr Span first(std::size_t count) const noexcept { return {data_, count}; }
  [[nodiscard]] constexpr Span last(std::size_t count) const noexcept { return {data_ + size_ - count, count}; }
  [[nodiscard]] constexpr Span subspan(std::size_t offset) const noexcept { return {data_ + offset, size_ - offset}; }
  [[nodiscard]] constexpr Span subspan(std::size_t offset, std::size_t count) const noexcept {
    return {data_ + offset, count};
  }

private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <class T>
Span(T*, std::size_t) -> Span<T>;
template <class T, class Allocator>
Span(std::vector<T, Allocator>&) -> Span<T>;
template <class T, class Allocator>
Span(const std::vector<T, Allocator>&) -> Span<const T>;
template <class T, std::size_t N>
Span(std::array<T, N>&) -> Span<T>;
template <class T, std::size_t N>
Span(const std::array<T, N>&) -> Span<const T>;

}  // namespace sluice

// A Span refers to elements it does not own, so a view made from a temporary Span stays valid.
namespace std::ranges {
template <class T>
inline constexpr bool enable_borrowed_range<sluice::Span<T>> = true;
}  // namespace std::ranges
