/* A CUDA driver double for machines without a GPU: a libcuda.so.1 whose entry
 * points cuda-bindings resolves through cuGetProcAddress_v2, as it does on a
 * real driver. Device memory is host memory, streams and events complete at
 * once, and kernels are checked (context current on the calling thread, the
 * function's module loaded in that context, grid and block limits, registers
 * per block, parameter count from the PTX) but never run: outputs keep what
 * was in them. It lets the Python side of the CUDA runtime (argument packing,
 * contexts per thread, streams, events, graphs, error handling, the isolated
 * runner) run in CI against the real bindings.
 *
 * Environment: TW_FAKE_CUDA_DEVICES (count, default 1), TW_FAKE_CUDA_ARCH (90),
 * TW_FAKE_CUDA_REGS (registers per thread every function reports, default 32),
 * TW_FAKE_CUDA_FAULT (a kernel name, or "name:gx" / "*:gx" for one grid width:
 * launching it poisons the context, as an illegal address does), TW_FAKE_CUDA_INIT (the error cuInit returns),
 * TW_FAKE_CUDA_DRIVER_VERSION (13000 for CUDA 13.0), TW_FAKE_CUDA_REFUSE_CUBIN (any value: cubins are refused, PTX is loaded),
 * TW_FAKE_CUDA_LOG (a file: one line per launch, load, capture, ...). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
  OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100, INVALID_DEVICE = 101,
  INVALID_IMAGE = 200, INVALID_CONTEXT = 201, NO_BINARY_FOR_GPU = 209, INVALID_HANDLE = 400, NOT_FOUND = 500,
  ILLEGAL_ADDRESS = 700, LAUNCH_OUT_OF_RESOURCES = 701, SYSTEM_DRIVER_MISMATCH = 803, CAPTURE_UNSUPPORTED = 900
};

#define MAX_DEVICES 8
#define MAX_KERNELS 64

typedef struct { int device; int poisoned; } Ctx;
typedef struct { Ctx *ctx; int n; char names[MAX_KERNELS][256]; int params[MAX_KERNELS]; } Module;
typedef struct { Module *module; int index; } Function;
typedef struct Launch { Function *f; unsigned grid[3], block[3], shared; struct Launch *next; } Launch;
typedef struct { Launch *first, *last; int n; } Graph;
typedef struct { Ctx *ctx; Graph *capture; } Stream;
typedef struct { double t; int recorded; } Event;
typedef struct Alloc { CUdeviceptr p; size_t n; int device; struct Alloc *next; } Alloc;

static int initialised;
static Ctx contexts[MAX_DEVICES];
static __thread Ctx *current;
static Alloc *allocs;

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}
static int devices(void) { return env_int("TW_FAKE_CUDA_DEVICES", 1); }

static void note(const char *fmt, ...) {
  const char *path = getenv("TW_FAKE_CUDA_LOG");
  if (!path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Every call that works in a context: it must be current on this thread and not poisoned. */
static CUresult need_ctx(void) {
  if (!initialised) return NOT_INITIALIZED;
  if (!current) return INVALID_CONTEXT;
  return current->poisoned ? ILLEGAL_ADDRESS : OK;
}

static Alloc *find_alloc(CUdeviceptr p, size_t n) {
  for (Alloc *a = allocs; a; a = a->next)
    if (p >= a->p && p + n <= a->p + a->n) return a;
  return NULL;
}

CUresult cuInit(unsigned flags) {
  (void)flags;
  int err = env_int("TW_FAKE_CUDA_INIT", 0);
  if (err) return err;
  initialised = 1;
  return OK;
}
CUresult cuDriverGetVersion(int *v) { *v = env_int("TW_FAKE_CUDA_DRIVER_VERSION", 13000); return OK; }
CUresult cuDeviceGetCount(int *n) {
  if (!initialised) return NOT_INITIALIZED;
  *n = devices();
  return OK;
}
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  if (!initialised) return NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= devices()) return INVALID_DEVICE;
  *d = ordinal;
  return OK;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  if (d < 0 || d >= devices()) return INVALID_DEVICE;
  snprintf(name, len, "tilewright fake CUDA device %d (kernels do not run)", d);
  return OK;
}

