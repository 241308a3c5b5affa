/* fuzz_mapping_text1.c - libFuzzer harness for the Text1 mapping reader: any bytes are parsed
 * (with a small cap on entries), the mapping is finished and looked up; must never crash, leak,
 * read out of bounds or take more than linear time. Every mapping it reads is then written
 * back with a format holding every mapping macro, each field quoted as mapping.h asks, and must
 * read back identically. */
#include "base/alloc.h"
#include "formats/mapping.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct buf {
  char *p;
  size_t n, cap;
} buf_t;

static void put(buf_t *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t nc = (b->n + n + 1) * 2;
    b->p = realloc(b->p, nc);
    if (b->p == NULL)
      abort();
    b->cap = nc;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

static void field(buf_t *b, const char *s, char sep) {
  if (!tlc_mapping_field_needs_quotes(s, sep)) {
    put(b, s, strlen(s));
    return;
  }
  put(b, "\"", 1);
  for (; *s; s++) {
    put(b, s, 1);
    if (*s == '"')
      put(b, "\"", 1);
  }
  put(b, "\"", 1);
}

static void hex(buf_t *b, uint64_t v, int present) {
  char t[24];
  int i = 23;
  if (!present)
    return;
  t[i] = '\0';
  do {
    t[--i] = "0123456789ABCDEF"[v & 15];
    v >>= 4;
  } while (v);
  put(b, t + i, (size_t)(23 - i));
}

/* Names with a NUL cannot exist (C strings); everything else must round-trip. */
static void round_trip(const tlc_mapping_t *m) {
  buf_t b = { NULL, 0, 0 };
  tlc_mapping_t back;
  tlc_parse_err_t e;
  size_t i;
  put(&b,
      "* HANDLE(Functions) %HANDLE%;%HANDLE.PARENT%;%HANDLE.STATE%;%VALUE%;%NAME%;"
      "%FILE%;%VALUE.TYPE%;%VALUE.UNIT%;%PATH%\n",
      strlen("* HANDLE(Functions) %HANDLE%;%HANDLE.PARENT%;%HANDLE.STATE%;%VALUE%;%NAME%;"
             "%FILE%;%VALUE.TYPE%;%VALUE.UNIT%;%PATH%\n"));
  for (i = 0; i < m->nareas; i++) {
    const tlc_map_area_t *a = &m->areas[i];
    hex(&b, a->handle, 1);
    put(&b, ";", 1);
    hex(&b, a->parent, a->parent != TLC_NO_HANDLE);
    put(&b, ";", 1);
    hex(&b, a->state_handle, a->state_handle != TLC_NO_HANDLE);
    put(&b, ";", 1);
    hex(&b, a->value, a->has_value);
    put(&b, ";", 1);
    field(&b, a->name, ';');
    put(&b, ";", 1);
    field(&b, a->file, ';');
    put(&b, ";", 1);
    field(&b, a->value_type, ';');
    put(&b, ";", 1);
    field(&b, a->unit, ';');
    put(&b, ";", 1);
    field(&b, a->path, '\0');
    put(&b, "\n", 1);
  }
  tlc_mapping_init(&back);
  if (tlc_mapping_parse_text1(&back, b.p, b.n, &e) != 0)
    abort();
  tlc_mapping_finish(&back);
  if (back.nareas != m->nareas)
    abort();
  for (i = 0; i < m->nareas; i++) {
    const tlc_map_area_t *x = &m->areas[i], *y = &back.areas[i];
    if (x->handle != y->handle || x->parent != y->parent || x->state_handle != y->state_handle ||
        x->has_value != y->has_value || x->value != y->value || strcmp(x->name, y->name) != 0 ||
        strcmp(x->file, y->file) != 0 || strcmp(x->value_type, y->value_type) != 0 ||
        strcmp(x->unit, y->unit) != 0 || strcmp(x->path, y->path) != 0)
      abort();
  }
  tlc_mapping_fini(&back);
  free(b.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_mapping_t m;
  tlc_parse_err_t e;
  tlc_mapping_init(&m);
  m.max_areas = 4096;
  if (tlc_mapping_parse_text1(&m, (const char *)data, size, &e) == 0) {
    size_t i;
    tlc_mapping_finish(&m);
    for (i = 0; i < m.nareas; i++) {
      if (tlc_mapping_find(&m, m.areas[i].handle) == NULL)
        abort();
      if (m.areas[i].has_value &&
          tlc_mapping_find_value(&m, m.areas[i].handle, m.areas[i].value) == NULL)
        abort();
    }
    for (i = 0; i < m.ncontexts; i++)
      if (tlc_mapping_ctx_name(&m, m.contexts[i].handle) == NULL)
        abort();
    round_trip(&m);
  } else if (e.reason[0] == '\0') {
    abort(); /* every failure names its reason */
  }
  tlc_mapping_fini(&m);
  return 0;
}
