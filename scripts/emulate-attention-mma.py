#!/usr/bin/env python3
"""Emulates attention_mma.cu's warp-level algorithm lane by lane with the PTX ISA's semantics of ldmatrix (.trans) and
mma.m16n8k16 (which lane holds which element of A, B and C), in float64, and compares forward, dQ, dK and dV with
dense causal attention: a check of the kernels' index math (operand addresses, accumulator-to-operand packing, the
mask by row position, tile loops and their bounds, online softmax) made without a GPU. It mirrors the kernels' code
function by function, attention_rows.cuh's row layout included (positions None: a row's position is its index), for
one sequence per side. Self-attention runs on a whole sequence, the forward with 128- and 64-row blocks; ring
attention's block steps (ring degree R, the sequence cut in 2R chunks, rank r holding chunks r and 2R-1-r) run every
pair of blocks, whose forward outputs are merged as attention_merge does and whose gradients are summed. The
single-pass backward (AttentionKernel::mma_single_pass) runs beside the split one, its blocks as coroutines that
yield at their dQ turns, under several schedules that must give the same bits (run_grid fails on a deadlock). Shared
tiles start as NaN and the outputs and dQ's accumulator too, so a read of a tile never copied or a row never stored
shows. It does not model cp.async timing, memory ordering, bf16 rounding or several sequences in one batch. Prints
the largest errors (~1e-15) and the kernel paths taken; asserts that the queries seeing none of a block's keys (and
only they) get exactly out 0 and lse -inf, and that a block step whose keys all follow its queries, where every loop
has no tile, gives zeros; exits 1 past 1e-12 or if a path was never taken."""
import sys
from collections import Counter

import numpy as np

seen = Counter()  # which kernel paths ran: each must, or the check proves less than it says