static int registers_per_thread(void) { return env_int("TW_FAKE_CUDA_REGS", 32); }
/* The most threads a block of a kernel using `regs` registers per thread can have: whole warps of
 * registers rounded up to 8 per thread from a 65536-register file, at most 1024. */
static int max_threads(int regs) {
  int per_warp = ((regs + 7) / 8) * 8 * 32;
  int warps = 65536 / per_warp;
  return warps * 32 < 1024 ? warps * 32 : 1024;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
  if (!initialised) return NOT_INITIALIZED;
  if (d < 0 || d >= devices()) return INVALID_DEVICE;
  int arch = env_int("TW_FAKE_CUDA_ARCH", 90);
  switch (attr) {
    case 1: *v = 1024; break;                      /* max threads per block */
    case 2: case 3: *v = 1024; break;              /* max block dim x, y */
    case 4: *v = 64; break;                        /* max block dim z */
    case 5: *v = 2147483647; break;                /* max grid dim x */
    case 6: case 7: *v = 65535; break;             /* max grid dim y, z */
    case 8: *v = 48 * 1024; break;                 /* shared memory per block */
    case 10: *v = 32; break;                       /* warp size */
    case 12: *v = 65536; break;                    /* registers per block */
    case 13: *v = 1980000; break;                  /* clock rate, kHz */
    case 16: *v = 132; break;                      /* multiprocessors */
    case 36: *v = 2619000; break;                  /* memory clock, kHz */
    case 37: *v = 5120; break;                     /* memory bus width */
    case 38: *v = 50 * 1024 * 1024; break;         /* L2 bytes */
    case 39: *v = 2048; break;                     /* threads per multiprocessor */
    case 75: *v = arch / 10; break;                /* compute capability */
    case 76: *v = arch % 10; break;
    case 82: *v = 65536; break;                    /* registers per multiprocessor */
    case 97: *v = 227 * 1024; break;               /* shared memory per block, opt-in */
    default: *v = 0;
  }
  return OK;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d) {
  if (!initialised) return NOT_INITIALIZED;
  if (d < 0 || d >= devices()) return INVALID_DEVICE;
  contexts[d].device = d;
  *ctx = &contexts[d];
  return OK;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice d) { return d >= 0 && d < devices() ? OK : INVALID_DEVICE; }
CUresult cuCtxSetCurrent(void *ctx) { current = ctx; return OK; }
CUresult cuCtxGetCurrent(void **ctx) { *ctx = current; return OK; }
CUresult cuCtxSynchronize(void) { return need_ctx(); }

CUresult cuStreamCreate(void **s, unsigned flags) {
  CUresult e = need_ctx();
  if (e) return e;
  Stream *st = calloc(1, sizeof *st);
  st->ctx = current;
  *s = st;
  note("stream-create flags=%u", flags);
  return OK;
}
/* The legacy (1) and per-thread (2) default streams are handles too. */
static Stream *as_stream(void *s) { return (uintptr_t)s <= 2 ? NULL : (Stream *)s; }
CUresult cuStreamSynchronize(void *s) {
  Stream *st = as_stream(s);
  if (st && st->capture) return CAPTURE_UNSUPPORTED;
  return need_ctx();
}
CUresult cuStreamDestroy(void *s) { free(as_stream(s)); return OK; }
CUresult cuStreamWaitEvent(void *s, void *ev, unsigned flags) {
  (void)s; (void)flags;
  if (!ev) return INVALID_HANDLE;
  note("stream-wait-event");
  return need_ctx();
}

/* Kernels of an image: ".entry name(" in PTX text (with its parameter count), ".text.name" sections
 * of an ELF cubin (parameter count unknown: -1). */
