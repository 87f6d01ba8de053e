/* Core of tilewright's simulator for the VTA-like accelerator (tilewright/runtime/vta_sim.py
 * compiles and calls it). It decodes 128-bit instructions with a field table the caller builds
 * from tilewright/codegen/vta_isa.py (no bit position is written here), executes them on
 * on-chip buffers and a caller-owned DRAM array, and either
 *   - runs them in program order, charging each instruction's cost serially (functional), or
 *   - schedules the load, compute and store modules event by event with their dependence-token
 *     FIFOs and command queues, and checks with vector clocks that every pair of accesses to an
 *     SRAM element from two modules is ordered by tokens (checked).
 * Every index is checked before it is used; an error returns a kind code, the instruction and
 * a message. Build with -fwrapv: int32 accumulation wraps like the hardware's adders. */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The caller passes arrays in these orders (vta_sim.py: FIELDS, CONFIG, STATS). */
enum { F_OPCODE, F_POP_PREV, F_POP_NEXT, F_PUSH_PREV, F_PUSH_NEXT, F_MEM, F_SRAM_BASE, F_DRAM_BASE, F_Y_SIZE,
       F_X_SIZE, F_X_STRIDE, F_Y_PAD0, F_Y_PAD1, F_X_PAD0, F_X_PAD1, F_RESET, F_UOP_BGN, F_UOP_END, F_ITER_OUT,
       F_ITER_IN, F_DST_OUT, F_DST_IN, F_SRC_OUT, F_SRC_IN, F_WGT_OUT, F_WGT_IN, F_OP, F_USE_IMM, F_IMM, NFIELDS };
enum { C_BATCH, C_BLOCK_IN, C_BLOCK_OUT, C_UOP_DEPTH, C_INP_DEPTH, C_WGT_DEPTH, C_ACC_DEPTH, C_INP_BYTES,
       C_WGT_BYTES, C_ACC_BYTES, C_OUT_BYTES, C_BUS_BYTES, C_GEMM_II, C_GEMM_SETUP, C_ALU_II, C_ALU_IMM_II,
       C_ALU_SETUP, C_DMA_SETUP, C_DEP_DEPTH, C_CMD_DEPTH, C_UOP_DST_BITS, C_UOP_SRC_BITS, C_UOP_WGT_BITS, NCONFIG };
enum { S_CYCLES, S_GEMM_CYCLES, S_ALU_CYCLES, S_LOAD_BUSY, S_COMPUTE_BUSY, S_STORE_BUSY, S_LOAD_BYTES /* +mem */,
       S_STORE_BYTES = S_LOAD_BYTES + 4, S_GEMM_UOPS, S_GEMM_RESET_UOPS, S_ALU_UOPS, S_PAD_ELEMS,
       S_INSNS /* +module */, NSTATS = S_INSNS + 3 };
enum { K_OK, K_BOUNDS, K_DEADLOCK, K_RACE, K_UNMATCHED, K_FLAG, K_PROGRAM, K_MEMORY, K_ABI, K_EARLY_FINISH };

enum { OP_LOAD, OP_STORE, OP_GEMM, OP_FINISH, OP_ALU, NOPCODES };
enum { B_UOP, B_WGT, B_INP, B_ACC }; /* memory types double as buffer ids */
enum { M_LOAD, M_COMPUTE, M_STORE };
enum { Q_L2C, Q_C2L, Q_C2S, Q_S2C };
enum { ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR };

static const char *BUF_NAME[4] = {"UOP", "WGT", "INP", "ACC"};
static const char *MOD_NAME[3] = {"load", "compute", "store"};
static const char *Q_NAME[4] = {"load->compute", "compute->load", "compute->store", "store->compute"};
static const char *ALU_NAME[4] = {"MIN", "MAX", "ADD", "SHR"};

typedef struct {
    int op, module, pop_prev, pop_next, push_prev, push_next, mem, reset, alu_op, use_imm;
    int64_t sram_base, dram_base, y_size, x_size, x_stride, y_pad0, y_pad1, x_pad0, x_pad1;
    int64_t uop_bgn, uop_end, iter_out, iter_in, dst_out, dst_in, src_out, src_in, wgt_out, wgt_in, imm;
    int64_t cost;
} insn_t;

/* Last write and, per module, last read of one SRAM element (epochs of the accessing module). */
typedef struct {
    int64_t w_epoch, w_insn, r_epoch[3], r_insn[3];
    int32_t w_mod;
} shadow_t;

typedef struct {
    int64_t ready, vc[3], pusher;
} token_t;

typedef struct {
    const int64_t *cfg;
    int64_t B, BI, BO, depth[4], ebytes[4];
    insn_t *insns;
    int64_t n;
    uint8_t *dram;
    int64_t dram_bytes;
    uint32_t *uop;
    int8_t *inp;
    int32_t *wgt; /* [elem][j][k], widened and transposed so the MAC loop runs over contiguous k */
    int32_t *acc;
    int64_t *ud, *us, *uw; /* the current instruction's micro-ops, decoded */
    shadow_t *sh[4];
    int checked;
    int64_t vc[3][3];
    int64_t *stats;
    char *err;
    int64_t err_len, err_insn;
} sim_t;

static int fail(sim_t *s, int kind, int64_t insn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, (size_t)s->err_len, fmt, ap);
    va_end(ap);
    s->err_insn = insn;
    return kind;
}

