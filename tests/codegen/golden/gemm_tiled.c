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

typedef float tw_float32x8 __attribute__((vector_size(32), aligned(4)));

static inline tw_float32x8 tw_bcast_float32x8(float v) { return (tw_float32x8){v, v, v, v, v, v, v, v}; }

static volatile int32_t tw_alloc_failed;

void tw_release(void) {}

int32_t kernel(float *restrict A, float *restrict B, float *restrict C) {
  tw_alloc_failed = 0;
  #pragma omp parallel for schedule(static)
  for (int32_t i_outer = 0; i_outer < 4; ++i_outer) {
    for (int32_t j_outer = 0; j_outer < 4; ++j_outer) {
      {
        float C_local[32] __attribute__((aligned(64)));
        *(tw_float32x8 *)(&C_local[0]) = tw_bcast_float32x8(0.0f);
        *(tw_float32x8 *)(&C_local[8]) = tw_bcast_float32x8(0.0f);
        *(tw_float32x8 *)(&C_local[16]) = tw_bcast_float32x8(0.0f);
        *(tw_float32x8 *)(&C_local[24]) = tw_bcast_float32x8(0.0f);
        for (int32_t k = 0; k < 12; ++k) {
          *(tw_float32x8 *)(&C_local[0]) = ((*(tw_float32x8 *)(&C_local[0])) + (tw_bcast_float32x8(A[((i_outer * 48) + k)]) * (*(tw_float32x8 *)(&B[((k * 32) + (j_outer * 8))]))));
          *(tw_float32x8 *)(&C_local[8]) = ((*(tw_float32x8 *)(&C_local[8])) + (tw_bcast_float32x8(A[(((i_outer * 48) + k) + 12)]) * (*(tw_float32x8 *)(&B[((k * 32) + (j_outer * 8))]))));
          *(tw_float32x8 *)(&C_local[16]) = ((*(tw_float32x8 *)(&C_local[16])) + (tw_bcast_float32x8(A[(((i_outer * 48) + k) + 24)]) * (*(tw_float32x8 *)(&B[((k * 32) + (j_outer * 8))]))));
          *(tw_float32x8 *)(&C_local[24]) = ((*(tw_float32x8 *)(&C_local[24])) + (tw_bcast_float32x8(A[(((i_outer * 48) + k) + 36)]) * (*(tw_float32x8 *)(&B[((k * 32) + (j_outer * 8))]))));
        }
        for (int32_t i_inner = 0; i_inner < 4; ++i_inner) {
          *(tw_float32x8 *)(&C[(((i_outer * 128) + (i_inner * 32)) + (j_outer * 8))]) = (*(tw_float32x8 *)(&C_local[(i_inner * 8)]));
        }
      }
    }
  }
  return tw_alloc_failed ? -1 : 0;
}

int32_t tw_call(void **tw_args) { return kernel((float *)tw_args[0], (float *)tw_args[1], (float *)tw_args[2]); }

double tw_time(void **tw_args, int32_t tw_number) {
  struct timespec tw_t0, tw_t1;
  clock_gettime(CLOCK_MONOTONIC, &tw_t0);
  for (int32_t tw_n = 0; tw_n < tw_number; ++tw_n) kernel((float *)tw_args[0], (float *)tw_args[1], (float *)tw_args[2]);
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