static int parse_module(const char *image, Module *m) {
  if (!memcmp(image, "\x7f" "ELF", 4)) {
    if (getenv("TW_FAKE_CUDA_REFUSE_CUBIN")) return NO_BINARY_FOR_GPU;
    /* a cubin is small; its string table names each kernel's section */
    uint64_t shoff = *(const uint64_t *)(image + 0x28);
    uint16_t shentsize = *(const uint16_t *)(image + 0x3a), shnum = *(const uint16_t *)(image + 0x3c);
    const char *end = image + shoff + (uint64_t)shentsize * shnum;
    for (const char *p = image + 1; p + 7 < end && m->n < MAX_KERNELS; p++) {
      if (p[-1] == 0 && !memcmp(p, ".text.", 6)) {
        snprintf(m->names[m->n], 256, "%s", p + 6);
        m->params[m->n++] = -1;
      }
    }
    return m->n ? OK : INVALID_IMAGE;
  }
  if (image[0] != '/' && image[0] != '.' && image[0] != '\n' && image[0] != ' ') return INVALID_IMAGE;
  for (const char *p = strstr(image, ".entry"); p && m->n < MAX_KERNELS; p = strstr(p + 6, ".entry")) {
    const char *q = p + 6;
    while (*q == ' ' || *q == '\t') q++;
    int len = 0;
    while (q[len] && q[len] != '(' && q[len] != ' ' && q[len] != '\n') len++;
    snprintf(m->names[m->n], 256, "%.*s", len, q);
    const char *open = strchr(q, '('), *close = open ? strchr(open, ')') : NULL;
    int count = 0;
    for (const char *r = open; r && r < close; r = strstr(r + 1, ".param")) {
      if (r != open && r < close) count++;
    }
    m->params[m->n++] = count;
  }
  return m->n ? OK : INVALID_IMAGE;
}

CUresult cuModuleLoadData(void **module, const void *image) {
  CUresult e = need_ctx();
  if (e) return e;
  if (!image) return INVALID_VALUE;
  Module *m = calloc(1, sizeof *m);
  m->ctx = current;
  e = parse_module(image, m);
  if (e) { free(m); return e; }
  note("module-load kernels=%d %s", m->n, m->params[0] < 0 ? "cubin" : "ptx");
  *module = m;
  return OK;
}
CUresult cuModuleUnload(void *module) {
  if (!module) return INVALID_HANDLE;
  note("module-unload");
  free(module);
  return OK;
}
CUresult cuModuleGetFunction(void **f, void *module, const char *name) {
  CUresult e = need_ctx();
  if (e) return e;
  Module *m = module;
  if (!m) return INVALID_HANDLE;
  for (int i = 0; i < m->n; i++) {
    if (!strcmp(m->names[i], name)) {
      Function *fn = calloc(1, sizeof *fn);
      fn->module = m;
      fn->index = i;
      *f = fn;
      return OK;
    }
  }
  return NOT_FOUND;
}
CUresult cuFuncGetAttribute(int *v, int attr, void *f) {
  if (!f) return INVALID_HANDLE;
  int regs = registers_per_thread();
  switch (attr) {
    case 0: *v = max_threads(regs); break;
    case 4: *v = regs; break;
    default: *v = 0;
  }
  return OK;
}
CUresult cuFuncSetAttribute(void *f, int attr, int value) { (void)attr; (void)value; return f ? OK : INVALID_HANDLE; }

static CUresult check_launch(Function *fn, const unsigned grid[3], const unsigned block[3], unsigned shared) {
  if (fn->module->ctx != current) return INVALID_HANDLE;  /* the module was loaded in another context */
  const unsigned grid_max[3] = {2147483647u, 65535u, 65535u}, block_max[3] = {1024u, 1024u, 64u};
  for (int d = 0; d < 3; d++)
    if (grid[d] < 1 || block[d] < 1 || grid[d] > grid_max[d] || block[d] > block_max[d]) return INVALID_VALUE;
  unsigned threads = block[0] * block[1] * block[2];
  if (threads > 1024 || shared > 48 * 1024) return INVALID_VALUE;
  if ((int)threads > max_threads(registers_per_thread())) return LAUNCH_OUT_OF_RESOURCES;
  return OK;
}