static void describe(const insn_t *in, char *out, size_t len) {
    switch (in->op) {
    case OP_LOAD: snprintf(out, len, "LOAD %s, %s module", BUF_NAME[in->mem], MOD_NAME[in->module]); break;
    case OP_STORE: snprintf(out, len, "STORE, store module"); break;
    case OP_GEMM: snprintf(out, len, "GEMM%s, compute module", in->reset ? " reset" : ""); break;
    case OP_ALU:
        snprintf(out, len, "ALU %s%s, compute module", in->reset ? "reset" : ALU_NAME[in->alu_op],
                 in->reset ? "" : (in->use_imm ? " imm" : ""));
        break;
    default: snprintf(out, len, "FINISH, compute module");
    }
}

/* ---- decoding ---------------------------------------------------------------------------- */

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t bits(uint64_t lo, uint64_t hi, int64_t off, int64_t width) {
    if (width == 0) return 0;
    uint64_t v;
    if (off >= 64) {
        v = hi >> (off - 64);
    } else {
        v = lo >> off;
        if (off + width > 64) v |= hi << (64 - off); /* off > 0 here, as width <= 63 */
    }
    return v & ((UINT64_C(1) << width) - 1);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int module_of(const insn_t *in) {
    if (in->op == OP_STORE) return M_STORE;
    if (in->op == OP_LOAD && (in->mem == B_INP || in->mem == B_WGT)) return M_LOAD;
    return M_COMPUTE;
}

static int64_t insn_cost(const sim_t *s, const insn_t *in) {
    const int64_t *c = s->cfg;
    int64_t n = in->uop_end > in->uop_bgn ? (in->uop_end - in->uop_bgn) * in->iter_out * in->iter_in : 0;
    switch (in->op) {
    case OP_LOAD: {
        int64_t rows = in->y_pad0 + in->y_size + in->y_pad1, cols = in->x_pad0 + in->x_size + in->x_pad1;
        int64_t elems = in->y_size * in->x_size;
        return c[C_DMA_SETUP] + ceil_div(elems * s->ebytes[in->mem], c[C_BUS_BYTES]) + rows * cols - elems;
    }
    case OP_STORE:
        return c[C_DMA_SETUP] + ceil_div(in->y_size * in->x_size * c[C_OUT_BYTES], c[C_BUS_BYTES]);
    case OP_GEMM: return c[C_GEMM_SETUP] + c[C_GEMM_II] * n;
    case OP_ALU: return c[C_ALU_SETUP] + (in->use_imm ? c[C_ALU_IMM_II] : c[C_ALU_II]) * n;
    default: return 1;
    }
}

static int decode_all(sim_t *s, const uint8_t *bytes, const int64_t *table) {
    const int64_t *optab = table + (OP_LOAD * NFIELDS + F_OPCODE) * 2; /* every layout starts the same way */
    char d[64];
    for (int64_t i = 0; i < s->n; i++) {
        const uint8_t *p = bytes + 16 * i;
        uint64_t lo = le64(p), hi = le64(p + 8);
        int op = (int)bits(lo, hi, optab[0], optab[1]);
        if (op >= NOPCODES) return fail(s, K_PROGRAM, i, "instruction %lld: unknown opcode %d", (long long)i, op);
        int64_t f[NFIELDS];
        const int64_t *t = table + (int64_t)op * NFIELDS * 2;
        for (int k = 0; k < NFIELDS; k++) f[k] = (int64_t)bits(lo, hi, t[2 * k], t[2 * k + 1]);
        int64_t iw = t[2 * F_IMM + 1];
        if (iw && (f[F_IMM] >> (iw - 1))) f[F_IMM] -= INT64_C(1) << iw; /* signed */
        insn_t *in = &s->insns[i];
        *in = (insn_t){.op = op, .pop_prev = (int)f[F_POP_PREV], .pop_next = (int)f[F_POP_NEXT],
                       .push_prev = (int)f[F_PUSH_PREV], .push_next = (int)f[F_PUSH_NEXT], .mem = (int)f[F_MEM],
                       .reset = (int)f[F_RESET], .alu_op = (int)f[F_OP], .use_imm = (int)f[F_USE_IMM],
                       .sram_base = f[F_SRAM_BASE], .dram_base = f[F_DRAM_BASE], .y_size = f[F_Y_SIZE],
                       .x_size = f[F_X_SIZE], .x_stride = f[F_X_STRIDE], .y_pad0 = f[F_Y_PAD0],
                       .y_pad1 = f[F_Y_PAD1], .x_pad0 = f[F_X_PAD0], .x_pad1 = f[F_X_PAD1],
                       .uop_bgn = f[F_UOP_BGN], .uop_end = f[F_UOP_END], .iter_out = f[F_ITER_OUT],
                       .iter_in = f[F_ITER_IN], .dst_out = f[F_DST_OUT], .dst_in = f[F_DST_IN],
                       .src_out = f[F_SRC_OUT], .src_in = f[F_SRC_IN], .wgt_out = f[F_WGT_OUT],
                       .wgt_in = f[F_WGT_IN], .imm = f[F_IMM]};
        in->mem &= 3;
        in->alu_op &= 3;
        in->module = module_of(in);
        in->cost = insn_cost(s, in);
        describe(in, d, sizeof d);
        const char *bad = NULL, *why = NULL;
        if (in->module == M_LOAD && (in->pop_prev || in->push_prev)) {
            bad = in->pop_prev ? "pop_prev" : "push_prev";
            why = "the load module has no previous module";
        } else if (in->module == M_STORE && (in->pop_next || in->push_next)) {
            bad = in->pop_next ? "pop_next" : "push_next";
            why = "the store module has no next module";
        }
        if (bad)
            return fail(s, K_FLAG, i, "instruction %lld (%s): invalid dependence flag %s: %s", (long long)i, d,
                        bad, why);
        if (op == OP_FINISH && i != s->n - 1)
            return fail(s, K_PROGRAM, i,
                        "instruction %lld is a FINISH but %lld instruction(s) follow it; FINISH must be last",
                        (long long)i, (long long)(s->n - 1 - i));
        if (i == s->n - 1 && op != OP_FINISH)
            return fail(s, K_PROGRAM, i, "the program does not end with FINISH (its last instruction, %lld, is %s)",
                        (long long)i, d);
    }
    return K_OK;
}

/* ---- race detection ---------------------------------------------------------------------- */

static int race(sim_t *s, int64_t insn, const char *verb, int buf, int64_t idx, int64_t other, const char *what,
                const char *kind) {
    char d0[64], d1[64];
    describe(&s->insns[insn], d0, sizeof d0);
    describe(&s->insns[other], d1, sizeof d1);
    return fail(s, K_RACE, insn,
                "race: instruction %lld (%s) %s %s[%lld], which instruction %lld (%s) %s, and no dependence "
                "token orders the two (%s)",
                (long long)insn, d0, verb, BUF_NAME[buf], (long long)idx, (long long)other, d1, what, kind);
}

static inline int on_read(sim_t *s, int buf, int64_t idx, int m, int64_t insn) {
    shadow_t *e = &s->sh[buf][idx];
    if (e->w_mod >= 0 && e->w_mod != m && s->vc[m][e->w_mod] < e->w_epoch)
        return race(s, insn, "reads", buf, idx, e->w_insn, "wrote", "read after write");
    e->r_epoch[m] = s->vc[m][m];
    e->r_insn[m] = insn;
    return K_OK;
}

static inline int on_write(sim_t *s, int buf, int64_t idx, int m, int64_t insn) {
    shadow_t *e = &s->sh[buf][idx];
    if (e->w_mod >= 0 && e->w_mod != m && s->vc[m][e->w_mod] < e->w_epoch)
        return race(s, insn, "writes", buf, idx, e->w_insn, "also wrote", "write after write");
    for (int r = 0; r < 3; r++)
        if (r != m && e->r_insn[r] >= 0 && s->vc[m][r] < e->r_epoch[r])
            return race(s, insn, "writes", buf, idx, e->r_insn[r], "read", "write after read");
    e->w_mod = m;
    e->w_epoch = s->vc[m][m];
    e->w_insn = insn;
    return K_OK;
}

/* ---- execution --------------------------------------------------------------------------- */

static int exec_load(sim_t *s, const insn_t *in, int64_t i) {
    int buf = in->mem;
    int64_t eb = s->ebytes[buf], depth = s->depth[buf];
    int64_t rows = in->y_pad0 + in->y_size + in->y_pad1, cols = in->x_pad0 + in->x_size + in->x_pad1;
    int64_t total = rows * cols;
    char d[64];
    describe(in, d, sizeof d);
    if (total > 0 && in->sram_base + total > depth)
        return fail(s, K_BOUNDS, i, "instruction %lld (%s) writes %s elements %lld..%lld, past the buffer's %lld",
                    (long long)i, d, BUF_NAME[buf], (long long)in->sram_base,
                    (long long)(in->sram_base + total - 1), (long long)depth);
    if (in->y_size > 0 && in->x_size > 0) {
        int64_t end = (in->dram_base + (in->y_size - 1) * in->x_stride + in->x_size) * eb;
        if (end > s->dram_bytes)
            return fail(s, K_BOUNDS, i,
                        "instruction %lld (%s) reads DRAM bytes %lld..%lld, past the end of the %lld-byte DRAM array",
                        (long long)i, d, (long long)(in->dram_base * eb), (long long)(end - 1),
                        (long long)s->dram_bytes);
    }
    if (s->checked)
        for (int64_t e = 0; e < total; e++) {
            int k = on_write(s, buf, in->sram_base + e, in->module, i);
            if (k) return k;
        }
    int64_t B = s->B, BI = s->BI, BO = s->BO;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t e = in->sram_base + r * cols + c;
            int pad = r < in->y_pad0 || r >= in->y_pad0 + in->y_size || c < in->x_pad0 || c >= in->x_pad0 + in->x_size;
            int64_t at = in->dram_base + (r - in->y_pad0) * in->x_stride + (c - in->x_pad0);
            const uint8_t *src = pad ? NULL : s->dram + at * eb;
            switch (buf) {
            case B_UOP: s->uop[e] = pad ? 0 : (uint32_t)src[0] | (uint32_t)src[1] << 8 | (uint32_t)src[2] << 16 |
                                                  (uint32_t)src[3] << 24; break;
            case B_INP:
                if (pad) memset(s->inp + e * eb, 0, (size_t)eb);
                else memcpy(s->inp + e * eb, src, (size_t)eb);
                break;
            case B_WGT: {
                int32_t *w = s->wgt + e * BI * BO;
                for (int64_t k = 0; k < BO; k++)
                    for (int64_t j = 0; j < BI; j++) w[j * BO + k] = pad ? 0 : (int8_t)src[k * BI + j];
                break;
            }
            default: {
                int32_t *a = s->acc + e * B * BO;
                for (int64_t l = 0; l < B * BO; l++)
                    a[l] = pad ? 0 : (int32_t)((uint32_t)src[4 * l] | (uint32_t)src[4 * l + 1] << 8 |
                                               (uint32_t)src[4 * l + 2] << 16 | (uint32_t)src[4 * l + 3] << 24);
            }
            }
        }
    s->stats[S_LOAD_BYTES + buf] += in->y_size * in->x_size * eb;
    s->stats[S_PAD_ELEMS] += total - in->y_size * in->x_size;
    return K_OK;
}

