#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif


static inline float tw_bf16_to_f32(uint16_t v) {
  uint32_t u = (uint32_t)v << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t tw_f32_to_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

typedef int32_t tw_int32x4 __attribute__((vector_size(16), aligned(4)));

static inline tw_int32x4 tw_bcast_int32x4(int32_t v) { return (tw_int32x4){v, v, v, v}; }

static inline int32_t tw_max_int32(int32_t a, int32_t b) { return a > b ? a : b; }

static volatile int32_t tw_alloc_failed;

void tw_release(void) {}

int32_t kernel(int32_t *restrict A, int32_t *restrict M) {
  tw_alloc_failed = 0;
  {
    int32_t M_rf[16] __attribute__((aligned(64)));
    for (int32_t i = 0; i < 4; ++i) {
      *(tw_int32x4 *)(&M_rf[(i * 4)]) = tw_bcast_int32x4(INT32_MIN);
      for (int32_t r_outer = 0; r_outer < 5; ++r_outer) {
        #pragma omp simd
        for (int32_t r_inner = 0; r_inner < 4; ++r_inner) {
          if ((((r_outer * 4) + r_inner) != i)) {
            M_rf[((i * 4) + r_inner)] = tw_max_int32(M_rf[((i * 4) + r_inner)], A[(((i * 21) + (r_outer * 4)) + r_inner)]);
          }
        }
      }
      M_rf[(i * 4)] = tw_max_int32(M_rf[(i * 4)], A[((i * 21) + 20)]);
    }
    for (int32_t i_1 = 0; i_1 < 4; ++i_1) {
      {
        int32_t M_acc_0;
        M_acc_0 = INT32_MIN;
        for (int32_t r_inner_v = 0; r_inner_v < 4; ++r_inner_v) {
          M_acc_0 = tw_max_int32(M_acc_0, M_rf[((i_1 * 4) + r_inner_v)]);
        }
        M[i_1] = M_acc_0;
      }
    }
  }
  return tw_alloc_failed ? -1 : 0;
}

int32_t tw_call(void **tw_args) { return kernel((int32_t *)tw_args[0], (int32_t *)tw_args[1]); }

double tw_time(void **tw_args, int32_t tw_number) {
  struct timespec tw_t0, tw_t1;
  clock_gettime(CLOCK_MONOTONIC, &tw_t0);
  for (int32_t tw_n = 0; tw_n < tw_number; ++tw_n) kernel((int32_t *)tw_args[0], (int32_t *)tw_args[1]);
  clock_gettime(CLOCK_MONOTONIC, &tw_t1);
  return ((double)(tw_t1.tv_sec - tw_t0.tv_sec) + 1e-9 * (double)(tw_t1.tv_nsec - tw_t0.tv_nsec)) / tw_number;
}

int32_t tw_set_num_threads(int32_t tw_n) {
#ifdef _OPENMP
  omp_set_num_threads(tw_n);
  return tw_n;
#else
  (void)tw_n;
  return 1;
#endif
}
