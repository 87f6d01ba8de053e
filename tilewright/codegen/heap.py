"""How a C kernel holds its large temporaries (a padded copy of its input, a packed operand).

Where such a buffer lies decided a kernel's speed: a tuned T1D kernel re-reading a 3 MB padded
input ran 8.2 ms on huge pages and 11-12 ms on 4 KB ones (Zen 4), and which it got depended on
malloc's state (what the process had freed before), so the tuner measured one kernel and a
benchmark another. So a buffer of LARGE_BYTES or more starts on a huge-page boundary with huge
pages asked for (`madvise`). One made once per call, outside parallel loops, is also kept for
the next call of the same thread (`tw_workspace`), as a compiled model keeps its arena: mapped
once, it stays on the pages it got and costs no page faults per call. `tw_release()` unmaps them
(the tuner's runner calls it after timing each library it loads). Per-thread buffers inside
parallel loops are still allocated per iteration (`tw_alloc_large`)."""

from __future__ import annotations

LARGE_BYTES = 1 << 20
HUGE_PAGE = 2 << 20

HUGE_PAGES = rf"""#if defined(__linux__)
#include <sys/mman.h>
#endif
#define TW_HUGE {HUGE_PAGE}
static size_t tw_huge_size(size_t bytes) {{ return (bytes + TW_HUGE - 1) / TW_HUGE * TW_HUGE; }}
static void tw_advise_huge(void *p, size_t size) {{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p) madvise(p, size, MADV_HUGEPAGE);
#endif
}}"""

ALLOC_LARGE = r"""static void *tw_alloc_large(size_t bytes) {
  size_t size = tw_huge_size(bytes);
  void *p = aligned_alloc(TW_HUGE, size);
  tw_advise_huge(p, size);
  return p;
}"""

_WORKSPACES = r"""static _Thread_local struct { char *at; void *map; size_t len; } tw_ws[SLOTS];
static void *tw_workspace(int slot, size_t bytes) {
  if (!tw_ws[slot].at) {  /* fresh pages: memory the process touched before may be on 4 KB ones */
    size_t size = tw_huge_size(bytes);
#if defined(__linux__)
    void *m = mmap(NULL, size + TW_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    tw_ws[slot].map = m;
    tw_ws[slot].len = size + TW_HUGE;
    tw_ws[slot].at = (char *)(((uintptr_t)m + TW_HUGE - 1) / TW_HUGE * TW_HUGE);
#else
    tw_ws[slot].map = tw_ws[slot].at = (char *)aligned_alloc(TW_HUGE, size);
#endif
    tw_advise_huge(tw_ws[slot].at, size);
  }
  return tw_ws[slot].at;
}
void tw_release(void) {
  for (int i = 0; i < SLOTS; ++i) {
    if (!tw_ws[i].map) continue;
#if defined(__linux__)
    munmap(tw_ws[i].map, tw_ws[i].len);
#else
    free(tw_ws[i].map);
#endif
    tw_ws[i].map = NULL;
    tw_ws[i].at = NULL;
  }
}"""


def workspaces(slots: int) -> str:
    """The per-thread table of `slots` kept buffers, `tw_workspace` and `tw_release` (which every
    library exports: with no slots it does nothing). Needs HUGE_PAGES among the helpers."""
    if not slots:
        return "void tw_release(void) {}"
    return _WORKSPACES.replace("SLOTS", str(slots))