static CUresult run_launch(Launch *l) {
  const char *name = l->f->module->names[l->f->index];
  const char *fault = getenv("TW_FAKE_CUDA_FAULT");
  if (fault) {  /* "name", or "name:gx" for only the launches of that grid width ("*:gx": any name) */
    char want[300];
    snprintf(want, sizeof want, strchr(fault, ':') ? "%s:%u" : "%s", fault[0] == '*' ? "*" : name, l->grid[0]);
    if (!strcmp(fault, want)) current->poisoned = 1;  /* reported by the next synchronising call */
  }
  note("launch %s grid=%u,%u,%u block=%u,%u,%u", name, l->grid[0], l->grid[1], l->grid[2], l->block[0],
       l->block[1], l->block[2]);
  return OK;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
  CUresult e = need_ctx();
  if (e) return e;
  Function *fn = f;
  if (!fn) return INVALID_HANDLE;
  if (extra) return INVALID_VALUE;
  Launch l = {fn, {gx, gy, gz}, {bx, by, bz}, shared, NULL};
  if ((e = check_launch(fn, l.grid, l.block, shared))) return e;
  int n = fn->module->params[fn->index];
  if (n > 0 && !params) return INVALID_VALUE;
  for (int i = 0; i < n; i++) {  /* every parameter address must be readable, a pointer argument ours */
    uint64_t value = *(const uint64_t *)params[i];
    Alloc *a = find_alloc(value, 1);
    if (a && a->device != current->device) current->poisoned = 1;
  }
  Stream *st = as_stream(stream);
  if (st && st->capture) {
    Launch *copy = malloc(sizeof *copy);
    *copy = l;
    if (st->capture->last) st->capture->last->next = copy; else st->capture->first = copy;
    st->capture->last = copy;
    st->capture->n++;
    return OK;
  }
  return run_launch(&l);
}

CUresult cuMemAlloc(CUdeviceptr *p, size_t n) {
  CUresult e = need_ctx();
  if (e) return e;
  void *mem = NULL;
  if (posix_memalign(&mem, 256, n ? n : 1)) return OUT_OF_MEMORY;
  Alloc *a = malloc(sizeof *a);
  *a = (Alloc){(CUdeviceptr)(uintptr_t)mem, n, current->device, allocs};
  allocs = a;
  *p = a->p;
  return OK;
}
CUresult cuMemFree(CUdeviceptr p) {
  for (Alloc **a = &allocs; *a; a = &(*a)->next) {
    if ((*a)->p == p) {
      Alloc *dead = *a;
      *a = dead->next;
      free((void *)(uintptr_t)dead->p);
      free(dead);
      return OK;
    }
  }
  return INVALID_VALUE;
}
CUresult cuMemGetInfo(size_t *free_bytes, size_t *total) { *free_bytes = 1ull << 36; *total = 1ull << 37; return OK; }

