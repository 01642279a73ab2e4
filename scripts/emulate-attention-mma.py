#!/usr/bin/env python3
"""Emulates attention_mma.cu's warp-level algorithm lane by lane with the PTX ISA's semantics of ldmatrix (.trans)
and mma.m16n8k16 (which lane holds which element of A, B and C), in float64, and compares forward, dQ, dK and dV
with dense attention: a check of the kernels' index math (operand addresses, accumulator-to-operand packing, causal
and length masks, tile loops, online softmax) made without a GPU. It mirrors the kernels' code function by function;
it does not model cp.async, synchronisation or several sequences in one batch. Prints the largest errors (~1e-15)
and exits 1 past 1e-12."""
import sys

import numpy as np

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

def row_products(a_tile, a_row, b_tile, D):
    s = np.zeros((32, 8, 4))
    for k in range(D // 16):
        a = load_a(a_tile, a_row, k * 16)
        for n in range(4):
            b = load_b_rows_n(b_tile, n * 16, k * 16)
            mma_into(s, 2*n, a, b, 0)
            mma_into(s, 2*n+1, a, b, 1)
    return s

def accumulate(acc, p, tile, D):
    for k in range(4):
        a = [((p[L][2*k][0], p[L][2*k][1]), (p[L][2*k][2], p[L][2*k][3]),
              (p[L][2*k+1][0], p[L][2*k+1][1]), (p[L][2*k+1][2], p[L][2*k+1][3])) for L in range(32)]
        for n in range(D // 16):
            b = load_b_rows_k(tile, k * 16, n * 16)
            mma_into(acc, 2*n, a, b, 0)
            mma_into(acc, 2*n+1, a, b, 1)

def tile_of(x, first, length):
    t = np.zeros((64, x.shape[1]))
    for r in range(64):
        if first + r < length: t[r] = x[first + r]
    return t

def store_rows(acc, factor, out, first_row, warp, length, D):
    for L in range(32):
        for half in range(2):
            row = first_row + warp * 16 + L // 4 + 8 * half
            if row >= length: continue
            for n in range(D // 8):
                out[row, 8*n + 2*(L % 4)] = acc[L][n][2*half] * factor[L][half]
                out[row, 8*n + 2*(L % 4) + 1] = acc[L][n][2*half+1] * factor[L][half]

def forward(q, k, v, scale, D):
    length = q.shape[0]
    out = np.zeros_like(q); lse = np.zeros(length)
    log2e = 1 / np.log(2)
    for first_query in range(0, length, 64):
        q_tile = tile_of(q, first_query, length)
        key_tiles = (min(length, first_query + 64) + 63) // 64
        for warp in range(4):
            acc = np.zeros((32, D // 8, 4)); row_max = np.full((32, 2), -np.inf); row_sum = np.zeros((32, 2))
            for tile in range(key_tiles):
                k_tile = tile_of(k, tile * 64, length); v_tile = tile_of(v, tile * 64, length)
                s = row_products(q_tile, warp * 16, k_tile, D)
                first_key = tile * 64; diagonal = first_key + 64 > first_query
                tmax = row_max.copy()
                for L in range(32):
                    q0 = first_query + warp * 16 + L // 4
                    for n in range(8):
                        for e in range(4):
                            key = first_key + n * 8 + 2 * (L % 4) + (e & 1); query = q0 + 8 * (e >> 1)
                            s[L][n][e] = -np.inf if diagonal and key > query else s[L][n][e] * scale * log2e
                            tmax[L][e >> 1] = max(tmax[L][e >> 1], s[L][n][e])
                # the quad's shuffles: the 4 lanes of a row group share its maximum
                red = np.array([[max(tmax[4*(L//4)+i][h] for i in range(4)) for h in range(2)] for L in range(32)])
                rescale = np.exp2(row_max - red); row_max = red; row_sum *= rescale
                for L in range(32):
                    for n in range(8):
                        for e in range(4):
                            s[L][n][e] = np.exp2(s[L][n][e] - row_max[L][e >> 1]); row_sum[L][e >> 1] += s[L][n][e]
                for L in range(32):
                    for n in range(D // 8):
                        for e in range(4): acc[L][n][e] *= rescale[L][e >> 1]
                accumulate(acc, s, v_tile, D)
            total = np.array([[sum(row_sum[4*(L//4)+i][h] for i in range(4)) for h in range(2)] for L in range(32)])
            store_rows(acc, 1 / total, out, first_query, warp, length, D)
            for L in range(32):
                if L % 4 == 0:
                    for h in range(2):
                        query = first_query + warp * 16 + L // 4 + 8 * h
                        if query < length: lse[query] = (row_max[L][h] + np.log2(total[L][h])) * np.log(2)
    return out, lse

def reference(q, k, v, scale):
    length = q.shape[0]
    s = q @ k.T * scale
    s[np.triu(np.ones((length, length), bool), 1)] = -np.inf
    lse = np.log(np.exp(s - s.max(1, keepdims=True)).sum(1)) + s.max(1)
    p = np.exp(s - lse[:, None])
    return p @ v, lse, p

def backward_dq(q, k, v, do, lse, delta, scale, D):
    length = q.shape[0]; dq = np.zeros_like(q); log2e = 1 / np.log(2)
    for first_query in range(0, length, 64):
        q_tile = tile_of(q, first_query, length); do_tile = tile_of(do, first_query, length)
        key_tiles = (min(length, first_query + 64) + 63) // 64
        for warp in range(4):
            acc = np.zeros((32, D // 8, 4))
            for tile in range(key_tiles):
                k_tile = tile_of(k, tile * 64, length); v_tile = tile_of(v, tile * 64, length)
                s = row_products(q_tile, warp * 16, k_tile, D); dp = row_products(do_tile, warp * 16, v_tile, D)
                for L in range(32):
                    q0 = first_query + warp * 16 + L // 4
                    for n in range(8):
                        for e in range(4):
                            key = tile * 64 + n * 8 + 2 * (L % 4) + (e & 1); query = q0 + 8 * (e >> 1)
                            if key <= query < length:
                                p = np.exp2(s[L][n][e] * scale * log2e - lse[query] * log2e)
                                s[L][n][e] = p * (dp[L][n][e] - delta[query])
                            else: s[L][n][e] = 0
                accumulate(acc, s, k_tile, D)
            store_rows(acc, np.full((32, 2), scale), dq, first_query, warp, length, D)
    return dq

def backward_dkdv(q, k, v, do, lse, delta, scale, D):
    length = q.shape[0]; dk = np.zeros_like(q); dv = np.zeros_like(q); log2e = 1 / np.log(2)
    for first_key in range(0, length, 64):
        k_tile = tile_of(k, first_key, length); v_tile = tile_of(v, first_key, length)
        query_tiles = (length - first_key + 63) // 64
        for warp in range(4):
            adk = np.zeros((32, D // 8, 4)); adv = np.zeros((32, D // 8, 4))
            for tile in range(query_tiles):
                first_query = first_key + tile * 64
                q_tile = tile_of(q, first_query, length); do_tile = tile_of(do, first_query, length)
                p = row_products(k_tile, warp * 16, q_tile, D); dp = row_products(v_tile, warp * 16, do_tile, D)
                for L in range(32):
                    k0 = first_key + warp * 16 + L // 4
                    for n in range(8):
                        for e in range(4):
                            col = n * 8 + 2 * (L % 4) + (e & 1); query = first_query + col; key = k0 + 8 * (e >> 1)
                            if key <= query < length:
                                pv = np.exp2(p[L][n][e] * scale * log2e - lse[query] * log2e)
                            else: pv = 0
                            p[L][n][e] = pv
                            dp[L][n][e] = pv * (dp[L][n][e] - (delta[query] if query < length else 0))
                accumulate(adv, p, do_tile, D); accumulate(adk, dp, q_tile, D)
            store_rows(adk, np.full((32, 2), scale), dk, first_key, warp, length, D)
            store_rows(adv, np.full((32, 2), 1.0), dv, first_key, warp, length, D)
    return dk, dv

rng = np.random.default_rng(1)
worst = 0.0
for length, D in [(150, 64), (65, 128), (7, 64)]:
    q, k, v, do = (rng.uniform(-1, 1, (length, D)) for _ in range(4))
    scale = 1 / np.sqrt(D)
    out, lse = forward(q, k, v, scale, D)
    ro, rl, p = reference(q, k, v, scale)
    delta = (do * ro).sum(1)
    dp = do @ v.T
    ds = p * (dp - delta[:, None])
    dq = backward_dq(q, k, v, do, rl, delta, scale, D)
    dk, dv = backward_dkdv(q, k, v, do, rl, delta, scale, D)
    errors = {"out": np.abs(out - ro).max(), "lse": np.abs(lse - rl).max(), "dq": np.abs(dq - ds @ k * scale).max(),
              "dk": np.abs(dk - ds.T @ q * scale).max(), "dv": np.abs(dv - p.T @ do).max()}
    print(f"length {length}, head_dim {D}: " + ", ".join(f"{name} {error:.1e}" for name, error in errors.items()))
    worst = max(worst, *errors.values())
# float64 sums in another order: anything past 1e-12 is an indexing error, not rounding.
sys.exit(0 if worst <= 1e-12 else 1)