static int exec_store(sim_t *s, const insn_t *in, int64_t i) {
    int64_t n = in->y_size * in->x_size, ob = s->cfg[C_OUT_BYTES], lanes = s->B * s->BO;
    if (n == 0) return K_OK;
    if (in->sram_base + n > s->depth[B_ACC])
        return fail(s, K_BOUNDS, i, "instruction %lld (STORE) reads ACC elements %lld..%lld, past the buffer's %lld",
                    (long long)i, (long long)in->sram_base, (long long)(in->sram_base + n - 1),
                    (long long)s->depth[B_ACC]);
    int64_t end = (in->dram_base + (in->y_size - 1) * in->x_stride + in->x_size) * ob;
    if (end > s->dram_bytes)
        return fail(s, K_BOUNDS, i,
                    "instruction %lld (STORE) writes DRAM bytes %lld..%lld, past the end of the %lld-byte DRAM array",
                    (long long)i, (long long)(in->dram_base * ob), (long long)(end - 1), (long long)s->dram_bytes);
    if (s->checked)
        for (int64_t e = 0; e < n; e++) {
            int k = on_read(s, B_ACC, in->sram_base + e, M_STORE, i);
            if (k) return k;
        }
    for (int64_t r = 0; r < in->y_size; r++)
        for (int64_t c = 0; c < in->x_size; c++) {
            const int32_t *a = s->acc + (in->sram_base + r * in->x_size + c) * lanes;
            uint8_t *o = s->dram + (in->dram_base + r * in->x_stride + c) * ob;
            for (int64_t l = 0; l < lanes; l++) o[l] = (uint8_t)a[l]; /* truncation to int8 */
        }
    s->stats[S_STORE_BYTES] += n * ob;
    return K_OK;
}