static CUresult copy(void *dst, const void *src, size_t n, CUdeviceptr dev) {
  CUresult e = need_ctx();
  if (e) return e;
  if (!find_alloc(dev, n)) return INVALID_VALUE;
  memcpy(dst, src, n);
  return OK;
}
CUresult cuMemcpyHtoD(CUdeviceptr d, const void *h, size_t n) { return copy((void *)(uintptr_t)d, h, n, d); }
CUresult cuMemcpyDtoH(void *h, CUdeviceptr d, size_t n) { return copy(h, (void *)(uintptr_t)d, n, d); }
CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void *h, size_t n, void *s) { (void)s; return cuMemcpyHtoD(d, h, n); }
CUresult cuMemcpyDtoHAsync(void *h, CUdeviceptr d, size_t n, void *s) { (void)s; return cuMemcpyDtoH(h, d, n); }
CUresult cuMemcpyDtoD(CUdeviceptr d, CUdeviceptr s, size_t n) {
  if (!find_alloc(s, n)) return INVALID_VALUE;
  return copy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n, d);
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { (void)st; return cuMemcpyDtoD(d, s, n); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *s) {
  (void)s;
  CUresult e = need_ctx();
  if (e) return e;
  if (!find_alloc(d, n)) return INVALID_VALUE;
  memset((void *)(uintptr_t)d, v, n);
  return OK;
}

CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
  Alloc *a = find_alloc(p, 1);
  if (!a) return INVALID_VALUE;
  if (attr != 9) return INVALID_VALUE;  /* only the device ordinal */
  *(int *)data = a->device;
  return OK;
}

CUresult cuEventCreate(void **ev, unsigned flags) {
  (void)flags;
  CUresult e = need_ctx();
  if (e) return e;
  *ev = calloc(1, sizeof(Event));
  return OK;
}
CUresult cuEventRecord(void *ev, void *s) {
  CUresult e = need_ctx();
  if (e) return e;
  if (!ev) return INVALID_HANDLE;
  (void)s;
  ((Event *)ev)->t = now();
  ((Event *)ev)->recorded = 1;
  note("event-record");
  return OK;
}
CUresult cuEventSynchronize(void *ev) { return ev ? need_ctx() : INVALID_HANDLE; }
CUresult cuEventElapsedTime(float *ms, void *a, void *b) {
  Event *x = a, *y = b;
  if (!x || !y || !x->recorded || !y->recorded) return INVALID_HANDLE;
  *ms = (float)((y->t - x->t) * 1e3);
  return OK;
}
CUresult cuEventDestroy(void *ev) { free(ev); return OK; }

CUresult cuStreamBeginCapture(void *s, int mode) {
  (void)mode;
  Stream *st = as_stream(s);
  if (!st) return CAPTURE_UNSUPPORTED;  /* the legacy default stream cannot be captured */
  if (st->capture) return INVALID_VALUE;
  st->capture = calloc(1, sizeof(Graph));
  note("capture-begin");
  return OK;
}
CUresult cuStreamEndCapture(void *s, void **graph) {
  Stream *st = as_stream(s);
  if (!st || !st->capture) return INVALID_VALUE;
  *graph = st->capture;
  note("capture-end nodes=%d", st->capture->n);
  st->capture = NULL;
  return OK;
}
/* An instantiated graph holds its own copy of the launches: the graph may be destroyed after. */
static void copy_launches(Graph *dst, const Graph *src) {
  for (Launch *l = dst->first, *next; l; l = next) { next = l->next; free(l); }
  dst->first = dst->last = NULL;
  dst->n = 0;
  for (const Launch *l = src->first; l; l = l->next) {
    Launch *copy = malloc(sizeof *copy);
    *copy = *l;
    copy->next = NULL;
    if (dst->last) dst->last->next = copy; else dst->first = copy;
    dst->last = copy;
    dst->n++;
  }
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
  (void)flags;
  if (!graph) return INVALID_VALUE;
  Graph *g = calloc(1, sizeof *g);
  copy_launches(g, graph);
  *exec = g;
  note("graph-instantiate nodes=%d", g->n);
  return OK;
}
/* Takes the new graph's parameters where its launches match the instantiated ones (same functions and
 * shapes), as the driver does for kernel nodes; else refuses and the caller instantiates anew. */
