/* brw.c - BR profiler file export (see brw.h; format: seeds/002, writer side).
 *
 *   [1 | module u16 | len u16 | file]              per source file
 *   [3 | module u16 | line u32 | clause u8]        per line area
 *   [7 | len u8 | function name]
 *   [4 | time spent u64 ns]
 *   [6]
 *
 * Cost: O(rows log files) with one sorted array of distinct file names; no per-line
 * allocation. Does not: write BACKTRACE records (optional in the format; a statistics table
 * has no per-activation stacks).
 */
#include "formats/brw.h"

#include "base/alloc.h"
#include "base/err.h"
#include "formats/br.h"

#include <stdlib.h>
#include <string.h>

typedef struct modname {
  const char *file;
  uint32_t first; /* order of first use (by line handle) */
  uint16_t number;
} modname_t;

static int by_file(const void *a, const void *b) {
  return strcmp(((const modname_t *)a)->file, ((const modname_t *)b)->file);
}

static int by_first(const void *a, const void *b) {
  uint32_t x = ((const modname_t *)a)->first, y = ((const modname_t *)b)->first;
  return x < y ? -1 : x > y;
}

static const char *file_of(const tlc_mapping_t *m, uint32_t handle) {
  const tlc_map_area_t *ma = m ? tlc_mapping_find(m, handle) : NULL;
  return ma ? ma->file : "";
}

static uint16_t module_of(const modname_t *mods, size_t n, const char *file) {
  modname_t key;
  const modname_t *hit;
  key.file = file;
  hit = bsearch(&key, mods, n, sizeof(*mods), by_file);
  return hit ? hit->number : 0;
}

size_t tlc_br_line_areas(const tlc_table_t *t) {
  size_t i, n = 0;
  uint32_t last = TLC_NO_HANDLE;
  for (i = 0; i < t->nrows; i++) {
    const tlc_stat_t *row = &t->rows[i];
    if (row->kind == TLC_ROW_CODE && tlc_handle_area(row->handle) == TLC_AREA_LINE &&
        (n == 0 || row->handle != last)) {
      last = row->handle;
      n++;
    }
  }
  return n;
}

int tlc_br_export(tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m) {
  modname_t *mods = NULL, *order = NULL;
  size_t n = 0, i, u;
  int r = 0;
  if (t->nrows > 0) {
    mods = tlc_malloc(t->nrows * sizeof(*mods));
    if (mods == NULL)
      return TLC_ENOMEM;
  }
  /* distinct files of the observed line areas, numbered by first use */
  for (i = 0; i < t->nrows; i++) {
    const tlc_stat_t *row = &t->rows[i];
    if (row->kind != TLC_ROW_CODE || tlc_handle_area(row->handle) != TLC_AREA_LINE)
      continue;
    mods[n].file = file_of(m, row->handle);
    mods[n].first = (uint32_t)n;
    n++;
  }
  if (n > 0) {
    qsort(mods, n, sizeof(*mods), by_file);
    for (i = 1, u = 1; i < n; i++)
      if (strcmp(mods[i].file, mods[u - 1].file) != 0)
        mods[u++] = mods[i];
      else if (mods[i].first < mods[u - 1].first)
        mods[u - 1].first = mods[i].first;
    n = u;
    if (n > 65535) {
      tlc_free(mods);
      return TLC_ELIMIT;
    }
    order = tlc_malloc(n * sizeof(*order));
    if (order == NULL) {
      tlc_free(mods);
      return TLC_ENOMEM;
    }
    memcpy(order, mods, n * sizeof(*order));
    qsort(order, n, sizeof(*order), by_first);
    for (i = 0; i < n; i++) {
      modname_t key, *hit;
      key.file = order[i].file;
      hit = bsearch(&key, mods, n, sizeof(*mods), by_file);
      hit->number = (uint16_t)(i + 1);
      order[i].number = (uint16_t)(i + 1);
      tlc_br_write_module(o, (uint16_t)(i + 1), order[i].file);
    }
  }
  /* one line entry per line area: its NET time summed over its contexts */
  for (i = 0; i < t->nrows;) {
    const tlc_stat_t *row = &t->rows[i];
    uint32_t h = row->handle;
    uint64_t net = 0;
    const tlc_map_area_t *ma, *fn;
    if (row->kind != TLC_ROW_CODE || tlc_handle_area(h) != TLC_AREA_LINE) {
      i++;
      continue;
    }
    for (; i < t->nrows && t->rows[i].handle == h; i++)
      if (t->rows[i].kind == TLC_ROW_CODE && t->rows[i].context != TLC_CTX_NEUTRAL &&
          t->rows[i].total[TLC_NET] > 0)
        net += (uint64_t)t->rows[i].total[TLC_NET];
    ma = m ? tlc_mapping_find(m, h) : NULL;
    fn = ma && ma->parent != TLC_NO_HANDLE ? tlc_mapping_find(m, ma->parent) : NULL;
    tlc_br_write_current_line(o, module_of(mods, n, ma ? ma->file : ""),
                              ma && ma->has_value ? (uint32_t)ma->value : 0, 0);
    if (fn != NULL)
      tlc_br_write_function(o, fn->name);
    tlc_br_write_time(o, net);
    tlc_br_write_end(o);
  }
  tlc_free(mods);
  tlc_free(order);
  if (r == 0)
    r = o->err;
  return r;
}