/* Decodes the micro-ops and checks every index the loop nest forms (before anything is written). */
static int prepare_loop(sim_t *s, const insn_t *in, int64_t i, int src_buf, int uses_src, int uses_wgt) {
    char d[64];
    describe(in, d, sizeof d);
    if (in->uop_bgn > in->uop_end || in->uop_end > s->depth[B_UOP])
        return fail(s, K_BOUNDS, i, "instruction %lld (%s): micro-op range [%lld, %lld) is not within the "
                    "%lld-entry micro-op buffer", (long long)i, d, (long long)in->uop_bgn, (long long)in->uop_end,
                    (long long)s->depth[B_UOP]);
    const int64_t *c = s->cfg;
    int64_t nu = in->uop_end - in->uop_bgn, wd = c[C_UOP_DST_BITS], ws = c[C_UOP_SRC_BITS], ww = c[C_UOP_WGT_BITS];
    int64_t mx[3] = {0, 0, 0};
    for (int64_t u = 0; u < nu; u++) {
        uint64_t w = s->uop[in->uop_bgn + u];
        s->ud[u] = (int64_t)bits(w, 0, 0, wd);
        s->us[u] = (int64_t)bits(w, 0, wd, ws);
        s->uw[u] = (int64_t)bits(w, 0, wd + ws, ww);
        if (s->ud[u] > mx[0]) mx[0] = s->ud[u];
        if (s->us[u] > mx[1]) mx[1] = s->us[u];
        if (s->uw[u] > mx[2]) mx[2] = s->uw[u];
    }
    if (nu == 0 || in->iter_out == 0 || in->iter_in == 0) return K_OK;
    int64_t lim[3] = {s->depth[B_ACC], uses_src ? s->depth[src_buf] : INT64_MAX,
                      uses_wgt ? s->depth[B_WGT] : INT64_MAX};
    int64_t fo[3] = {in->dst_out, in->src_out, in->wgt_out}, fi[3] = {in->dst_in, in->src_in, in->wgt_in};
    int bufs[3] = {B_ACC, src_buf, B_WGT};
    const char *names[3] = {"dst", "src", "wgt"};
    for (int a = 0; a < 3; a++) {
        if (mx[a] + (in->iter_out - 1) * fo[a] + (in->iter_in - 1) * fi[a] < lim[a]) continue;
        const int64_t *base = a == 0 ? s->ud : a == 1 ? s->us : s->uw; /* slow path: name the first offender */
        for (int64_t o = 0; o < in->iter_out; o++)
            for (int64_t ii = 0; ii < in->iter_in; ii++)
                for (int64_t u = 0; u < nu; u++) {
                    int64_t x = base[u] + o * fo[a] + ii * fi[a];
                    if (x >= lim[a])
                        return fail(s, K_BOUNDS, i, "instruction %lld (%s): micro-op %lld at o=%lld i=%lld has %s "
                                    "index %lld, past the %s buffer's %lld elements", (long long)i, d,
                                    (long long)(in->uop_bgn + u), (long long)o, (long long)ii, names[a], (long long)x,
                                    BUF_NAME[bufs[a]], (long long)lim[a]);
                }
    }
    if (s->checked)
        for (int64_t u = 0; u < nu; u++) {
            int k = on_read(s, B_UOP, in->uop_bgn + u, M_COMPUTE, i);
            if (k) return k;
        }
    return K_OK;
}