CUresult cuGraphExecUpdate(void *exec, void *graph, void *info) {
  (void)info;
  Graph *e = exec, *g = graph;
  if (!e || !g) return INVALID_VALUE;
  const Launch *a = e->first, *b = g->first;
  for (; a && b; a = a->next, b = b->next)
    if (a->f->module != b->f->module || a->f->index != b->f->index || memcmp(a->grid, b->grid, sizeof a->grid) ||
        memcmp(a->block, b->block, sizeof a->block))
      return 910; /* CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE */
  if (a || b) return 910;
  copy_launches(e, g);
  note("graph-update nodes=%d", e->n);
  return OK;
}
CUresult cuGraphLaunch(void *exec, void *s) {
  CUresult e = need_ctx();
  if (e) return e;
  Graph *g = exec;
  if (!g) return INVALID_HANDLE;
  (void)s;
  note("graph-launch nodes=%d", g->n);
  for (Launch *l = g->first; l; l = l->next)
    if ((e = run_launch(l))) return e;
  return OK;
}
CUresult cuGraphDestroy(void *graph);
CUresult cuGraphExecDestroy(void *exec) { return exec ? cuGraphDestroy(exec) : INVALID_VALUE; }
CUresult cuGraphDestroy(void *graph) {
  Graph *g = graph;
  if (!g) return INVALID_VALUE;
  for (Launch *l = g->first, *next; l; l = next) { next = l->next; free(l); }
  free(g);
  return OK;
}

static const char *error_name(CUresult e) {
  switch (e) {
    case OK: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CAPTURE_UNSUPPORTED: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case 910: return "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE";
    default: return NULL;
  }
}
CUresult cuGetErrorName(CUresult e, const char **s) {
  *s = error_name(e);
  return *s ? OK : INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult e, const char **s) { return cuGetErrorName(e, s); }

typedef struct { const char *name; void *fn; } Entry;
static const Entry entries[] = {
#define E(f) {#f, (void *)f}
  E(cuInit), E(cuDriverGetVersion), E(cuDeviceGetCount), E(cuDeviceGet), E(cuDeviceGetName),
  E(cuDeviceGetAttribute), E(cuDevicePrimaryCtxRetain), E(cuDevicePrimaryCtxRelease), E(cuCtxSetCurrent),
  E(cuCtxGetCurrent), E(cuCtxSynchronize), E(cuStreamCreate), E(cuStreamSynchronize), E(cuStreamDestroy),
  E(cuStreamWaitEvent), E(cuModuleLoadData), E(cuModuleUnload), E(cuModuleGetFunction), E(cuFuncGetAttribute),
  E(cuFuncSetAttribute), E(cuLaunchKernel), E(cuMemAlloc), E(cuMemFree), E(cuMemGetInfo), E(cuMemcpyHtoD),
  E(cuMemcpyDtoH), E(cuMemcpyHtoDAsync), E(cuMemcpyDtoHAsync), E(cuMemcpyDtoD), E(cuMemcpyDtoDAsync),
  E(cuMemsetD8Async), E(cuPointerGetAttribute), E(cuEventCreate), E(cuEventRecord), E(cuEventSynchronize),
  E(cuEventElapsedTime), E(cuEventDestroy), E(cuStreamBeginCapture), E(cuStreamEndCapture),
  E(cuGraphInstantiateWithFlags), E(cuGraphExecUpdate), E(cuGraphLaunch), E(cuGraphExecDestroy), E(cuGraphDestroy),
  E(cuGetErrorName),
  E(cuGetErrorString),
#undef E
  {"cuGraphInstantiate", (void *)cuGraphInstantiateWithFlags},
};

/* cuda-bindings asks for every entry point by its base name and the CUDA version of its ABI; this
 * double has one ABI per name (the newest, as cuda.h maps them). */
CUresult cuGetProcAddress_v2(const char *symbol, void **fn, int version, unsigned long long flags, int *status) {
  (void)version; (void)flags;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    if (!strcmp(entries[i].name, symbol)) {
      *fn = entries[i].fn;
      if (status) *status = 0;
      return OK;
    }
  }
  *fn = NULL;
  if (status) *status = 1;
  return NOT_FOUND;
}
