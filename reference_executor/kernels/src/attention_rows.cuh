#pragma once
// The device side of attention_args.hpp's RowLayout, shared by both attention kernels: row positions, the causal
// mask by position, and the loop bounds it gives (positions ascend within a sequence, so the keys a query sees are
// a prefix of its sequence's keys, and the queries that see a key a suffix of its sequence's queries).
#include <cstdint>

#include "attention_args.hpp"

namespace sluice::executor::kernels::detail {

// One sequence's rows on one side of the block's grid cell (blockIdx.z is the sequence).
struct SideRows {
  int begin;                      // first packed row
  int length;                     // rows
  const std::int32_t* positions;  // null: a row's position is its index
  __device__ int position(int index) const { return positions == nullptr ? index : positions[begin + index]; }
};

__device__ inline SideRows query_rows(const RowLayout& layout) {
  const int begin = layout.cu_seqlens[blockIdx.z];
  return {begin, layout.cu_seqlens[blockIdx.z + 1] - begin, layout.query_positions};
}

__device__ inline SideRows key_rows(const RowLayout& layout) {
  const int begin = layout.key_cu_seqlens[blockIdx.z];
  return {begin, layout.key_cu_seqlens[blockIdx.z + 1] - begin, layout.key_positions};
}

// Whether query row `query` sees key row `key` (indices within the sequence; rows past either end see nothing).
__device__ inline bool attends(const SideRows& queries, int query, const SideRows& keys, int key) {
  return query < queries.length && key < keys.length && keys.position(key) <= queries.position(query);
}

// How many of the sequence's keys (a prefix) a query at `position` sees.
__device__ inline int visible_keys(const SideRows& keys, int position) {
  if (keys.positions == nullptr) return min(keys.length, position + 1);
  int low = 0, high = keys.length;  // first key whose position is past `position`
  while (low < high) {
    const int middle = (low + high) / 2;
    if (keys.positions[keys.begin + middle] <= position) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

// The first of the sequence's queries that sees a key at `position` (queries.length if none does).
__device__ inline int first_seeing_query(const SideRows& queries, int position) {
  if (queries.positions == nullptr) return min(queries.length, position);
  int low = 0, high = queries.length;
  while (low < high) {
    const int middle = (low + high) / 2;
    if (queries.positions[queries.begin + middle] < position) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

// The keys a query tile [first_query, first_query + tile) sees, as a count from the sequence's first key: those its
// last query sees.
__device__ inline int tile_key_end(const SideRows& queries, int first_query, int tile, const SideRows& keys) {
  const int last = min(queries.length, first_query + tile) - 1;
  return last < 0 ? 0 : visible_keys(keys, queries.position(last));
}

}  // namespace sluice::executor::kernels::detail
