/* Loads an exported tilewright model (libmodel.so) with dlopen, runs it on the
   float32 inputs in INPUTS (concatenated, row-major) and writes the outputs to OUTPUTS.
   Usage: run_model LIBMODEL.so INPUTS OUTPUTS. No Python involved. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: %s libmodel.so inputs.bin outputs.bin\n", argv[0]); return 2; }
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 3; }
  int (*run)(const float **, float **) = (int (*)(const float **, float **))dlsym(lib, "tw_model_run");
  int (*n_in)(void) = (int (*)(void))dlsym(lib, "tw_model_num_inputs");
  int (*n_out)(void) = (int (*)(void))dlsym(lib, "tw_model_num_outputs");
  int64_t (*in_size)(int) = (int64_t (*)(int))dlsym(lib, "tw_model_input_size");
  int64_t (*out_size)(int) = (int64_t (*)(int))dlsym(lib, "tw_model_output_size");
  if (!run || !n_in || !n_out || !in_size || !out_size) { fprintf(stderr, "missing symbols\n"); return 4; }
  FILE *f = fopen(argv[2], "rb");
  if (!f) { perror(argv[2]); return 5; }
  const float *inputs[64];
  float *outputs[64];
  for (int i = 0; i < n_in(); ++i) {
    float *buf = malloc(sizeof(float) * in_size(i));
    if (fread(buf, sizeof(float), in_size(i), f) != (size_t)in_size(i)) { fprintf(stderr, "short input\n"); return 6; }
    inputs[i] = buf;
  }
  fclose(f);
  for (int i = 0; i < n_out(); ++i) outputs[i] = malloc(sizeof(float) * out_size(i));
  int rc = run(inputs, outputs);
  if (rc != 0) { fprintf(stderr, "tw_model_run returned %d\n", rc); return 7; }
  rc = run(inputs, outputs); /* a second run reuses the arena and the loaded weights */
  if (rc != 0) { fprintf(stderr, "second tw_model_run returned %d\n", rc); return 8; }
  f = fopen(argv[3], "wb");
  if (!f) { perror(argv[3]); return 9; }
  for (int i = 0; i < n_out(); ++i) fwrite(outputs[i], sizeof(float), out_size(i), f);
  fclose(f);
  printf("ok %d inputs %d outputs\n", n_in(), n_out());
  return 0;
}
