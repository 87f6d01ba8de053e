/* aie_emu.h: the AI Engine (first generation) vector intrinsics tilewright's aie dialect emits, with
   their documented semantics (AMD UG1078 "Full Lane Addressing Scheme", UG1079 "MAC on 16x16 bits"),
   for a host C compiler, so that emitted kernels run bit-exact on x86.

   Registers are plain structs; accumulator lanes keep exactly 80 (32-bit MACs) or 48 (16-bit MACs)
   bits, wrapping as the hardware's would; srs shifts (rounding per the current mode), then saturates
   to the output lane. A load or store must be aligned to 128 bits (Vyasa II-B): the core has no
   unaligned access, so a misaligned address is counted as a fault (the runner reports it) instead
   of being served.
   Every load, store, vector MAC and srs is counted, for the cycle model's cross-check. */
#ifndef TILEWRIGHT_AIE_EMU_H
#define TILEWRIGHT_AIE_EMU_H

#include <stdint.h>
#include <string.h>

/* the AI Engine compiler's loop pragmas: hints for its software pipeliner, nothing here */
#define chess_prepare_for_pipelining
#define chess_loop_range(...)

typedef struct { int32_t e[4]; } v4int32;
typedef struct { int32_t e[8]; } v8int32;
typedef struct { int32_t e[16]; } v16int32;
typedef struct { int32_t e[32]; } v32int32;
typedef struct { int16_t e[8]; } v8int16;
typedef struct { int16_t e[16]; } v16int16;
typedef struct { int16_t e[32]; } v32int16;
typedef struct { int16_t e[64]; } v64int16;
typedef struct { __int128 e[8]; } v8acc80;
typedef struct { int64_t e[16]; } v16acc48;

/* counters[0..5]: vector loads, vector stores, vector MACs, srs, misaligned accesses, lane wraps */
static long long aie_counters[6];
enum { AIE_LOADS, AIE_STORES, AIE_MACS, AIE_SRS, AIE_MISALIGNED, AIE_WRAPS };

enum { rnd_floor = 0, rnd_pos_inf = 1 };
static int aie_rnd = rnd_floor;
static inline void set_rnd(int mode) { aie_rnd = mode; }

static inline void aie_check_align(const void *p, unsigned bytes) {
    if ((uintptr_t)p % bytes) aie_counters[AIE_MISALIGNED]++;
}

#define AIE_LOAD(T, ET)                                                            \
    static inline T load_##T(const ET *p) {                                        \
        T v; aie_check_align(p, 16); aie_counters[AIE_LOADS]++;                        \
        memcpy(v.e, p, sizeof v.e); return v;                                      \
    }                                                                              \
    static inline void store_##T(ET *p, T v) {                                     \
        aie_check_align(p, 16); aie_counters[AIE_STORES]++;                            \
        memcpy(p, v.e, sizeof v.e);                                                \
    }
AIE_LOAD(v4int32, int32_t)
AIE_LOAD(v8int32, int32_t)
AIE_LOAD(v8int16, int16_t)
AIE_LOAD(v16int16, int16_t)

static inline v16int32 null_v16int32(void) { v16int32 v; memset(&v, 0, sizeof v); return v; }
static inline v32int32 null_v32int32(void) { v32int32 v; memset(&v, 0, sizeof v); return v; }
static inline v32int16 null_v32int16(void) { v32int16 v; memset(&v, 0, sizeof v); return v; }
static inline v64int16 null_v64int16(void) { v64int16 v; memset(&v, 0, sizeof v); return v; }
static inline v8acc80 null_v8acc80(void) { v8acc80 v; memset(&v, 0, sizeof v); return v; }
static inline v16acc48 null_v16acc48(void) { v16acc48 v; memset(&v, 0, sizeof v); return v; }

/* upd_v / upd_w: replace the idx-th 128- / 256-bit part of a wider register (a load into a
   sub-register on the core) */
#define AIE_UPD(NAME, T, PT, N)                                                    \
    static inline T NAME##_##T(T v, int idx, PT p) {                               \
        memcpy(&v.e[idx * N], p.e, sizeof p.e); return v;                          \
    }
AIE_UPD(upd_v, v16int32, v4int32, 4)
AIE_UPD(upd_v, v32int32, v4int32, 4)
AIE_UPD(upd_w, v16int32, v8int32, 8)
AIE_UPD(upd_w, v32int32, v8int32, 8)
AIE_UPD(upd_v, v32int16, v8int16, 8)
AIE_UPD(upd_v, v64int16, v8int16, 8)
AIE_UPD(upd_w, v32int16, v16int16, 16)
AIE_UPD(upd_w, v64int16, v16int16, 16)
#define upd_v(v, i, p) _Generic((v), v16int32: upd_v_v16int32, v32int32: upd_v_v32int32, \
                                     v32int16: upd_v_v32int16, v64int16: upd_v_v64int16)(v, i, p)
#define upd_w(v, i, p) _Generic((v), v16int32: upd_w_v16int32, v32int32: upd_w_v32int32, \
                                     v32int16: upd_w_v32int16, v64int16: upd_w_v64int16)(v, i, p)

static inline __int128 aie_wrap80(__int128 x) {
    __int128 w = (__int128)((unsigned __int128)x << 48) >> 48;
    if (w != x) aie_counters[AIE_WRAPS]++;
    return w;
}
static inline int64_t aie_wrap48(int64_t x) {
    int64_t w = (int64_t)((uint64_t)x << 16) >> 16;
    if (w != x) aie_counters[AIE_WRAPS]++;
    return w;
}
#define AIE_NIB(word, k) ((int)(((word) >> (4 * (k))) & 0xF))