def ldmatrix(tile, addr, trans=False):
    """addr(lane) -> (row, col) of the 8-element row that lane provides. Returns regs[lane][j] = (lo, hi)."""
    mats = []
    for j in range(4):
        rows = []
        for r in range(8):
            row, col = addr(8 * j + r)
            rows.append(tile[row, col:col + 8])
        mats.append(np.array(rows))
    regs = [[None] * 4 for _ in range(32)]
    for L in range(32):
        for j in range(4):
            m = mats[j]
            if not trans:
                regs[L][j] = (m[L // 4, 2 * (L % 4)], m[L // 4, 2 * (L % 4) + 1])
            else:
                regs[L][j] = (m[2 * (L % 4), L // 4], m[2 * (L % 4) + 1, L // 4])
    return regs

def mma(c, a, b0, b1):
    """c[lane][4], a[lane][4]=(lo,hi), b0[lane]/b1[lane]=(lo,hi). In place."""
    A = np.zeros((16, 16)); B = np.zeros((16, 8)); C = np.zeros((16, 8))
    for L in range(32):
        g, t = L // 4, L % 4
        A[g, 2*t:2*t+2] = a[L][0]; A[g+8, 2*t:2*t+2] = a[L][1]
        A[g, 2*t+8:2*t+10] = a[L][2]; A[g+8, 2*t+8:2*t+10] = a[L][3]
        B[2*t:2*t+2, g] = b0[L]; B[2*t+8:2*t+10, g] = b1[L]
        C[g, 2*t:2*t+2] = c[L][0:2]; C[g+8, 2*t:2*t+2] = c[L][2:4]
    D = A @ B + C
    for L in range(32):
        g, t = L // 4, L % 4
        c[L][0:2] = D[g, 2*t:2*t+2]; c[L][2:4] = D[g+8, 2*t:2*t+2]

def load_a(tile, row0, col0):
    return ldmatrix(tile, lambda lane: (row0 + ((lane // 8) & 1) * 8 + (lane & 7), col0 + ((lane // 8) >> 1) * 8))

def load_a_trans(tile, row0, col0):
    """load_a's fragment from a tile stored transposed ([k][m])."""
    return ldmatrix(tile, lambda lane: (col0 + ((lane // 8) >> 1) * 8 + (lane & 7), row0 + ((lane // 8) & 1) * 8),
                    trans=True)

def load_b_rows_n(tile, n0, k0):
    return ldmatrix(tile, lambda lane: (n0 + ((lane // 8) >> 1) * 8 + (lane & 7), k0 + ((lane // 8) & 1) * 8))

def load_b_rows_k(tile, k0, n0):
    return ldmatrix(tile, lambda lane: (k0 + ((lane // 8) & 1) * 8 + (lane & 7), n0 + ((lane // 8) >> 1) * 8),
                    trans=True)

def mma_into(acc, column, a, b, half):
    """acc[:, column, :] += A·B, B's registers of `half` (0: the first pair, 1: the second) per lane."""
    c = acc[:, column, :].copy()
    mma(c, a, [b[L][2*half] for L in range(32)], [b[L][2*half+1] for L in range(32)])
    acc[:, column, :] = c

def row_products(a_tile, a_row, b_tile, D, M=1):
    """[m][lane][n][e]: M mma tiles of rows a_row + 16·m, each B fragment feeding the M products of its k step."""
    s = np.zeros((M, 32, 8, 4))
    for k in range(D // 16):
        a = [load_a(a_tile, a_row + 16 * m, k * 16) for m in range(M)]
        for n in range(4):
            b = load_b_rows_n(b_tile, n * 16, k * 16)
            for m in range(M):
                mma_into(s[m], 2*n, a[m], b, 0)
                mma_into(s[m], 2*n+1, a[m], b, 1)
    return s

def accumulate(acc, p, tile, D):
    """acc[m] += p[m] · tile for each of the M mma tiles, each B fragment feeding the M products of its step."""
    for k in range(4):
        a = [[((pm[L][2*k][0], pm[L][2*k][1]), (pm[L][2*k][2], pm[L][2*k][3]),
               (pm[L][2*k+1][0], pm[L][2*k+1][1]), (pm[L][2*k+1][2], pm[L][2*k+1][3])) for L in range(32)]
             for pm in p]
        for n in range(D // 16):
            b = load_b_rows_k(tile, k * 16, n * 16)
            for m in range(len(p)):
                mma_into(acc[m], 2*n, a[m], b, 0)
                mma_into(acc[m], 2*n+1, a[m], b, 1)

class Rows:
    """attention_rows.cuh's SideRows of one sequence (begin 0); positions None: a row's position is its index."""
    def __init__(self, length, positions=None):
        self.length, self.positions = length, positions

    def position(self, index):
        return index if self.positions is None else int(self.positions[index])

def visible_keys(keys, position):
    if keys.positions is None: return min(keys.length, position + 1)
    low, high = 0, keys.length  # first key whose position is past `position`
    while low < high:
        middle = (low + high) // 2
        if keys.positions[middle] <= position: low = middle + 1
        else: high = middle
    return low

def first_seeing_query(queries, position):
    if queries.positions is None: return min(queries.length, position)
    low, high = 0, queries.length
    while low < high:
        middle = (low + high) // 2
        if queries.positions[middle] < position: low = middle + 1
        else: high = middle
    return low

def tile_key_end(queries, first_query, tile, keys):
    last = min(queries.length, first_query + tile) - 1
    return 0 if last < 0 else visible_keys(keys, queries.position(last))

def shared(D, rows=64):
    return np.full((rows, D), np.nan)  # uninitialised: a product that reads it before a copy turns NaN

def copy_tile(tile, x, rows, first_row):
    for r in range(len(tile)):
        tile[r] = x[first_row + r] if first_row + r < rows.length else 0

def copy_key_tile(k_tiles, v_tiles, k, v, keys, tile):
    copy_tile(k_tiles[tile & 1], k, keys, tile * 64); copy_tile(v_tiles[tile & 1], v, keys, tile * 64)

def quad(x, op):
    """The two __shfl_xor_sync steps (lane masks 1, 2) over x[lane][half]."""
    lanes = np.arange(32)
    x = op(x, x[lanes ^ 1])
    return op(x, x[lanes ^ 2])

def store_rows(acc, factor, out, mma_row, rows, D):
    for L in range(32):
        for half in range(2):
            row = mma_row + L // 4 + 8 * half
            if row >= rows.length: continue
            for n in range(D // 8):
                out[row, 8*n + 2*(L % 4)] = acc[L][n][2*half] * factor[L][half]
                out[row, 8*n + 2*(L % 4) + 1] = acc[L][n][2*half+1] * factor[L][half]

def per_row(first_row, f):
    """[warp][lane][half] = f(row) for each thread's rows first_row + warp·16 + lane/4 (+ 8)."""
    return [[[f(first_row + warp * 16 + L // 4 + 8 * half) for half in range(2)] for L in range(32)]
            for warp in range(4)]

def forward(q, k, v, queries, keys, scale, D, M=2):
    """M: 16-row mma tiles per warp, 2 for AttentionKernel::mma (128-row blocks), 1 for mma64 (64-row blocks)."""
    out = np.full((queries.length, D), np.nan); lse = np.full(queries.length, np.nan)
    log2e = 1 / np.log(2)
    FORWARD_TILE = 4 * 16 * M
    for first_query in range(0, queries.length, FORWARD_TILE):  # the grid's blocks; those past the sequence return
        key_tiles = (tile_key_end(queries, first_query, FORWARD_TILE, keys) + 63) // 64
        q_tile = shared(D, FORWARD_TILE); k_tiles = [shared(D), shared(D)]; v_tiles = [shared(D), shared(D)]
        if key_tiles > 0:
            copy_tile(q_tile, q, queries, first_query); copy_key_tile(k_tiles, v_tiles, k, v, keys, 0)
        else: seen["forward tiles seeing no key"] += 1
        warp_row = [first_query + warp * 16 * M for warp in range(4)]
        # [warp][m][lane][half]: this thread's rows warp_row + 16·m + lane/4 (+ 8)
        key_end = [[[[visible_keys(keys, queries.position(query)) if query < queries.length else 0
                      for query in (warp_row[warp] + 16 * m + L // 4, warp_row[warp] + 16 * m + L // 4 + 8)]
                     for L in range(32)] for m in range(M)] for warp in range(4)]
        unmasked_keys = [key_end[warp][0][0][0] for warp in range(4)]  # __shfl_sync from lane 0
        warp_keys = [tile_key_end(queries, warp_row[warp], 16 * M, keys) for warp in range(4)]
        scale_log2 = scale * log2e
        acc = np.zeros((4, M, 32, D // 8, 4))
        row_max = np.full((4, M, 32, 2), -np.inf); row_sum = np.zeros((4, M, 32, 2))
        for tile in range(key_tiles):
            if tile + 1 < key_tiles: copy_key_tile(k_tiles, v_tiles, k, v, keys, tile + 1)
            k_tile = k_tiles[tile & 1]; v_tile = v_tiles[tile & 1]
            first_key = tile * 64
            for warp in range(4):
                if first_key >= warp_keys[warp]:
                    seen["forward tiles a warp skips"] += 1
                    continue
                s = row_products(q_tile, warp_row[warp] - first_query, k_tile, D, M)
                masked = first_key + 64 > unmasked_keys[warp]
                seen["forward tiles unmasked" if not masked else "forward tiles masked"] += 1
                for m in range(M):
                    tmax = row_max[warp][m].copy()
                    for L in range(32):
                        for n in range(8):
                            for e in range(4):
                                key = first_key + n * 8 + 2 * (L % 4) + (e & 1)
                                hidden = masked and key >= key_end[warp][m][L][e >> 1]
                                s[m][L][n][e] = -np.inf if hidden else s[m][L][n][e] * scale_log2
                                tmax[L][e >> 1] = max(tmax[L][e >> 1], s[m][L][n][e])
                    tmax = quad(tmax, np.maximum)
                    shift = np.where(tmax == -np.inf, 0.0, tmax)  # a row that has seen no key yet: exponents from 0
                    rescale = np.exp2(row_max[warp][m] - shift); row_max[warp][m] = tmax; row_sum[warp][m] *= rescale
                    for L in range(32):
                        for n in range(8):
                            for e in range(4):
                                s[m][L][n][e] = np.exp2(s[m][L][n][e] - shift[L][e >> 1])
                                row_sum[warp][m][L][e >> 1] += s[m][L][n][e]
                    for L in range(32):
                        for n in range(D // 8):
                            for e in range(4): acc[warp][m][L][n][e] *= rescale[L][e >> 1]
                accumulate(acc[warp], s, v_tile, D)
        for warp in range(4):
            for m in range(M):
                total = quad(row_sum[warp][m], np.add)
                inverse = [[1 / t if t > 0 else 0 for t in lane] for lane in total]
                store_rows(acc[warp][m], inverse, out, warp_row[warp] + 16 * m, queries, D)
                for L in range(32):
                    if L % 4 == 0:
                        for h in range(2):
                            query = warp_row[warp] + 16 * m + L // 4 + 8 * h
                            if query < queries.length:
                                with np.errstate(divide="ignore"):  # log2(0) = -inf for a row that saw no key
                                    lse[query] = (row_max[warp][m][L][h] + np.log2(total[L][h])) * np.log(2)
    return out, lse

def backward_dq(q, k, v, do, lse, delta, queries, keys, scale, D):
    dq = np.full((queries.length, D), np.nan); log2e = 1 / np.log(2)
    for first_query in range(0, queries.length, 64):
        key_tiles = (tile_key_end(queries, first_query, 64, keys) + 63) // 64
        q_tile = shared(D); do_tile = shared(D); k_tiles = [shared(D), shared(D)]; v_tiles = [shared(D), shared(D)]
        if key_tiles > 0:
            copy_tile(q_tile, q, queries, first_query); copy_tile(do_tile, do, queries, first_query)
            copy_key_tile(k_tiles, v_tiles, k, v, keys, 0)
        else: seen["dq tiles seeing no key"] += 1
        lse_log2 = per_row(first_query, lambda query: lse[query] * log2e if query < queries.length else 0)
        row_delta = per_row(first_query, lambda query: delta[query] if query < queries.length else 0)
        key_end = per_row(first_query, lambda query: visible_keys(keys, queries.position(query))
                          if query < queries.length else 0)
        scale_log2 = scale * log2e
        acc = np.zeros((4, 1, 32, D // 8, 4))
        for tile in range(key_tiles):
            if tile + 1 < key_tiles: copy_key_tile(k_tiles, v_tiles, k, v, keys, tile + 1)
            k_tile = k_tiles[tile & 1]; v_tile = v_tiles[tile & 1]
            first_key = tile * 64
            for warp in range(4):
                s, = row_products(q_tile, warp * 16, k_tile, D); dp, = row_products(do_tile, warp * 16, v_tile, D)
                for L in range(32):
                    for n in range(8):
                        for e in range(4):
                            key = first_key + n * 8 + 2 * (L % 4) + (e & 1); h = e >> 1
                            visible = key < key_end[warp][L][h]
                            p = np.exp2(s[L][n][e] * scale_log2 - lse_log2[warp][L][h]) if visible else 0
                            s[L][n][e] = p * (dp[L][n][e] - row_delta[warp][L][h])
                accumulate(acc[warp], [s], k_tile, D)
        for warp in range(4):
            store_rows(acc[warp][0], np.full((32, 2), scale), dq, first_query + warp * 16, queries, D)
    return dq

def dkdv_block(key_tile, q, k, v, do, lse, delta, queries, keys, scale, D, dk, dv, single_pass=None):
    """One block of dkdv_kernel: dK and dV of key tile `key_tile` into dk, dv. single_pass (dq, its fp32 accumulator
    and the turns) for kSinglePass = true: query tiles aligned to 64 rows, dQ's shares added in turn. A generator that
    yields (query tile, key tile) before each share, the turn it waits for (never without single_pass)."""
    log2e = 1 / np.log(2)
    first_key = key_tile * 64
    query_start = first_seeing_query(queries, keys.position(first_key)) if first_key < keys.length else queries.length
    loop_start = query_start // 64 * 64 if single_pass else query_start
    query_tiles = (queries.length - loop_start + 63) // 64 if query_start < queries.length else 0
    if single_pass and key_tile == 0:
        reached = loop_start if query_tiles > 0 else queries.length
        single_pass[0][:reached] = 0
        if reached: seen["single pass: rows no key tile reaches, zeroed"] += reached
    if first_key >= keys.length: return
    k_tile = shared(D); v_tile = shared(D); q_tiles = [shared(D), shared(D)]; do_tiles = [shared(D), shared(D)]
    lse_rows = np.full((2, 64), np.nan); delta_rows = np.full((2, 64), np.nan); ds_tile = shared(64)

    def fetch(buffer, first_query):
        copy_tile(q_tiles[buffer], q, queries, first_query); copy_tile(do_tiles[buffer], do, queries, first_query)
        for row in range(64):
            query = first_query + row
            lse_rows[buffer][row] = lse[query] * log2e if query < queries.length else 0
            delta_rows[buffer][row] = delta[query] if query < queries.length else 0
    if query_tiles > 0:
        copy_tile(k_tile, k, keys, first_key); copy_tile(v_tile, v, keys, first_key); fetch(0, loop_start)
    else: seen["dkdv tiles seen by no query"] += 1
    if query_start % 64 and query_tiles > 1: seen["dkdv loops from an unaligned query, several tiles"] += 1
    query_begin = per_row(first_key, lambda key: first_seeing_query(queries, keys.position(key))
                          if key < keys.length else queries.length)
    scale_log2 = scale * log2e
    adk = np.zeros((4, 1, 32, D // 8, 4)); adv = np.zeros((4, 1, 32, D // 8, 4))
    for tile in range(query_tiles):
        buffer = tile & 1; first_query = loop_start + tile * 64
        if tile + 1 < query_tiles: fetch(buffer ^ 1, first_query + 64)
        q_tile, do_tile = q_tiles[buffer], do_tiles[buffer]
        lse_tile, delta_tile = lse_rows[buffer], delta_rows[buffer]
        for warp in range(4):
            p, = row_products(k_tile, warp * 16, q_tile, D); dp, = row_products(v_tile, warp * 16, do_tile, D)
            for L in range(32):
                for n in range(8):
                    for e in range(4):
                        col = n * 8 + 2 * (L % 4) + (e & 1); query = first_query + col
                        visible = query >= query_begin[warp][L][e >> 1] and query < queries.length
                        pv = np.exp2(p[L][n][e] * scale_log2 - lse_tile[col]) if visible else 0
                        p[L][n][e] = pv
                        dp[L][n][e] = pv * (dp[L][n][e] - delta_tile[col])
                        if single_pass: ds_tile[warp * 16 + L // 4 + 8 * (e >> 1), col] = dp[L][n][e]  # dSᵀ
            accumulate(adv[warp], [p], do_tile, D); accumulate(adk[warp], [dp], q_tile, D)
        if single_pass:
            dq, accumulator, turns = single_pass
            yield first_query // 64, key_tile  # thread 0 spins until the turn is this key tile's
            reaching = (tile_key_end(queries, first_query, 64, keys) + 63) // 64
            first, last = key_tile == 0, key_tile + 1 == reaching
            if first and last: seen["single pass: query tiles one key tile reaches"] += 1
            elif not first and not last: seen["single pass: shares between the first and the last"] += 1
            add_dq_share(ds_tile, k_tile, accumulator, dq, queries, first_query, first, last, scale, D)
            turns[first_query // 64] = key_tile + 1  # store_release
    for warp in range(4):
        store_rows(adk[warp][0], np.full((32, 2), scale), dk, first_key + warp * 16, keys, D)
        store_rows(adv[warp][0], np.full((32, 2), 1.0), dv, first_key + warp * 16, keys, D)

def backward_dkdv(q, k, v, do, lse, delta, queries, keys, scale, D):
    dk = np.full((keys.length, D), np.nan); dv = np.full((keys.length, D), np.nan)
    for key_tile in range((keys.length + 63) // 64):
        for _ in dkdv_block(key_tile, q, k, v, do, lse, delta, queries, keys, scale, D, dk, dv): pass
    return dk, dv

def add_dq_share(ds_tile, k_tile, accumulator, dq, queries, first_query, first, last, scale, D):
    """The single pass's dS·K for one query tile, 16 rows a warp, 16 columns at a time (kDqChunk), in turn."""
    for warp in range(4):
        for chunk in range(0, D, 16):
            share = np.zeros((32, 2, 4))
            for k in range(4):
                a = load_a_trans(ds_tile, warp * 16, k * 16)
                b = load_b_rows_k(k_tile, k * 16, chunk)
                mma_into(share, 0, a, b, 0); mma_into(share, 1, a, b, 1)
            for L in range(32):
                for half in range(2):
                    row = first_query + warp * 16 + L // 4 + 8 * half
                    if row >= queries.length: continue
                    for n in range(2):
                        for e in range(2):
                            col = chunk + 8 * n + 2 * (L % 4) + e
                            total = share[L][n][2 * half + e] + (0 if first else accumulator[row, col])
                            if last: dq[row, col] = total * scale
                            else: accumulator[row, col] = total

def backward_single_pass(q, k, v, do, lse, delta, queries, keys, scale, D, resident, rng):
    """dkdv_kernel<kSinglePass = true>: dQ, dK and dV in one pass, its blocks run by run_grid as a GPU may."""
    dq = np.full((queries.length, D), np.nan); dk = np.full((keys.length, D), np.nan)
    dv = np.full((keys.length, D), np.nan); accumulator = np.full((queries.length, D), np.nan)
    turns = [0] * ((queries.length + 63) // 64)  # of the one sequence and head; cudaMemsetAsync zeroes them
    run_grid([dkdv_block(j, q, k, v, do, lse, delta, queries, keys, scale, D, dk, dv, (dq, accumulator, turns))
              for j in range(max(1, (keys.length + 63) // 64))], turns, resident, rng)
    return dq, dk, dv

def run_grid(blocks, turns, resident, rng):
    """Runs the blocks as a GPU may: dispatched in index order, at most `resident` at once, the running ones advanced
    in an order rng picks (in index order if None, the latest ready first if "latest"); a block waiting for its turn
    advances once turns[tile] says so.
    Fails if every running block waits (a deadlock)."""
    pending = list(range(len(blocks))); waiting = {}  # running block -> (query tile, key tile) it waits for, or None
    while pending or waiting:
        while pending and len(waiting) < resident: waiting[pending.pop(0)] = None
        ready = [i for i, turn in waiting.items() if turn is None or turns[turn[0]] == turn[1]]
        assert ready, "single pass deadlock: every running block waits for its turn"
        i = ready[0] if rng is None else ready[-1] if rng == "latest" else ready[rng.integers(len(ready))]
        try:
            waiting[i] = next(blocks[i])
            if turns[waiting[i][0]] != waiting[i][1]: seen["single pass: a key tile waits for its turn"] += 1
        except StopIteration:
            del waiting[i]

# The single pass under four schedules: every block resident, picked at random or the latest ready first (the
# schedule most eager to run a key tile before the one it waits on); one at a time in index order; two at random.
SCHEDULES = [(1 << 30, np.random.default_rng(7)), (1 << 30, "latest"), (1, None), (2, np.random.default_rng(8))]

def single_pass_all_schedules(*args):
    """backward_single_pass under each schedule; asserts they give the same bits (the sums' order is fixed)."""
    results = [backward_single_pass(*args, resident, rng) for resident, rng in SCHEDULES]
    for other in results[1:]:
        assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(results[0], other)), \
            "the single pass differs between schedules"
    return results[0]

def dense(q, k, v, do, scale, query_positions=None, key_positions=None):
    """Causal attention and its gradients: over the whole sequence, or by row positions (every query seeing a key)."""
    if query_positions is None: query_positions = key_positions = np.arange(q.shape[0])
    s = q @ k.T * scale
    s[key_positions[None, :] > query_positions[:, None]] = -np.inf
    lse = np.log(np.exp(s - s.max(1, keepdims=True)).sum(1)) + s.max(1)
    p = np.exp(s - lse[:, None])
    out = p @ v
    delta = (do * out).sum(1)
    ds = p * (do @ v.T - delta[:, None])
    return out, lse, delta, ds @ k * scale, ds.T @ q * scale, p.T @ do

def merge(out, lse, block_out, block_lse):
    """attention_merge, row by row."""
    for row in range(len(lse)):
        held, added = lse[row], block_lse[row]
        if added == -np.inf: continue  # the block holds no key the row sees
        top = max(held, added)
        merged = top + np.log(np.exp(held - top) + np.exp(added - top))
        out[row] = out[row] * np.exp(held - merged) + block_out[row] * np.exp(added - merged); lse[row] = merged

def blind_rows(block_out, block_lse, query_positions, key_positions):
    """Asserts that the queries seeing none of the block's keys, and only they, get exactly out 0 and lse -inf."""
    blind = np.array([not any(kp <= qp for kp in key_positions) for qp in query_positions], bool)
    assert (block_out[blind] == 0).all() and (block_lse[blind] == -np.inf).all(), "a blind row is not 0, -inf"
    assert np.isfinite(block_lse[~blind]).all(), "a row that sees a key has lse -inf"
    seen["blind query rows"] += int(blind.sum())

def errors_line(name, errors):
    print(name + ": " + ", ".join(f"{key} {error:.1e}" for key, error in errors.items()))
    return list(errors.values())

rng = np.random.default_rng(1)
errors = []
for length, D in [(150, 64), (65, 128), (7, 64)]:
    q, k, v, do = (rng.uniform(-1, 1, (length, D)) for _ in range(4))
    scale = 1 / np.sqrt(D)
    rows = Rows(length)  # null positions: self-attention
    ro, rl, delta, rdq, rdk, rdv = dense(q, k, v, do, scale)
    out, lse = forward(q, k, v, rows, rows, scale, D)
    out64, lse64 = forward(q, k, v, rows, rows, scale, D, M=1)
    dq = backward_dq(q, k, v, do, rl, delta, rows, rows, scale, D)
    dk, dv = backward_dkdv(q, k, v, do, rl, delta, rows, rows, scale, D)
    dq1, dk1, dv1 = single_pass_all_schedules(q, k, v, do, rl, delta, rows, rows, scale, D)
    errors += errors_line(f"self-attention, length {length}, head_dim {D}", {
        "out": np.abs(out - ro).max(), "lse": np.abs(lse - rl).max(), "out (mma64)": np.abs(out64 - ro).max(),
        "lse (mma64)": np.abs(lse64 - rl).max(), "dq": np.abs(dq - rdq).max(), "dk": np.abs(dk - rdk).max(),
        "dv": np.abs(dv - rdv).max(), "single pass dq": np.abs(dq1 - rdq).max(),
        "single pass dk": np.abs(dk1 - rdk).max(), "single pass dv": np.abs(dv1 - rdv).max()})

# Ring attention: rank r holds chunks r and 2R-1-r of 2R; its queries meet every rank's keys, one block per step.
# M: the forward's mma tiles per warp (1 for mma64's 64-row blocks).
for length, D, R, M in [(300, 64, 2, 2), (150, 64, 2, 2), (65, 128, 2, 2), (100, 64, 3, 2), (300, 64, 3, 1),
                        (5, 64, 4, 2)]:
    q, k, v, do = (rng.uniform(-1, 1, (length, D)) for _ in range(4))
    scale = 1 / np.sqrt(D)
    ro, rl, delta, rdq, rdk, rdv = dense(q, k, v, do, scale)
    bounds = [length * c // (2 * R) for c in range(2 * R + 1)]
    blocks = [np.r_[bounds[r]:bounds[r + 1], bounds[2 * R - 1 - r]:bounds[2 * R - r]] for r in range(R)]
    out = np.full((length, D), np.nan); lse = np.full(length, np.nan)
    dq = np.zeros((length, D)); dk = np.zeros((length, D)); dv = np.zeros((length, D))
    dq1 = np.zeros((length, D)); dk1 = np.zeros((length, D)); dv1 = np.zeros((length, D))  # the single pass's
    for a in range(R):
        qa = blocks[a]; queries = Rows(len(qa), qa)
        merged = np.zeros((len(qa), D)); merged_lse = np.full(len(qa), -np.inf)
        for step in range(R):  # the order ring_forward meets the blocks in
            kb = blocks[(a - step) % R]; keys = Rows(len(kb), kb)
            block_out, block_lse = forward(q[qa], k[kb], v[kb], queries, keys, scale, D, M)
            blind_rows(block_out, block_lse, qa, kb)
            merge(merged, merged_lse, block_out, block_lse)
            dq[qa] += backward_dq(q[qa], k[kb], v[kb], do[qa], rl[qa], delta[qa], queries, keys, scale, D)
            block_dk, block_dv = backward_dkdv(q[qa], k[kb], v[kb], do[qa], rl[qa], delta[qa], queries, keys, scale, D)
            dk[kb] += block_dk; dv[kb] += block_dv
            block_dq, block_dk, block_dv = single_pass_all_schedules(q[qa], k[kb], v[kb], do[qa], rl[qa], delta[qa],
                                                                     queries, keys, scale, D)
            dq1[qa] += block_dq; dk1[kb] += block_dk; dv1[kb] += block_dv
        out[qa] = merged; lse[qa] = merged_lse
    kernel = "mma" if M == 2 else "mma64"
    sizes = [len(b) for b in blocks]
    errors += errors_line(f"{kernel} ring of {R}, length {length}, head_dim {D}, blocks of {sizes}", {
        "out": np.abs(out - ro).max(), "lse": np.abs(lse - rl).max(), "dq": np.abs(dq - rdq).max(),
        "dk": np.abs(dk - rdk).max(), "dv": np.abs(dv - rdv).max(), "single pass dq": np.abs(dq1 - rdq).max(),
        "single pass dk": np.abs(dk1 - rdk).max(), "single pass dv": np.abs(dv1 - rdv).max()})

# A block step whose keys all follow its queries (chunk 0's queries, chunk 1's keys of 4): every loop has no tile.
length, D = 300, 64
q, k, v, do = (rng.uniform(-1, 1, (length, D)) for _ in range(4))
scale = 1 / np.sqrt(D)
ro, rl, delta, *_ = dense(q, k, v, do, scale)
qa, kb = np.arange(0, 75), np.arange(75, 150)
queries, keys = Rows(len(qa), qa), Rows(len(kb), kb)
out, lse = forward(q[qa], k[kb], v[kb], queries, keys, scale, D)
dq = backward_dq(q[qa], k[kb], v[kb], do[qa], rl[qa], delta[qa], queries, keys, scale, D)
dk, dv = backward_dkdv(q[qa], k[kb], v[kb], do[qa], rl[qa], delta[qa], queries, keys, scale, D)
assert (out == 0).all() and (lse == -np.inf).all() and (dq == 0).all() and (dk == 0).all() and (dv == 0).all(), \
    "a block step whose keys follow every query does not give zeros and lse -inf"
dq, dk, dv = single_pass_all_schedules(q[qa], k[kb], v[kb], do[qa], rl[qa], delta[qa], queries, keys, scale, D)
assert (dq == 0).all() and (dk == 0).all() and (dv == 0).all(), "the single pass gives no zeros where no key is seen"
print("keys after every query: out 0, lse -inf, dq dk dv 0")

# The single pass where a key tile's first query is not on a query tile's edge: 200 queries at positions 10..209, 100
# keys at 0, 2, .., 198; key tile 1 (positions 128..) is first seen by query 118, inside query tile 1.
D = 64
q, k, v, do = (rng.uniform(-1, 1, (n, D)) for n in (200, 100, 100, 200))
query_positions, key_positions = np.arange(10, 210), np.arange(0, 200, 2)
scale = 1 / np.sqrt(D)
_, rl, delta, rdq, rdk, rdv = dense(q, k, v, do, scale, query_positions, key_positions)
dq, dk, dv = single_pass_all_schedules(q, k, v, do, rl, delta, Rows(200, query_positions), Rows(100, key_positions),
                                       scale, D)
errors += errors_line("single pass, a key tile first seen inside a query tile", {
    "dq": np.abs(dq - rdq).max(), "dk": np.abs(dk - rdk).max(), "dv": np.abs(dv - rdv).max()})

print("paths: " + ", ".join(f"{name} {count}" for name, count in sorted(seen.items())))
missing = {"forward tiles unmasked", "forward tiles masked", "forward tiles seeing no key",
           "forward tiles a warp skips", "dq tiles seeing no key", "dkdv tiles seen by no query",
           "dkdv loops from an unaligned query, several tiles", "blind query rows",
           "single pass: rows no key tile reaches, zeroed", "single pass: query tiles one key tile reaches",
           "single pass: shares between the first and the last",
           "single pass: a key tile waits for its turn"} - set(seen)
if missing: print("paths never taken: " + ", ".join(sorted(missing)))
# float64 sums in another order: anything past 1e-12 (or NaN: a row never stored) is an indexing error, not rounding.
sys.exit(0 if all(error <= 1e-12 for error in errors) and not missing else 1)