/* acc[b][k] += sum_j x[b][j] * w[j][k]: the k loop is contiguous, so GCC vectorizes it. */
static inline __attribute__((always_inline)) void mac_block(int32_t *restrict acc, const int8_t *restrict x,
                                                            const int32_t *restrict wt, int64_t B, int64_t BI,
                                                            int64_t BO) {
    for (int64_t b = 0; b < B; b++) {
        int32_t sum[BO];
        for (int64_t k = 0; k < BO; k++) sum[k] = acc[b * BO + k];
        for (int64_t j = 0; j < BI; j++) {
            int32_t xv = x[b * BI + j];
#pragma GCC unroll 1 /* full unrolling first would leave the vectorizer only partial SLP */
            for (int64_t k = 0; k < BO; k++) sum[k] += xv * wt[j * BO + k];
        }
        for (int64_t k = 0; k < BO; k++) acc[b * BO + k] = sum[k];
    }
}

static inline __attribute__((always_inline)) void gemm_body(sim_t *s, const insn_t *in, int64_t B, int64_t BI,
                                                            int64_t BO) {
    int64_t nu = in->uop_end - in->uop_bgn;
    for (int64_t o = 0; o < in->iter_out; o++)
        for (int64_t i = 0; i < in->iter_in; i++) {
            int64_t d0 = o * in->dst_out + i * in->dst_in, s0 = o * in->src_out + i * in->src_in;
            int64_t w0 = o * in->wgt_out + i * in->wgt_in;
            for (int64_t u = 0; u < nu; u++)
                mac_block(s->acc + (d0 + s->ud[u]) * B * BO, s->inp + (s0 + s->us[u]) * B * BI,
                          s->wgt + (w0 + s->uw[u]) * BI * BO, B, BI, BO);
        }
}

/* Constant block shapes let GCC size the vectors; anything else takes the generic loop. */
static void gemm_1_16_16(sim_t *s, const insn_t *in) { gemm_body(s, in, 1, 16, 16); }
static void gemm_1_32_32(sim_t *s, const insn_t *in) { gemm_body(s, in, 1, 32, 32); }
static void gemm_8_8_8(sim_t *s, const insn_t *in) { gemm_body(s, in, 8, 8, 8); }
static void gemm_generic(sim_t *s, const insn_t *in) { gemm_body(s, in, s->B, s->BI, s->BO); }

static int exec_gemm(sim_t *s, const insn_t *in, int64_t i) {
    int k = prepare_loop(s, in, i, B_INP, !in->reset, !in->reset);
    if (k) return k;
    int64_t nu = in->uop_end - in->uop_bgn, lanes = s->B * s->BO;
    int64_t n = nu * in->iter_out * in->iter_in;
    if (n == 0) return K_OK;
    if (s->checked)
        for (int64_t o = 0; o < in->iter_out; o++)
            for (int64_t ii = 0; ii < in->iter_in; ii++)
                for (int64_t u = 0; u < nu; u++) {
                    int64_t d = s->ud[u] + o * in->dst_out + ii * in->dst_in;
                    if (!in->reset) {
                        if ((k = on_read(s, B_INP, s->us[u] + o * in->src_out + ii * in->src_in, M_COMPUTE, i)) ||
                            (k = on_read(s, B_WGT, s->uw[u] + o * in->wgt_out + ii * in->wgt_in, M_COMPUTE, i)) ||
                            (k = on_read(s, B_ACC, d, M_COMPUTE, i)))
                            return k;
                    }
                    if ((k = on_write(s, B_ACC, d, M_COMPUTE, i))) return k;
                }
    if (in->reset) {
        for (int64_t o = 0; o < in->iter_out; o++)
            for (int64_t ii = 0; ii < in->iter_in; ii++)
                for (int64_t u = 0; u < nu; u++)
                    memset(s->acc + (s->ud[u] + o * in->dst_out + ii * in->dst_in) * lanes, 0, (size_t)lanes * 4);
        s->stats[S_GEMM_RESET_UOPS] += n;
        return K_OK;
    }
    if (s->B == 1 && s->BI == 16 && s->BO == 16) gemm_1_16_16(s, in);
    else if (s->B == 1 && s->BI == 32 && s->BO == 32) gemm_1_32_32(s, in);
    else if (s->B == 8 && s->BI == 8 && s->BO == 8) gemm_8_8_8(s, in);
    else gemm_generic(s, in);
    s->stats[S_GEMM_UOPS] += n;
    s->stats[S_GEMM_CYCLES] += n * s->cfg[C_GEMM_II];
    return K_OK;
}

static inline int32_t alu_shr(int32_t a, int32_t b) {
    if (b >= 0) return b >= 31 ? (a < 0 ? -1 : 0) : a >> b; /* shifting every bit out, not C's UB */
    int64_t l = -(int64_t)b;
    return l >= 32 ? 0 : (int32_t)((uint32_t)a << l);
}

