#pragma once
// How the host backend's lanes move data inside a forward or backward (TP's all-gathers and reduce-scatters, CP's
// all-to-alls and ring steps): an Exchange between the ranks of a group, which the local transport implements with
// threads of one process and the MPI transport with one communicator per group. The collectives built on it add in
// member order, so every member gets the same bits and a run over MPI equals a run in one process bit for bit.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "sluice_executor/job.hpp"
#include "sluice_executor/shards.hpp"

namespace sluice::executor::host {

class Exchange {
public:
  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  virtual ~Exchange() = default;
  // Sends parts[j] to member j and returns, in member order, what each member sent this rank (parts[index] comes
  // back unmoved). Every member calls it, in the same order as its other calls on the group.
  virtual std::vector<std::vector<double>> all_to_all(const Group& group, std::vector<std::vector<double>> parts) = 0;
  // Sends `data` to member `to` and returns what member `from` sent this rank the same way: one step of a ring.
  virtual std::vector<double> shift(const Group& group, int to, std::vector<double> data, int from) = 0;
};

// Collectives on row-major [rows, cols] blocks, built on an Exchange; a group of one moves nothing.
class Collectives {
public:
  explicit Collectives(Exchange* exchange) : exchange_(exchange) {}

  // Every member's rows, concatenated in member order.
  std::vector<double> all_gather(const Group& group, std::vector<double> mine) const {
    if (group.size() == 1) return mine;
    std::vector<std::vector<double>> parts(static_cast<std::size_t>(group.size()));
    for (std::size_t j = 0; j < parts.size(); ++j)
      if (static_cast<int>(j) != group.index) parts[j] = mine;
    parts[static_cast<std::size_t>(group.index)] = std::move(mine);
    std::vector<double> all;
    for (std::vector<double>& part : exchange_->all_to_all(group, std::move(parts)))
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }

  // The sum over members, in member order, of rows [⌊index·rows/size⌋, ⌊(index+1)·rows/size⌋) of their full
  // [rows, cols] partial sums: the rows this member holds.
  std::vector<double> reduce_scatter(const Group& group, const std::vector<double>& full, std::int64_t rows,
                                     std::int64_t cols) const {
    if (group.size() == 1) return full;
    std::vector<std::vector<double>> parts;
    for (int j = 0; j < group.size(); ++j) {
      const RowRange range = even_part(rows, group.size(), j);
      parts.emplace_back(full.begin() + range.begin * cols, full.begin() + range.end * cols);
    }
    return sum(exchange_->all_to_all(group, std::move(parts)));
  }

  // The element-wise sum over members, in member order.
  std::vector<double> all_reduce_sum(const Group& group, std::vector<double> mine) const {
    if (group.size() == 1) return mine;
    return sum(
        exchange_->all_to_all(group, std::vector<std::vector<double>>(static_cast<std::size_t>(group.size()), mine)));
  }

  std::vector<double> all_reduce_max(const Group& group, std::vector<double> mine) const {
    if (group.size() == 1) return mine;
    std::vector<std::vector<double>> all =
        exchange_->all_to_all(group, std::vector<std::vector<double>>(static_cast<std::size_t>(group.size()), mine));
    std::vector<double> result = std::move(all.front());
    for (std::size_t j = 1; j < all.size(); ++j)
      for (std::size_t i = 0; i < result.size(); ++i) result[i] = std::max(result[i], all[j][i]);
    return result;
  }

  std::vector<std::vector<double>> all_to_all(const Group& group, std::vector<std::vector<double>> parts) const {
    if (group.size() == 1) return parts;
    return exchange_->all_to_all(group, std::move(parts));
  }

  std::vector<double> shift(const Group& group, int to, std::vector<double> data, int from) const {
    if (group.size() == 1) return data;
    return exchange_->shift(group, to, std::move(data), from);
  }

private:
  static std::vector<double> sum(std::vector<std::vector<double>> parts) {
    std::vector<double> result = std::move(parts.front());
    for (std::size_t j = 1; j < parts.size(); ++j)
      for (std::size_t i = 0; i < result.size(); ++i) result[i] += parts[j][i];
    return result;
  }

  Exchange* exchange_;
};

}  // namespace sluice::executor::host
