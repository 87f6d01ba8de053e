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

static inline float tw_max_float32(float a, float b) { float m = a > b ? a : b; return a != a ? a : m; }

static volatile int32_t tw_alloc_failed;

void tw_release(void) {}

int32_t kernel(float *restrict X, float *restrict W, float *restrict bias, float *restrict out) {
  tw_alloc_failed = 0;
  for (int32_t ax1 = 0; ax1 < 3; ++ax1) {
    {
      float conv_sum[25] __attribute__((aligned(64)));
      for (int32_t h_outer = 0; h_outer < 2; ++h_outer) {
        for (int32_t h_inner = 0; h_inner < 2; ++h_inner) {
          for (int32_t w = 0; w < 5; ++w) {
            {
              float conv_sum_acc_0;
              conv_sum_acc_0 = 0.0f;
              for (int32_t rc = 0; rc < 2; ++rc) {
                for (int32_t rh = 0; rh < 3; ++rh) {
                  conv_sum_acc_0 = (conv_sum_acc_0 + ((((((((h_outer * 2) + h_inner) + rh) - 1) >= 0) && ((w - 1) >= 0)) ? X[((((((rc * 25) + (h_outer * 10)) + (h_inner * 5)) + (rh * 5)) + w) - 6)] : 0.0f) * W[(((ax1 * 18) + (rc * 9)) + (rh * 3))]));
                  conv_sum_acc_0 = (conv_sum_acc_0 + (((((((h_outer * 2) + h_inner) + rh) - 1) >= 0) ? X[((((((rc * 25) + (h_outer * 10)) + (h_inner * 5)) + (rh * 5)) + w) - 5)] : 0.0f) * W[((((ax1 * 18) + (rc * 9)) + (rh * 3)) + 1)]));
                  conv_sum_acc_0 = (conv_sum_acc_0 + ((((((((h_outer * 2) + h_inner) + rh) - 1) >= 0) && ((w + 1) < 5)) ? X[((((((rc * 25) + (h_outer * 10)) + (h_inner * 5)) + (rh * 5)) + w) - 4)] : 0.0f) * W[((((ax1 * 18) + (rc * 9)) + (rh * 3)) + 2)]));
                }
              }
              conv_sum[(((h_outer * 10) + (h_inner * 5)) + w)] = conv_sum_acc_0;
            }
          }
        }
      }
      for (int32_t w = 0; w < 5; ++w) {
        {
          float conv_sum_acc_1_0;
          conv_sum_acc_1_0 = 0.0f;
          for (int32_t rc = 0; rc < 2; ++rc) {
            for (int32_t rh = 0; rh < 3; ++rh) {
              conv_sum_acc_1_0 = (conv_sum_acc_1_0 + (((((rh + 3) < 5) && ((w - 1) >= 0)) ? X[((((rc * 25) + (rh * 5)) + w) + 14)] : 0.0f) * W[(((ax1 * 18) + (rc * 9)) + (rh * 3))]));
              conv_sum_acc_1_0 = (conv_sum_acc_1_0 + ((((rh + 3) < 5) ? X[((((rc * 25) + (rh * 5)) + w) + 15)] : 0.0f) * W[((((ax1 * 18) + (rc * 9)) + (rh * 3)) + 1)]));
              conv_sum_acc_1_0 = (conv_sum_acc_1_0 + (((((rh + 3) < 5) && ((w + 1) < 5)) ? X[((((rc * 25) + (rh * 5)) + w) + 16)] : 0.0f) * W[((((ax1 * 18) + (rc * 9)) + (rh * 3)) + 2)]));
            }
          }
          conv_sum[(w + 20)] = conv_sum_acc_1_0;
        }
      }
      for (int32_t ax2 = 0; ax2 < 5; ++ax2) {
        for (int32_t ax3 = 0; ax3 < 5; ++ax3) {
          out[(((ax1 * 25) + (ax2 * 5)) + ax3)] = tw_max_float32((conv_sum[((ax2 * 5) + ax3)] + bias[ax1]), 0.0f);
        }
      }
    }
  }
  return tw_alloc_failed ? -1 : 0;
}

int32_t tw_call(void **tw_args) { return kernel((float *)tw_args[0], (float *)tw_args[1], (float *)tw_args[2], (float *)tw_args[3]); }

double tw_time(void **tw_args, int32_t tw_number) {
  struct timespec tw_t0, tw_t1;
  clock_gettime(CLOCK_MONOTONIC, &tw_t0);
  for (int32_t tw_n = 0; tw_n < tw_number; ++tw_n) kernel((float *)tw_args[0], (float *)tw_args[1], (float *)tw_args[2], (float *)tw_args[3]);
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