static int exec_alu(sim_t *s, const insn_t *in, int64_t i) {
    int reads_src = !in->reset && !in->use_imm;
    int k = prepare_loop(s, in, i, B_ACC, reads_src, 0);
    if (k) return k;
    int64_t nu = in->uop_end - in->uop_bgn, lanes = s->B * s->BO;
    int64_t n = nu * in->iter_out * in->iter_in;
    for (int64_t o = 0; o < in->iter_out && n; o++)
        for (int64_t ii = 0; ii < in->iter_in; ii++)
            for (int64_t u = 0; u < nu; u++) {
                int64_t d = s->ud[u] + o * in->dst_out + ii * in->dst_in;
                int64_t sx = s->us[u] + o * in->src_out + ii * in->src_in;
                if (s->checked) {
                    if ((!in->reset && (k = on_read(s, B_ACC, d, M_COMPUTE, i))) ||
                        (reads_src && (k = on_read(s, B_ACC, sx, M_COMPUTE, i))) ||
                        (k = on_write(s, B_ACC, d, M_COMPUTE, i)))
                        return k;
                }
                int32_t *a = s->acc + d * lanes;
                if (in->reset) {
                    memset(a, 0, (size_t)lanes * 4);
                    continue;
                }
                const int32_t *b = s->acc + sx * lanes;
                for (int64_t l = 0; l < lanes; l++) {
                    int32_t x = a[l], y = in->use_imm ? (int32_t)in->imm : b[l];
                    switch (in->alu_op) {
                    case ALU_MIN: a[l] = x < y ? x : y; break;
                    case ALU_MAX: a[l] = x > y ? x : y; break;
                    case ALU_ADD: a[l] = (int32_t)((uint32_t)x + (uint32_t)y); break;
                    default: a[l] = alu_shr(x, y);
                    }
                }
            }
    s->stats[S_ALU_UOPS] += n;
    s->stats[S_ALU_CYCLES] += n * (in->use_imm ? s->cfg[C_ALU_IMM_II] : s->cfg[C_ALU_II]);
    return K_OK;
}

static int exec_insn(sim_t *s, int64_t i) {
    const insn_t *in = &s->insns[i];
    int k = K_OK;
    switch (in->op) {
    case OP_LOAD: k = exec_load(s, in, i); break;
    case OP_STORE: k = exec_store(s, in, i); break;
    case OP_GEMM: k = exec_gemm(s, in, i); break;
    case OP_ALU: k = exec_alu(s, in, i); break;
    default: break;
    }
    if (k) return k;
    s->stats[S_LOAD_BUSY + in->module] += in->cost;
    s->stats[S_INSNS + in->module] += 1;
    return K_OK;
}

/* ---- checked mode: the three modules, their queues and token FIFOs ----------------------- */

typedef struct {
    token_t *buf[4];
    int64_t head[4], count[4], cap, ring; /* ring: slots allocated, enough for every push of the program */
} fifos_t;

/* The FIFO an instruction pops from / pushes to for each flag (-1: no neighbour, rejected earlier). */
static int q_pop_prev(int m) { return m == M_COMPUTE ? Q_L2C : m == M_STORE ? Q_C2S : -1; }
static int q_pop_next(int m) { return m == M_LOAD ? Q_C2L : m == M_COMPUTE ? Q_S2C : -1; }
static int q_push_prev(int m) { return m == M_COMPUTE ? Q_C2L : m == M_STORE ? Q_S2C : -1; }
static int q_push_next(int m) { return m == M_LOAD ? Q_L2C : m == M_COMPUTE ? Q_C2S : -1; }

static void flag_queues(const insn_t *in, int pops[2], int pushes[2]) {
    pops[0] = in->pop_prev ? q_pop_prev(in->module) : -1;
    pops[1] = in->pop_next ? q_pop_next(in->module) : -1;
    pushes[0] = in->push_prev ? q_push_prev(in->module) : -1;
    pushes[1] = in->push_next ? q_push_next(in->module) : -1;
}

static size_t append(char *buf, size_t len, size_t at, const char *fmt, ...) {
    if (at >= len) return at;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + at, len - at, fmt, ap);
    va_end(ap);
    return w < 0 ? at : at + (size_t)w;
}

