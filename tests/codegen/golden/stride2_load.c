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

typedef int32_t tw_int32x8 __attribute__((vector_size(32), aligned(4)));

#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define TW_SHUFFLE(a, b, mask_t, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define TW_SHUFFLE(a, b, mask_t, ...) __builtin_shuffle(a, b, (mask_t){__VA_ARGS__})
#endif

static inline tw_float32x8 tw_load_s2_float32x8(const float *p) {
  const tw_float32x8 c0 = *(const tw_float32x8 *)(p), c1 = *(const tw_float32x8 *)(p + 7);
  return TW_SHUFFLE(c0, c1, tw_int32x8, 0, 2, 4, 6, 9, 11, 13, 15);
}

static inline tw_float32x8 tw_bcast_float32x8(float v) { return (tw_float32x8){v, v, v, v, v, v, v, v}; }

static volatile int32_t tw_alloc_failed;

void tw_release(void) {}

int32_t kernel(float *restrict A, float *restrict B) {
  tw_alloc_failed = 0;
  for (int32_t i = 0; i < 3; ++i) {
    for (int32_t j_outer = 0; j_outer < 2; ++j_outer) {
      *(tw_float32x8 *)(&B[((i * 16) + (j_outer * 8))]) = (tw_load_s2_float32x8(&A[((i * 34) + (j_outer * 16))]) + (tw_load_s2_float32x8(&A[(((i * 34) + (j_outer * 16)) + 1)]) * tw_bcast_float32x8(0.5f)));
    }
  }
  return tw_alloc_failed ? -1 : 0;
}

int32_t tw_call(void **tw_args) { return kernel((float *)tw_args[0], (float *)tw_args[1]); }

double tw_time(void **tw_args, int32_t tw_number) {
  struct timespec tw_t0, tw_t1;
  clock_gettime(CLOCK_MONOTONIC, &tw_t0);
  for (int32_t tw_n = 0; tw_n < tw_number; ++tw_n) kernel((float *)tw_args[0], (float *)tw_args[1]);
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