/* 32-bit real: 8 lanes x 1 column. Lane i multiplies x[xstart + xoffsets.i] by z[zstart + zoffsets.i]
   (4-bit offsets, 32-bit granularity, indices modulo the buffer's length). */
static inline v8acc80 aie_lmac8(v8acc80 acc, const int32_t *x, int nx, int xstart, unsigned xoffsets,
                                v8int32 z, int zstart, unsigned zoffsets) {
    aie_counters[AIE_MACS]++;
    for (int i = 0; i < 8; i++) {
        int xi = ((xstart + AIE_NIB(xoffsets, i)) % nx + nx) % nx;
        int zi = ((zstart + AIE_NIB(zoffsets, i)) % 8 + 8) % 8;
        acc.e[i] = aie_wrap80(acc.e[i] + (__int128)((int64_t)x[xi] * z.e[zi]));
    }
    return acc;
}
#define lmac8(acc, xb, xs, xo, zb, zs, zo) \
    aie_lmac8((acc), (xb).e, (int)(sizeof (xb).e / 4), (xs), (xo), (zb), (zs), (zo))
#define lmul8(xb, xs, xo, zb, zs, zo) lmac8(null_v8acc80(), xb, xs, xo, zb, zs, zo)

/* 16-bit real: 16 lanes x 2 columns. The x permute works on 32-bit words: for the lane pair
   (2k, 2k+1), offset nibble a = xoffsets nibble 2k and b = nibble 2k+1 (xoffsets_hi for k >= 4); the
   even lane takes the word at xstart/2 + a, the odd lane the word at xstart/2 + a + b + 1, giving
   the four 16-bit values f = (even lo, even hi, odd lo, odd hi). xsquare's four nibbles (lowest
   first, each 0..3) then pick, from f, the even lane's columns 0 and 1 and the odd lane's columns 0 and 1.
   z has 16-bit granularity: lane i, column c takes z[zstart + zoffsets.i + c * zstep]. */
static inline v16acc48 aie_mac16(v16acc48 acc, const int16_t *x, int nx, int xstart, unsigned xoffsets,
                                 unsigned xoffsets_hi, unsigned xsquare, v16int16 z, int zstart,
                                 unsigned zoffsets, unsigned zoffsets_hi, int zstep) {
    aie_counters[AIE_MACS]++;
    int nw = nx / 2;
    for (int k = 0; k < 8; k++) {
        unsigned offs = k < 4 ? xoffsets : xoffsets_hi;
        int a = AIE_NIB(offs, 2 * (k % 4)), b = AIE_NIB(offs, 2 * (k % 4) + 1);
        int we = ((xstart / 2 + a) % nw + nw) % nw, wo = ((xstart / 2 + a + b + 1) % nw + nw) % nw;
        int16_t f[4] = {x[2 * we], x[2 * we + 1], x[2 * wo], x[2 * wo + 1]};
        for (int half = 0; half < 2; half++) {
            int lane = 2 * k + half;
            unsigned zo = lane < 8 ? zoffsets : zoffsets_hi;
            int64_t sum = 0;
            for (int c = 0; c < 2; c++) {
                int16_t xv = f[(xsquare >> (4 * (2 * half + c))) & 3];
                int zi = ((zstart + AIE_NIB(zo, lane % 8) + c * zstep) % 16 + 16) % 16;
                sum += (int64_t)xv * z.e[zi];
            }
            acc.e[lane] = aie_wrap48(acc.e[lane] + sum);
        }
    }
    return acc;
}
#define mac16(acc, xb, xs, xo, xoh, xsq, zb, zs, zo, zoh, zst) \
    aie_mac16((acc), (xb).e, (int)(sizeof (xb).e / 2), (xs), (xo), (xoh), (xsq), (zb), (zs), (zo), (zoh), (zst))
#define mul16(xb, xs, xo, xoh, xsq, zb, zs, zo, zoh, zst) \
    mac16(null_v16acc48(), xb, xs, xo, xoh, xsq, zb, zs, zo, zoh, zst)

static inline __int128 aie_shift_round(__int128 v, int shift) {
    if (shift <= 0) return v;
    if (aie_rnd == rnd_pos_inf) v += (__int128)1 << (shift - 1);
    return v >> shift;
}
/* srs: each lane shifted (rounding per the mode), then saturated to the output lane's type */
#define AIE_SRS(NAME, ACC, OUT, N, ET, LO, HI)                                     \
    static inline OUT NAME(ACC acc, int shift) {                                   \
        OUT r; aie_counters[AIE_SRS]++;                                            \
        for (int i = 0; i < N; i++) {                                              \
            __int128 v = aie_shift_round(acc.e[i], shift);                         \
            r.e[i] = v > HI ? HI : v < LO ? LO : (ET)v;                            \
        }                                                                          \
        return r;                                                                  \
    }
AIE_SRS(aie_srs80, v8acc80, v8int32, 8, int32_t, INT32_MIN, INT32_MAX)
AIE_SRS(aie_srs48, v16acc48, v16int16, 16, int16_t, INT16_MIN, INT16_MAX)
#define srs(acc, shift) _Generic((acc), v8acc80: aie_srs80, v16acc48: aie_srs48)(acc, shift)

void aie_read_counters(long long *out) { memcpy(out, aie_counters, sizeof aie_counters); }
void aie_reset_counters(void) { memset(aie_counters, 0, sizeof aie_counters); }

#endif