static int run_checked(sim_t *s) {
    int64_t n = s->n, cmd = s->cfg[C_CMD_DEPTH];
    int64_t *fetch = malloc(sizeof(int64_t) * (size_t)n), *list[3];
    int64_t cnt[3] = {0, 0, 0}, pos[3] = {0, 0, 0}, fetched[3] = {0, 0, 0}, free_at[3] = {0, 0, 0};
    fifos_t q = {.cap = s->cfg[C_DEP_DEPTH], .ring = s->cfg[C_DEP_DEPTH] < n ? s->cfg[C_DEP_DEPTH] : n};
    int kind = K_OK;
    for (int m = 0; m < 3; m++) list[m] = malloc(sizeof(int64_t) * (size_t)n);
    for (int f = 0; f < 4; f++) q.buf[f] = malloc(sizeof(token_t) * (size_t)q.ring);
    if (!fetch || !list[0] || !list[1] || !list[2] || !q.buf[0] || !q.buf[1] || !q.buf[2] || !q.buf[3]) {
        kind = fail(s, K_MEMORY, -1, "out of memory for the schedule of %lld instructions", (long long)n);
        goto out;
    }
    for (int64_t i = 0; i < n; i++) {
        int m = s->insns[i].module;
        list[m][cnt[m]++] = i;
    }
    int64_t now = 0, last_fetch = -1, F = 0, cycles = 0, finish_t = -1;
    for (int64_t done = 0; done < n; done++) {
        /* fetch in order, one per cycle, while the target queue has room; a fetch that waited for room
           got it when the queue's head started, which is `now` */
        while (F < n && fetched[s->insns[F].module] - pos[s->insns[F].module] < cmd) {
            fetch[F] = last_fetch + 1 > now ? last_fetch + 1 : now;
            last_fetch = fetch[F];
            fetched[s->insns[F++].module]++;
        }
        int best = -1;
        int64_t best_t = 0;
        for (int m = 0; m < 3; m++) {
            if (pos[m] == cnt[m] || list[m][pos[m]] >= F) continue;
            const insn_t *in = &s->insns[list[m][pos[m]]];
            int pops[2], pushes[2], ok = 1;
            int64_t t = free_at[m];
            if (fetch[list[m][pos[m]]] > t) t = fetch[list[m][pos[m]]];
            if (now > t) t = now; /* a full FIFO it pushes into got room no earlier than now */
            flag_queues(in, pops, pushes);
            for (int k = 0; k < 2; k++) {
                if (pops[k] >= 0) {
                    if (q.count[pops[k]] == 0) ok = 0;
                    else if (q.buf[pops[k]][q.head[pops[k]]].ready > t) t = q.buf[pops[k]][q.head[pops[k]]].ready;
                }
                if (pushes[k] >= 0 && q.count[pushes[k]] == q.cap) ok = 0;
            }
            if (ok && (best < 0 || t < best_t)) best = m, best_t = t;
        }
        if (best < 0) { /* deadlock: say what each module waits on */
            int64_t first = -1;
            size_t at = append(s->err, (size_t)s->err_len, 0, "deadlock after cycle %lld: no module can start "
                               "its next instruction.", (long long)cycles);
            for (int m = 0; m < 3; m++) {
                at = append(s->err, (size_t)s->err_len, at, " %s: ", MOD_NAME[m]);
                if (pos[m] == cnt[m]) {
                    at = append(s->err, (size_t)s->err_len, at, "finished;");
                    continue;
                }
                int64_t h = list[m][pos[m]];
                char d[64];
                describe(&s->insns[h], d, sizeof d);
                if (h >= F) {
                    at = append(s->err, (size_t)s->err_len, at, "instruction %lld (%s) not fetched yet;",
                                (long long)h, d);
                    continue;
                }
                if (first < 0 || h < first) first = h;
                at = append(s->err, (size_t)s->err_len, at, "instruction %lld (%s) waits:", (long long)h, d);
                int pops[2], pushes[2];
                flag_queues(&s->insns[h], pops, pushes);
                for (int k = 0; k < 2; k++) {
                    if (pops[k] >= 0 && q.count[pops[k]] == 0)
                        at = append(s->err, (size_t)s->err_len, at, " it pops the empty %s FIFO", Q_NAME[pops[k]]);
                    if (pushes[k] >= 0 && q.count[pushes[k]] == q.cap)
                        at = append(s->err, (size_t)s->err_len, at, " it pushes into the full %s FIFO",
                                    Q_NAME[pushes[k]]);
                }
                at = append(s->err, (size_t)s->err_len, at, ";");
            }
            at = append(s->err, (size_t)s->err_len, at, " FIFO tokens (capacity %lld):", (long long)q.cap);
            for (int f = 0; f < 4; f++)
                at = append(s->err, (size_t)s->err_len, at, " %s %lld%s", Q_NAME[f], (long long)q.count[f],
                            f < 3 ? "," : ";");
            if (F < n)
                append(s->err, (size_t)s->err_len, at, " fetch stalled at instruction %lld (the %s module's "
                       "command queue is full, depth %lld).", (long long)F, MOD_NAME[s->insns[F].module],
                       (long long)cmd);
            else
                append(s->err, (size_t)s->err_len, at, " fetch not stalled (all %lld instructions fetched).",
                       (long long)n);
            s->err_insn = first;
            kind = K_DEADLOCK;
            goto out;
        }
        int m = best;
        int64_t h = list[m][pos[m]];
        const insn_t *in = &s->insns[h];
        int pops[2], pushes[2];
        flag_queues(in, pops, pushes);
        now = best_t;
        for (int k = 0; k < 2; k++)
            if (pops[k] >= 0) {
                token_t *t = &q.buf[pops[k]][q.head[pops[k]]];
                for (int c = 0; c < 3; c++)
                    if (t->vc[c] > s->vc[m][c]) s->vc[m][c] = t->vc[c];
                q.head[pops[k]] = (q.head[pops[k]] + 1) % q.ring;
                q.count[pops[k]]--;
            }
        s->vc[m][m]++;
        if (in->op == OP_FINISH) finish_t = now;
        if ((kind = exec_insn(s, h))) goto out;
        int64_t end = now + in->cost;
        free_at[m] = end;
        if (end > cycles) cycles = end;
        for (int k = 0; k < 2; k++)
            if (pushes[k] >= 0) {
                int f = pushes[k];
                token_t *t = &q.buf[f][(q.head[f] + q.count[f]) % q.ring];
                t->ready = end;
                t->pusher = h;
                for (int c = 0; c < 3; c++) t->vc[c] = s->vc[m][c];
                q.count[f]++;
            }
        pos[m]++;
    }
    for (int f = 0; f < 4; f++)
        if (q.count[f] > 0) {
            int64_t p = q.buf[f][q.head[f]].pusher;
            char d[64];
            describe(&s->insns[p], d, sizeof d);
            kind = fail(s, K_UNMATCHED, p, "unmatched push: instruction %lld (%s) pushed a token onto the %s FIFO "
                        "that no instruction pops (%lld token(s) left there at the end)", (long long)p, d,
                        Q_NAME[f], (long long)q.count[f]);
            goto out;
        }
    /* the host reads memory once FINISH ends: the DMA units must be done before it starts */
    for (int u = M_LOAD; u <= M_STORE; u += M_STORE - M_LOAD)
        if (cnt[u] > 0 && free_at[u] > finish_t) {
            int64_t p = list[u][cnt[u] - 1];
            kind = fail(s, K_EARLY_FINISH, p, "FINISH (instruction %lld) starts at cycle %lld, before the %s "
                        "module's last instruction %lld ends (cycle %lld): the host would read memory too early; "
                        "FINISH must pop a token that instruction pushes", (long long)(n - 1), (long long)finish_t,
                        MOD_NAME[u], (long long)p, (long long)free_at[u]);
            goto out;
        }
    s->stats[S_CYCLES] = cycles;
out:
    free(fetch);
    for (int m = 0; m < 3; m++) free(list[m]);
    for (int f = 0; f < 4; f++) free(q.buf[f]);
    return kind;
}

/* ---- entry point ------------------------------------------------------------------------- */

int vta_sim_run(const uint8_t *insn_bytes, int64_t n_insns, uint8_t *dram, int64_t dram_bytes, const int64_t *cfg,
                int64_t n_cfg, const int64_t *table, int64_t n_fields, int32_t checked, int64_t *stats,
                int64_t n_stats, char *err, int64_t err_len, int64_t *err_insn) {
    sim_t s = {.cfg = cfg, .n = n_insns, .dram = dram, .dram_bytes = dram_bytes, .checked = checked != 0,
               .stats = stats, .err = err, .err_len = err_len, .err_insn = -1};
    int kind = K_OK;
    *err_insn = -1;
    if (n_cfg != NCONFIG || n_fields != NFIELDS || n_stats != NSTATS)
        return fail(&s, K_ABI, -1, "the simulator library expects %d config values, %d fields and %d stats, got "
                    "%lld, %lld and %lld", NCONFIG, NFIELDS, NSTATS, (long long)n_cfg, (long long)n_fields,
                    (long long)n_stats);
    for (int k = 0; k < NCONFIG; k++)
        if (cfg[k] < (k >= C_UOP_DST_BITS ? 0 : 1) || cfg[k] > (INT64_C(1) << 40))
            return fail(&s, K_ABI, -1, "config value %d is %lld, not a positive size", k, (long long)cfg[k]);
    for (int k = 0; k < NOPCODES * NFIELDS; k++)
        if (table[2 * k] < 0 || table[2 * k + 1] < 0 || table[2 * k + 1] > 63 || table[2 * k] + table[2 * k + 1] > 128)
            return fail(&s, K_ABI, -1, "field table entry %d is not a field of a 128-bit word", k);
    if (cfg[C_UOP_DST_BITS] + cfg[C_UOP_SRC_BITS] + cfg[C_UOP_WGT_BITS] > 32)
        return fail(&s, K_ABI, -1, "micro-op fields exceed 32 bits");
    memset(stats, 0, sizeof(int64_t) * NSTATS);
    if (n_insns <= 0) return fail(&s, K_PROGRAM, -1, "the program is empty; it must end with FINISH");
    s.B = cfg[C_BATCH], s.BI = cfg[C_BLOCK_IN], s.BO = cfg[C_BLOCK_OUT];
    int64_t dcfg[4] = {C_UOP_DEPTH, C_WGT_DEPTH, C_INP_DEPTH, C_ACC_DEPTH};
    int64_t ecfg[4] = {-1, C_WGT_BYTES, C_INP_BYTES, C_ACC_BYTES};
    for (int b = 0; b < 4; b++) {
        s.depth[b] = cfg[dcfg[b]];
        s.ebytes[b] = b == B_UOP ? 4 : cfg[ecfg[b]];
    }
    if (s.ebytes[B_INP] != s.B * s.BI || s.ebytes[B_WGT] != s.BI * s.BO || s.ebytes[B_ACC] != 4 * s.B * s.BO ||
        cfg[C_OUT_BYTES] != s.B * s.BO)
        return fail(&s, K_ABI, -1, "element sizes do not match an int8 x int8 -> int32 block");
    s.insns = malloc(sizeof(insn_t) * (size_t)n_insns);
    s.uop = calloc((size_t)s.depth[B_UOP], 4);
    s.inp = calloc((size_t)(s.depth[B_INP] * s.ebytes[B_INP]), 1);
    s.wgt = calloc((size_t)(s.depth[B_WGT] * s.BI * s.BO), 4);
    s.acc = calloc((size_t)(s.depth[B_ACC] * s.B * s.BO), 4);
    s.ud = malloc(sizeof(int64_t) * (size_t)s.depth[B_UOP]);
    s.us = malloc(sizeof(int64_t) * (size_t)s.depth[B_UOP]);
    s.uw = malloc(sizeof(int64_t) * (size_t)s.depth[B_UOP]);
    int ok = s.insns && s.uop && s.inp && s.wgt && s.acc && s.ud && s.us && s.uw;
    for (int b = 0; b < 4 && ok && s.checked; b++) {
        s.sh[b] = malloc(sizeof(shadow_t) * (size_t)s.depth[b]);
        if (!s.sh[b]) ok = 0;
        else
            for (int64_t e = 0; e < s.depth[b]; e++)
                s.sh[b][e] = (shadow_t){.w_mod = -1, .w_insn = -1, .r_insn = {-1, -1, -1}};
    }
    if (!ok) {
        kind = fail(&s, K_MEMORY, -1, "out of memory for the simulated buffers");
        goto out;
    }
    if ((kind = decode_all(&s, insn_bytes, table))) goto out;
    if (s.checked) {
        kind = run_checked(&s);
    } else {
        int64_t cycles = 0;
        for (int64_t i = 0; i < n_insns && !kind; i++) {
            kind = exec_insn(&s, i);
            cycles += s.insns[i].cost;
        }
        stats[S_CYCLES] = cycles;
    }
out:
    free(s.insns);
    free(s.uop);
    free(s.inp);
    free(s.wgt);
    free(s.acc);
    free(s.ud);
    free(s.us);
    free(s.uw);
    for (int b = 0; b < 4; b++) free(s.sh[b]);
    *err_insn = s.err_insn;
    return kind;
}
