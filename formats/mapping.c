/* mapping.c - area names and properties read from a winIDEA Text1 or XML export (mapping.h).
 *
 * Text1: only the mapping sections are read; every other section is skipped line by line
 * without looking inside (TIMELINE can be gigabytes):
 *
 *   * CONTEXTS %NAME%,%HANDLE%                 <- header: section, then the entry format
 *   ID_TASK_1MS,0x0                            <- entries parsed against that format
 *   * HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%
 *   00000000,main,
 *   10000000,{,51                              <- line area: VALUE = line number (hex)
 *   00000001,"TestStatic1.c"#StaticFunc,       <- starts with a quote, read raw (mapping.h)
 *   * HANDLE(Data) %HANDLE%,%NAME%,%VALUE%
 *   20000000,TestStatic1##s_cStatic,
 *   30000000,,0                                <- state entries of the variable above
 *   * STATISTICS(Functions) ... / * TIMELINE ... <- skipped
 *
 * The header's format is compiled into tokens (literals and macros); an entry is matched token
 * by token (field rules in mapping.h). A quoted field may span lines. A failed quoted scan is
 * remembered (start, closing quote) so that a later scan starting inside the same stretch ends
 * at once: every byte is scanned O(1) times and the whole read is O(input), even for hostile
 * inputs full of unbalanced quotes. Limitation: in a skipped section a line that starts with
 * `*` always starts a new section (the reader does not parse those entries' quoting).
 *
 * XML: the `<Mapping>` node of a tlcap ProfilerExport (schema: docs/xml-format.md and
 * formats/ProfilerExport.xsd), read with expat through tlc_malloc. Other elements are skipped.
 * Document type declarations are refused outright, so no entity can be declared and nothing
 * expands; expat's amplification guard is set as well where the headers expose it.
 *
 * Memory: each area's five strings live in one block (name\0file\0value_type\0unit\0path\0)
 * owned through `name`; a context owns its name. The number of areas and of contexts is capped
 * by max_areas (default 1,000,000). tlc_mapping_finish() sorts with qsort: O(n log n).
 *
 * Does not: check that handles of a HANDLE(Functions) section really are code areas (the
 * handle's top nibble decides the area type), or read statistics or timelines.
 */
#include "formats/mapping.h"
#include "formats/xmlrun.h"

#include "formats/stats.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/htab.h"

#include <expat.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_AREAS 1000000u
#define T1_MAX_FORMAT     1024
#define T1_MAX_TOKENS     128
#define XML_MAX_DEPTH     256

static size_t cap_of(const tlc_mapping_t *m) {
  return m->max_areas ? m->max_areas : DEFAULT_MAX_AREAS;
}

void tlc_parse_err_set(tlc_parse_err_t *e, uint64_t line, uint64_t off, const char *fmt, ...) {
  va_list ap;
  if (e == NULL)
    return;
  e->line = line;
  e->offset = off;
  va_start(ap, fmt);
  vsnprintf(e->reason, sizeof(e->reason), fmt, ap);
  va_end(ap);
}

/* ---------------------------------------------------------------- the mapping itself */

void tlc_mapping_init(tlc_mapping_t *m) {
  memset(m, 0, sizeof(*m));
}

void tlc_mapping_fini(tlc_mapping_t *m) {
  size_t i;
  for (i = 0; i < m->nareas; i++)
    tlc_free(m->areas[i].name); /* the block holding all five strings */
  for (i = 0; i < m->ncontexts; i++)
    tlc_free(m->contexts[i].name);
  tlc_free(m->areas);
  tlc_free(m->contexts);
  m->areas = NULL;
  m->contexts = NULL;
  m->nareas = m->capareas = m->ncontexts = m->capcontexts = 0;
}

/* Adds an area whose strings are given as (pointer, length); s[i] may be NULL for "".
 * Order: name, file, value_type, unit, path. */
static int add_area_n(tlc_mapping_t *m, const tlc_map_area_t *a, const char *const s[5],
                      const size_t n[5]) {
  size_t total = 5, i;
  char *block, *p;
  char **dst[5];
  tlc_map_area_t *x, *na;
  if (m->nareas >= cap_of(m))
    return TLC_ELIMIT;
  for (i = 0; i < 5; i++)
    total += s[i] ? n[i] : 0;
  if ((na = tlc_grow(m->areas, &m->capareas, m->nareas + 1, sizeof(*na), 64)) == NULL)
    return TLC_ENOMEM;
  m->areas = na;
  block = tlc_malloc(total);
  if (block == NULL)
    return TLC_ENOMEM;
  x = &m->areas[m->nareas];
  *x = *a;
  dst[0] = &x->name;
  dst[1] = &x->file;
  dst[2] = &x->value_type;
  dst[3] = &x->unit;
  dst[4] = &x->path;
  for (p = block, i = 0; i < 5; i++) {
    size_t len = s[i] ? n[i] : 0;
    if (len)
      memcpy(p, s[i], len);
    p[len] = '\0';
    *dst[i] = p;
    p += len + 1;
  }
  m->nareas++;
  return 0;
}

int tlc_mapping_add(tlc_mapping_t *m, const tlc_map_area_t *a) {
  const char *s[5] = { a->name, a->file, a->value_type, a->unit, a->path };
  size_t n[5], i;
  for (i = 0; i < 5; i++)
    n[i] = s[i] ? strlen(s[i]) : 0;
  return add_area_n(m, a, s, n);
}

static int add_ctx_n(tlc_mapping_t *m, uint64_t handle, const char *name, size_t len) {
  char *s;
  tlc_map_ctx_t *nc;
  if (m->ncontexts >= cap_of(m))
    return TLC_ELIMIT;
  if ((nc = tlc_grow(m->contexts, &m->capcontexts, m->ncontexts + 1, sizeof(*nc), 64)) == NULL)
    return TLC_ENOMEM;
  m->contexts = nc;
  s = tlc_strndup(name ? name : "", name ? len : 0);
  if (s == NULL)
    return TLC_ENOMEM;
  m->contexts[m->ncontexts].handle = handle;
  m->contexts[m->ncontexts].name = s;
  m->ncontexts++;
  return 0;
}

int tlc_mapping_add_ctx(tlc_mapping_t *m, uint64_t handle, const char *name) {
  return add_ctx_n(m, handle, name, name ? strlen(name) : 0);
}

static int key_cmp(uint32_t h, int hv, uint64_t v, const tlc_map_area_t *b) {
  if (h != b->handle)
    return h < b->handle ? -1 : 1;
  if (hv != (b->has_value != 0))
    return hv ? 1 : -1;
  if (hv && v != b->value)
    return v < b->value ? -1 : 1;
  return 0;
}

static int area_cmp(const void *pa, const void *pb) {
  const tlc_map_area_t *a = pa, *b = pb;
  int c = key_cmp(a->handle, a->has_value != 0, a->value, b);
  if (c == 0)
    c = strcmp(a->name, b->name);
  if (c == 0)
    c = strcmp(a->file, b->file);
  if (c == 0)
    c = a->parent != b->parent ? (a->parent < b->parent ? -1 : 1) : 0;
  if (c == 0)
    c = a->state_handle != b->state_handle ? (a->state_handle < b->state_handle ? -1 : 1) : 0;
  if (c == 0)
    c = strcmp(a->value_type, b->value_type);
  if (c == 0)
    c = strcmp(a->unit, b->unit);
  if (c == 0)
    c = strcmp(a->path, b->path);
  return c; /* 0 only for entries equal in every field: their order does not matter */
}

static int ctx_cmp(const void *pa, const void *pb) {
  const tlc_map_ctx_t *a = pa, *b = pb;
  if (a->handle != b->handle)
    return a->handle < b->handle ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* First index whose key is >= (h, hv, v). */
static size_t lower(const tlc_mapping_t *m, uint32_t h, int hv, uint64_t v) {
  size_t lo = 0, hi = m->nareas;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (key_cmp(h, hv, v, &m->areas[mid]) > 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* One pass of link completion; returns whether anything changed. */
static int complete_links(tlc_mapping_t *m) {
  size_t i, j;
  int changed = 0;
  /* state -> variable: every entry of a variable named as a state's parent gets that state's
   * handle (every entry: duplicates must not depend on the sort order) */
  for (i = 0; i < m->nareas; i++) {
    const tlc_map_area_t *s = &m->areas[i];
    unsigned t = s->handle >> 28;
    if ((t == 3 || t == 5) && s->parent != TLC_NO_HANDLE && (s->parent >> 28) == t - 1) {
      for (j = lower(m, s->parent, 0, 0); j < m->nareas && m->areas[j].handle == s->parent; j++)
        if (m->areas[j].state_handle == TLC_NO_HANDLE) {
          m->areas[j].state_handle = s->handle;
          changed = 1;
        }
    }
  }
  /* variable -> states: states of a variable's HANDLE.STATE get it as parent */
  for (i = 0; i < m->nareas; i++) {
    const tlc_map_area_t *v = &m->areas[i];
    unsigned t = v->handle >> 28;
    if ((t == 2 || t == 4) && v->state_handle != TLC_NO_HANDLE &&
        (v->state_handle >> 28) == t + 1) {
      for (j = lower(m, v->state_handle, 0, 0);
           j < m->nareas && m->areas[j].handle == v->state_handle; j++)
        if (m->areas[j].parent == TLC_NO_HANDLE) {
          m->areas[j].parent = v->handle;
          changed = 1;
        }
    }
  }
  return changed;
}

void tlc_mapping_finish(tlc_mapping_t *m) {
  int changed = 0, pass;
  if (m->nareas > 1)
    qsort(m->areas, m->nareas, sizeof(*m->areas), area_cmp);
  if (m->ncontexts > 1)
    qsort(m->contexts, m->ncontexts, sizeof(*m->contexts), ctx_cmp);
  /* a parent set by the second half of a pass can give variables their state in the next one;
   * links only go from absent to present, and three passes reach the fixed point */
  for (pass = 0; pass < 3 && complete_links(m); pass++)
    changed = 1;
  /* the links are sort keys of last resort: sort again so that equal mappings come out in
   * one order, whichever links were written and which were completed here */
  if (changed && m->nareas > 1)
    qsort(m->areas, m->nareas, sizeof(*m->areas), area_cmp);
}

const tlc_map_area_t *tlc_mapping_find(const tlc_mapping_t *m, uint32_t handle) {
  size_t i = lower(m, handle, 0, 0);
  return i < m->nareas && m->areas[i].handle == handle ? &m->areas[i] : NULL;
}

const tlc_map_area_t *tlc_mapping_find_value(const tlc_mapping_t *m, uint32_t handle,
                                             uint64_t value) {
  size_t i = lower(m, handle, 1, value);
  if (i < m->nareas && key_cmp(handle, 1, value, &m->areas[i]) == 0)
    return &m->areas[i];
  return NULL;
}

const char *tlc_mapping_ctx_name(const tlc_mapping_t *m, uint64_t handle) {
  size_t lo = 0, hi = m->ncontexts;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->contexts[mid].handle < handle)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < m->ncontexts && m->contexts[lo].handle == handle ? m->contexts[lo].name : NULL;
}

int tlc_mapping_field_needs_quotes(const char *s, char sep) {
  size_t n = strlen(s), j;
  const char *p;
  for (p = s; *p; p++)
    if ((sep != '\0' && *p == sep) || *p == '\n' || *p == '\r')
      return 1;
  if (n == 0 || s[0] != '"')
    return 0;
  /* starts with a quote: it reads back raw only if the quoted scan stops at a single quote
   * before the last character (that quote is then followed by a field character) */
  for (j = 1; j < n; j++) {
    if (s[j] != '"')
      continue;
    if (j + 1 < n && s[j + 1] == '"') {
      j++;
      continue;
    }
    return j == n - 1;
  }
  return 1;
}

/* ---------------------------------------------------------------- numbers */

static int is_blank(char c) {
  return c == ' ' || c == '\t';
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Parses blanks, optional 0x, hex digits, blanks: the whole of s[0..n). Returns 1 (value in
 * *v), 0 when empty or blank, -1 when malformed, -2 when above `max`. */
static int parse_hex(const char *s, size_t n, uint64_t max, uint64_t *v) {
  size_t i = 0, e = n, digits = 0;
  uint64_t x = 0;
  while (i < e && is_blank(s[i]))
    i++;
  while (e > i && is_blank(s[e - 1]))
    e--;
  if (i == e)
    return 0;
  if (e - i > 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X'))
    i += 2;
  for (; i < e; i++, digits++) {
    int d = hexval(s[i]);
    if (d < 0)
      return -1;
    if (x > (max >> 4) || (x << 4) + (uint64_t)d > max)
      return -2;
    x = (x << 4) | (uint64_t)d;
  }
  if (digits == 0)
    return -1;
  *v = x;
  return 1;
}

/* ---------------------------------------------------------------- Text1 */

enum {
  F_OTHER = 0,
  F_HANDLE,
  F_PARENT,
  F_STATE,
  F_NAME,
  F_NAME_PARENT,
  F_VALUE,
  F_VALUE_TYPE,
  F_UNIT,
  F_FILE,
  F_PATH,
  F_NFIELDS
};

static const char *const field_names[F_NFIELDS] = {
  "",      "HANDLE",     "HANDLE.PARENT", "HANDLE.STATE", "NAME", "NAME.PARENT",
  "VALUE", "VALUE.TYPE", "VALUE.UNIT",    "FILE",         "PATH"
};

static int is_number_field(unsigned f) {
  return f == F_HANDLE || f == F_PARENT || f == F_STATE || f == F_VALUE;
}

typedef struct t1tok {
  uint8_t is_lit;
  uint8_t field;
  uint16_t off, len; /* literal text in fmt.lit */
} t1tok_t;

typedef struct t1fmt {
  char lit[T1_MAX_FORMAT];
  t1tok_t tok[T1_MAX_TOKENS];
  unsigned ntok;
  unsigned present; /* bit per field */
} t1fmt_t;

enum { SEC_SKIP = 0, SEC_HANDLE, SEC_CONTEXTS };

/* One field of the entry being read: either in the input or in the scratch buffer. */
typedef struct fval {
  uint8_t set, in_scratch;
  size_t off, len;
} fval_t;

typedef struct t1 {
  tlc_mapping_t *m;
  const char *b;
  size_t n;
  uint64_t line;
  tlc_parse_err_t *err;
  t1fmt_t fmt;
  int sec;
  int found; /* a mapping section was seen */
  /* memo of the last failed quoted scan: from memo_s, it closed at memo_c (n: never) */
  size_t memo_s, memo_c;
  int memo_ok;
  char *scratch;
  size_t slen, scap;
  fval_t f[F_NFIELDS];
  /* state inference: index + 1 of the variable that the next state entry may belong to */
  size_t last_var;
  /* NAME.PARENT index: hash of an area's name -> the area's index */
  tlc_htab_t nidx;
} t1_t;

static int t1_err(t1_t *t, size_t off, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int t1_err(t1_t *t, size_t off, int code, const char *fmt, ...) {
  va_list ap;
  if (t->err != NULL) {
    t->err->line = t->line;
    t->err->offset = off;
    va_start(ap, fmt);
    vsnprintf(t->err->reason, sizeof(t->err->reason), fmt, ap);
    va_end(ap);
  }
  return code;
}

static size_t line_end(const t1_t *t, size_t p) {
  const char *q = p < t->n ? memchr(t->b + p, '\n', t->n - p) : NULL;
  return q ? (size_t)(q - t->b) : t->n;
}

static int ieq(const char *a, size_t n, const char *b) {
  size_t i;
  if (strlen(b) != n)
    return 0;
  for (i = 0; i < n; i++) {
    char x = a[i], y = b[i];
    if (x >= 'a' && x <= 'z')
      x = (char)(x - 32);
    if (y >= 'a' && y <= 'z')
      y = (char)(y - 32);
    if (x != y)
      return 0;
  }
  return 1;
}

static unsigned field_id(const char *s, size_t n) {
  unsigned i;
  for (i = 1; i < F_NFIELDS; i++)
    if (strlen(field_names[i]) == n && memcmp(field_names[i], s, n) == 0)
      return i;
  return F_OTHER;
}

/* Compiles the header's entry format s[0..n) into t->fmt. */
static int compile(t1_t *t, size_t off, const char *s, size_t n) {
  t1fmt_t *f = &t->fmt;
  size_t i = 0, litn = 0;
  unsigned k;
  f->ntok = 0;
  f->present = 0;
  while (i < n) {
    if (s[i] == '%' && !(i + 1 < n && s[i + 1] == '%')) {
      const char *e = memchr(s + i + 1, '%', n - i - 1);
      t1tok_t *tk;
      if (e == NULL)
        return t1_err(t, off + i, TLC_ESYNTAX, "entry format: unterminated macro at column %zu",
                      i + 1);
      if (f->ntok == T1_MAX_TOKENS)
        return t1_err(t, off, TLC_ESYNTAX, "entry format has more than %d fields", T1_MAX_TOKENS);
      tk = &f->tok[f->ntok++];
      tk->is_lit = 0;
      tk->field = (uint8_t)field_id(s + i + 1, (size_t)(e - s - i - 1));
      tk->off = tk->len = 0;
      if (tk->field != F_OTHER)
        f->present |= 1u << tk->field;
      i = (size_t)(e - s) + 1;
      continue;
    }
    /* literal text, with %% as a percent sign; merged with a preceding literal */
    if (litn == sizeof(f->lit))
      return t1_err(t, off, TLC_ESYNTAX, "entry format is longer than %d bytes", T1_MAX_FORMAT);
    if (f->ntok == 0 || !f->tok[f->ntok - 1].is_lit) {
      if (f->ntok == T1_MAX_TOKENS)
        return t1_err(t, off, TLC_ESYNTAX, "entry format has more than %d fields", T1_MAX_TOKENS);
      f->tok[f->ntok].is_lit = 1;
      f->tok[f->ntok].field = 0;
      f->tok[f->ntok].off = (uint16_t)litn;
      f->tok[f->ntok].len = 0;
      f->ntok++;
    }
    f->lit[litn++] = s[i];
    f->tok[f->ntok - 1].len++;
    i += s[i] == '%' ? 2 : 1;
  }
  for (k = 0; k < f->ntok; k++) {
    const t1tok_t *tk = &f->tok[k];
    if (!tk->is_lit && k + 1 < f->ntok && !f->tok[k + 1].is_lit && !is_number_field(tk->field))
      return t1_err(t, off, TLC_ESYNTAX,
                    "entry format: macro %%%s%% must be followed by a separator",
                    tk->field ? field_names[tk->field] : "(text)");
  }
  if (!(f->present & (1u << F_HANDLE)))
    return t1_err(t, off, TLC_ESYNTAX, "entry format has no %%HANDLE%% macro");
  return 0;
}

/* Reads a section header line [p, eol). */
static int header(t1_t *t, size_t p, size_t eol) {
  const char *b = t->b;
  size_t i = p + 1, w, e = eol, fs;
  int r;
  if (e > p && b[e - 1] == '\r')
    e--;
  while (i < e && is_blank(b[i]))
    i++;
  w = i;
  while (i < e && ((b[i] >= 'A' && b[i] <= 'Z') || (b[i] >= 'a' && b[i] <= 'z')))
    i++;
  t->sec = SEC_SKIP;
  t->last_var = 0;
  tlc_htab_clear(&t->nidx);
  if (ieq(b + w, i - w, "HANDLE")) {
    const char *cl = i < e && b[i] == '(' ? memchr(b + i, ')', e - i) : NULL;
    if (cl == NULL)
      return t1_err(t, p, TLC_ESYNTAX, "HANDLE section header without (class)");
    fs = (size_t)(cl - b) + 1;
    t->sec = SEC_HANDLE;
  } else if (ieq(b + w, i - w, "CONTEXTS")) {
    fs = i;
    t->sec = SEC_CONTEXTS;
  } else {
    return 0; /* INFO, STATISTICS, TIMELINE, anything else: skipped */
  }
  if (fs < e && is_blank(b[fs]))
    fs++;
  if (fs >= e)
    return t1_err(t, p, TLC_ESYNTAX, "section header has no entry format");
  r = compile(t, fs, b + fs, e - fs);
  if (r < 0)
    return r;
  t->found = 1;
  return 0;
}

/* Position of the quote closing the quoted field opened at q, or t->n when there is none. */
static size_t qclose(t1_t *t, size_t q) {
  const char *b = t->b;
  size_t n = t->n, j = q + 1;
  if (t->memo_ok && q > t->memo_s && q < t->memo_c) {
    /* Inside the stretch of an earlier scan that ran to memo_c: once past the run of quotes
     * at q+1, this scan sees the same characters paired the same way, so it ends there too. */
    while (j < n && b[j] == '"') {
      if (j + 1 < n && b[j + 1] == '"')
        j += 2;
      else
        return j;
    }
    return t->memo_c;
  }
  while (j < n) {
    const char *x = memchr(b + j, '"', n - j);
    if (x == NULL)
      return n;
    j = (size_t)(x - b);
    if (j + 1 < n && b[j + 1] == '"') {
      j += 2;
      continue;
    }
    return j;
  }
  return n;
}

static int scratch_reserve(t1_t *t, size_t more) {
  size_t nc;
  char *p;
  if (t->scap - t->slen >= more)
    return 0;
  nc = t->scap ? t->scap : 256;
  while (nc - t->slen < more) {
    if (nc > SIZE_MAX / 2)
      return TLC_ENOMEM;
    nc *= 2;
  }
  p = tlc_realloc(t->scratch, nc);
  if (p == NULL)
    return TLC_ENOMEM;
  t->scratch = p;
  t->scap = nc;
  return 0;
}

/* Does the input at p continue with the literal tk (or, tk NULL, end the line)? */
static int follows(const t1_t *t, size_t p, const t1tok_t *tk) {
  if (tk == NULL)
    return p == t->n || t->b[p] == '\n' ||
           (t->b[p] == '\r' && (p + 1 == t->n || t->b[p + 1] == '\n'));
  return t->n - p >= tk->len && memcmp(t->b + p, t->fmt.lit + tk->off, tk->len) == 0;
}

static size_t column(const t1_t *t, size_t p) {
  size_t s = p;
  while (s > 0 && t->b[s - 1] != '\n')
    s--;
  return p - s + 1;
}

/* Reads one entry starting at *pp against t->fmt; on success *pp is past its line break. */
static int read_entry(t1_t *t, size_t *pp) {
  const t1fmt_t *f = &t->fmt;
  const char *b = t->b;
  size_t p = *pp, eol = line_end(t, p);
  unsigned k;
  int r;
  memset(t->f, 0, sizeof(t->f));
  t->slen = 0;
  for (k = 0; k < f->ntok; k++) {
    const t1tok_t *tk = &f->tok[k];
    const t1tok_t *next = k + 1 < f->ntok ? &f->tok[k + 1] : NULL;
    size_t e = eol;
    fval_t *fv = &t->f[tk->field];
    if (e > p && b[e - 1] == '\r')
      e--;
    if (tk->is_lit) {
      if (eol - p < tk->len || memcmp(b + p, f->lit + tk->off, tk->len) != 0)
        return t1_err(t, p, TLC_ESYNTAX, "expected \"%.*s\" at column %zu", (int)tk->len,
                      f->lit + tk->off, column(t, p));
      p += tk->len;
      continue;
    }
    if (next != NULL && !next->is_lit) { /* a number directly followed by a macro */
      size_t s = p, maxd = tk->field == F_VALUE || t->sec == SEC_CONTEXTS ? 16 : 8, d = 0;
      while (p < e && is_blank(b[p]))
        p++;
      if (e - p > 2 && b[p] == '0' && (b[p + 1] == 'x' || b[p + 1] == 'X') && hexval(b[p + 2]) >= 0)
        p += 2;
      while (p < e && d < maxd && hexval(b[p]) >= 0)
        p++, d++;
      fv->set = 1;
      fv->in_scratch = 0;
      fv->off = s;
      fv->len = p - s;
      continue;
    }
    if (p < eol && b[p] == '"') {
      size_t c = qclose(t, p);
      const t1tok_t *sep = next; /* NULL: the field is the last one */
      if (c < t->n && follows(t, c + 1, sep)) {
        size_t j, o;
        uint64_t nl = 0;
        r = scratch_reserve(t, c - p);
        if (r < 0)
          return t1_err(t, p, r, "out of memory");
        o = t->slen;
        for (j = p + 1; j < c; j++) {
          if (b[j] == '"')
            j++; /* "" -> " */
          else if (b[j] == '\n')
            nl++;
          t->scratch[t->slen++] = b[j];
        }
        fv->set = 1;
        fv->in_scratch = 1;
        fv->off = o;
        fv->len = t->slen - o;
        t->line += nl;
        p = c + 1;
        if (nl)
          eol = line_end(t, p);
        continue;
      }
      t->memo_ok = 1;
      t->memo_s = p;
      t->memo_c = c;
    }
    /* raw (a macro may repeat in a format: the last occurrence wins) */
    fv->set = 1;
    fv->in_scratch = 0;
    fv->off = p;
    if (next == NULL) {
      fv->len = e - p;
      p = e;
    } else if (k + 2 == f->ntok) { /* the format's trailing literal: the line's suffix */
      if (e - p < next->len || memcmp(b + e - next->len, f->lit + next->off, next->len) != 0)
        return t1_err(t, p, TLC_ESYNTAX, "entry does not end with \"%.*s\"", (int)next->len,
                      f->lit + next->off);
      fv->len = e - next->len - p;
      p = e - next->len;
    } else {
      size_t j = p;
      const char *lit = f->lit + next->off;
      for (;;) {
        const char *x = j < eol ? memchr(b + j, lit[0], eol - j) : NULL;
        if (x == NULL)
          return t1_err(t, p, TLC_ESYNTAX, "missing \"%.*s\" after %%%s%%", (int)next->len, lit,
                        tk->field ? field_names[tk->field] : "field");
        j = (size_t)(x - b);
        if (eol - j >= next->len && memcmp(b + j, lit, next->len) == 0)
          break;
        j++;
      }
      fv->len = j - p;
      p = j;
    }
  }
  if (!follows(t, p, NULL))
    return t1_err(t, p, TLC_ESYNTAX, "unexpected text after the entry's last field");
  p = line_end(t, p);
  *pp = p < t->n ? p + 1 : p;
  return 0;
}

static const char *fptr(const t1_t *t, unsigned id) {
  const fval_t *v = &t->f[id];
  if (!v->set)
    return NULL;
  return v->in_scratch ? t->scratch + v->off : t->b + v->off;
}

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* NAME.PARENT index: the latest area of this section with a given name. */
static int nidx_put(t1_t *t, size_t ai) {
  const char *nm = t->m->areas[ai].name;
  size_t len = strlen(nm);
  uint64_t h = hash_bytes(nm, len);
  uint64_t *v;
  if (len == 0)
    return 0;
  for (v = tlc_htab_get(&t->nidx, h); v != NULL; v = tlc_htab_get_next(&t->nidx, h, v))
    if (strcmp(t->m->areas[*v].name, nm) == 0) {
      *v = ai;
      return 0;
    }
  return tlc_htab_add(&t->nidx, h, ai) < 0 ? TLC_ENOMEM : 0;
}

static const tlc_map_area_t *nidx_get(const t1_t *t, const char *s, size_t n) {
  uint64_t h = hash_bytes(s, n);
  const uint64_t *v;
  if (n == 0)
    return NULL;
  for (v = tlc_htab_get(&t->nidx, h); v != NULL; v = tlc_htab_get_next(&t->nidx, h, v)) {
    const tlc_map_area_t *a = &t->m->areas[*v];
    if (strlen(a->name) == n && memcmp(a->name, s, n) == 0)
      return a;
  }
  return NULL;
}

/* Parses a handle-like field; 0 absent, 1 value, <0 error (reported). */
static int num_field(t1_t *t, size_t at, unsigned id, uint64_t max, uint64_t *v) {
  const char *s = fptr(t, id);
  int r;
  if (s == NULL)
    return 0;
  r = parse_hex(s, t->f[id].len, max, v);
  if (r == -1)
    return t1_err(t, at, TLC_ESYNTAX, "%%%s%% is not a hex number: \"%.*s\"", field_names[id],
                  (int)(t->f[id].len > 40 ? 40 : t->f[id].len), s);
  if (r == -2)
    return t1_err(t, at, TLC_ERANGE, "%%%s%% out of range: \"%.*s\"", field_names[id],
                  (int)(t->f[id].len > 40 ? 40 : t->f[id].len), s);
  return r;
}

static int handle_entry(t1_t *t, size_t at) {
  tlc_map_area_t a;
  const char *s[5];
  size_t n[5];
  static const unsigned ids[5] = { F_NAME, F_FILE, F_VALUE_TYPE, F_UNIT, F_PATH };
  uint64_t v = 0;
  unsigned i, type;
  int r;
  size_t ai;
  memset(&a, 0, sizeof(a));
  a.parent = a.state_handle = TLC_NO_HANDLE;
  r = num_field(t, at, F_HANDLE, 0xFFFFFFFFu, &v);
  if (r < 0)
    return r;
  if (r == 0)
    return t1_err(t, at, TLC_ESYNTAX, "entry has an empty %%HANDLE%%");
  a.handle = (uint32_t)v;
  type = a.handle >> 28;
  if ((r = num_field(t, at, F_PARENT, 0xFFFFFFFFu, &v)) < 0)
    return r;
  if (r)
    a.parent = (uint32_t)v;
  if ((r = num_field(t, at, F_STATE, 0xFFFFFFFFu, &v)) < 0)
    return r;
  if (r)
    a.state_handle = (uint32_t)v;
  if ((r = num_field(t, at, F_VALUE, UINT64_MAX, &v)) < 0)
    return r;
  if (r) {
    a.has_value = 1;
    a.value = v;
  }
  if (a.parent == TLC_NO_HANDLE && t->f[F_NAME_PARENT].set && t->f[F_NAME_PARENT].len > 0) {
    const tlc_map_area_t *pa = nidx_get(t, fptr(t, F_NAME_PARENT), t->f[F_NAME_PARENT].len);
    if (pa != NULL)
      a.parent = pa->handle;
  }
  /* state entry right after its variable (format without HANDLE.PARENT / HANDLE.STATE) */
  if (!(t->fmt.present & ((1u << F_PARENT) | (1u << F_STATE)))) {
    if ((type == 3 || type == 5) && t->last_var) {
      tlc_map_area_t *var = &t->m->areas[t->last_var - 1];
      if ((var->handle >> 28) == type - 1 &&
          (var->handle & 0x0FFFFFFFu) == (a.handle & 0x0FFFFFFFu)) {
        if (a.parent == TLC_NO_HANDLE)
          a.parent = var->handle;
        if (var->state_handle == TLC_NO_HANDLE)
          var->state_handle = a.handle;
      } else {
        t->last_var = 0;
      }
    } else {
      t->last_var = 0;
    }
  }
  for (i = 0; i < 5; i++) {
    s[i] = fptr(t, ids[i]);
    n[i] = s[i] ? t->f[ids[i]].len : 0;
  }
  r = add_area_n(t->m, &a, s, n);
  if (r == TLC_ELIMIT)
    return t1_err(t, at, r, "more than %zu mapping entries", cap_of(t->m));
  if (r < 0)
    return t1_err(t, at, r, "out of memory");
  ai = t->m->nareas - 1;
  if (type == 2 || type == 4)
    t->last_var = ai + 1;
  if (t->fmt.present & (1u << F_NAME_PARENT)) {
    r = nidx_put(t, ai);
    if (r < 0)
      return t1_err(t, at, r, "out of memory");
  }
  return 0;
}

static int ctx_entry(t1_t *t, size_t at) {
  uint64_t v = 0;
  int r = num_field(t, at, F_HANDLE, UINT64_MAX, &v);
  if (r < 0)
    return r;
  if (r == 0)
    return t1_err(t, at, TLC_ESYNTAX, "context entry has an empty %%HANDLE%%");
  r = add_ctx_n(t->m, v, fptr(t, F_NAME), t->f[F_NAME].len);
  if (r == TLC_ELIMIT)
    return t1_err(t, at, r, "more than %zu contexts", cap_of(t->m));
  if (r < 0)
    return t1_err(t, at, r, "out of memory");
  return 0;
}

/* Blank: spaces, tabs, CR and UTF-8 no-break spaces (the seed's pages hold such lines). */
static int blank_line(const char *b, size_t p, size_t eol) {
  for (; p < eol; p++) {
    if (b[p] == '\xC2' && p + 1 < eol && b[p + 1] == '\xA0')
      p++;
    else if (!is_blank(b[p]) && b[p] != '\r')
      return 0;
  }
  return 1;
}

int tlc_mapping_parse_text1(tlc_mapping_t *m, const char *buf, size_t len, tlc_parse_err_t *err) {
  t1_t *t = tlc_calloc(1, sizeof(*t));
  size_t p = 0;
  int r = 0;
  if (t == NULL) {
    tlc_parse_err_set(err, 0, 0, "out of memory");
    return TLC_ENOMEM;
  }
  if (err != NULL)
    memset(err, 0, sizeof(*err));
  t->m = m;
  t->b = buf;
  t->n = len;
  t->line = 1;
  t->err = err;
  while (p < len) {
    size_t eol = line_end(t, p);
    if (buf[p] == '*') {
      r = header(t, p, eol);
      if (r < 0)
        break;
    } else if (t->sec != SEC_SKIP && !blank_line(buf, p, eol)) {
      size_t at = p;
      r = read_entry(t, &p);
      if (r == 0)
        r = t->sec == SEC_HANDLE ? handle_entry(t, at) : ctx_entry(t, at);
      if (r < 0)
        break;
      t->line++;
      continue;
    }
    p = eol < len ? eol + 1 : len;
    t->line++;
  }
  if (r == 0 && !t->found) {
    /* where the section was missed: the file's last line, not line 0 */
    if (t->line > 1)
      t->line--;
    r = t1_err(t, len, TLC_ESYNTAX,
               "no HANDLE(...) or CONTEXTS section before the end of the file");
  }
  tlc_free(t->scratch);
  tlc_htab_fini(&t->nidx);
  tlc_free(t);
  return r;
}

/* ---------------------------------------------------------------- XML */

enum { X_OTHER = 0, X_ROOT, X_MAPPING, X_CONTEXTS, X_AREA, X_CONTEXT };

typedef struct xp {
  tlc_xml_base_t b; /* first: the refusals' state (xmlrun.h) */
  tlc_mapping_t *m;
  int found;
  unsigned depth;
  uint8_t stack[XML_MAX_DEPTH];
} xp_t;

/* A handler's refusal (xmlrun.h). */
#define xstop(x, code, ...)                                                                        \
  tlc_xml_stop(((xp_t *)(x))->b.p, &((xp_t *)(x))->b.rc, ((xp_t *)(x))->b.err, (code), __VA_ARGS__)

static const char *attr(const char **atts, const char *name) {
  for (; atts[0] != NULL; atts += 2)
    if (strcmp(atts[0], name) == 0)
      return atts[1];
  return NULL;
}

/* Parses a hex attribute; returns 0 absent/empty, 1 value, -1 error (parser stopped). */
static int xhex(xp_t *x, const char **atts, const char *name, uint64_t max, uint64_t *v) {
  const char *s = attr(atts, name);
  int r;
  if (s == NULL)
    return 0;
  r = parse_hex(s, strlen(s), max, v);
  if (r == -1)
    xstop(x, TLC_ESYNTAX, "attribute %s is not a hex number: \"%.40s\"", name, s);
  else if (r == -2)
    xstop(x, TLC_ERANGE, "attribute %s out of range: \"%.40s\"", name, s);
  return r < 0 ? -1 : r;
}

static void x_area(xp_t *x, const char **atts) {
  tlc_map_area_t a;
  uint64_t v = 0;
  int r;
  memset(&a, 0, sizeof(a));
  a.parent = a.state_handle = TLC_NO_HANDLE;
  r = xhex(x, atts, "handle", 0xFFFFFFFFu, &v);
  if (r < 0)
    return;
  if (r == 0) {
    xstop(x, TLC_ESYNTAX, "<Area> without a handle attribute");
    return;
  }
  a.handle = (uint32_t)v;
  if ((r = xhex(x, atts, "parent", 0xFFFFFFFFu, &v)) < 0)
    return;
  if (r)
    a.parent = (uint32_t)v;
  if ((r = xhex(x, atts, "state", 0xFFFFFFFFu, &v)) < 0)
    return;
  if (r)
    a.state_handle = (uint32_t)v;
  if ((r = xhex(x, atts, "value", UINT64_MAX, &v)) < 0)
    return;
  if (r) {
    a.has_value = 1;
    a.value = v;
  }
  a.name = (char *)attr(atts, "name");
  a.file = (char *)attr(atts, "file");
  a.value_type = (char *)attr(atts, "valueType");
  a.unit = (char *)attr(atts, "unit");
  a.path = (char *)attr(atts, "path");
  r = tlc_mapping_add(x->m, &a);
  if (r == TLC_ELIMIT)
    xstop(x, r, "more than %zu mapping entries", cap_of(x->m));
  else if (r < 0)
    xstop(x, r, "out of memory");
}

static void x_context(xp_t *x, const char **atts) {
  uint64_t v = 0;
  int r = xhex(x, atts, "handle", UINT64_MAX, &v);
  if (r < 0)
    return;
  if (r == 0) {
    xstop(x, TLC_ESYNTAX, "<Context> without a handle attribute");
    return;
  }
  r = tlc_mapping_add_ctx(x->m, v, attr(atts, "name"));
  if (r == TLC_ELIMIT)
    xstop(x, r, "more than %zu contexts", cap_of(x->m));
  else if (r < 0)
    xstop(x, r, "out of memory");
}

static void XMLCALL x_start(void *ud, const XML_Char *name, const XML_Char **atts) {
  xp_t *x = ud;
  uint8_t parent = x->depth ? x->stack[x->depth - 1] : X_OTHER, id = X_OTHER;
  if (x->depth == XML_MAX_DEPTH) {
    xstop(x, TLC_ELIMIT, "elements nested deeper than %d", XML_MAX_DEPTH);
    return;
  }
  if (x->depth == 0) {
    if (strcmp(name, "ProfilerExport") != 0) {
      xstop(x, TLC_ESYNTAX, "root element is <%.60s>, expected <ProfilerExport>", name);
      return;
    }
    id = X_ROOT;
  } else if (parent == X_ROOT && strcmp(name, "Mapping") == 0) {
    id = X_MAPPING;
    x->found = 1;
  } else if ((parent == X_MAPPING || parent == X_ROOT) && strcmp(name, "Contexts") == 0) {
    id = X_CONTEXTS;
    x->found = 1;
  } else if (parent == X_MAPPING && strcmp(name, "Area") == 0) {
    id = X_AREA;
    x_area(x, atts);
  } else if (parent == X_CONTEXTS && strcmp(name, "Context") == 0) {
    id = X_CONTEXT;
    x_context(x, atts);
  }
  x->stack[x->depth++] = id;
}

static void XMLCALL x_end(void *ud, const XML_Char *name) {
  xp_t *x = ud;
  (void)name;
  if (x->depth > 0)
    x->depth--;
}

int tlc_mapping_parse_xml(tlc_mapping_t *m, const char *buf, size_t len, tlc_parse_err_t *err) {
  xp_t *x = tlc_calloc(1, sizeof(*x));
  int r = 0;
  if (x == NULL) {
    tlc_parse_err_set(err, 0, 0, "out of memory");
    return TLC_ENOMEM;
  }
  if (err != NULL)
    memset(err, 0, sizeof(*err));
  x->m = m;
  if (tlc_xml_open(&x->b, x, err) != 0) {
    tlc_free(x);
    return TLC_ENOMEM;
  }
  XML_SetElementHandler(x->b.p, x_start, x_end);
  r = tlc_xml_run(x->b.p, buf, len, &x->b.rc, err);
  if (r == 0 && x->b.rc != 0)
    r = x->b.rc;
  if (r == 0 && !x->found) {
    r = TLC_ESYNTAX;
    /* reported at the document's last line, not line 0 */
    uint64_t lines = 1;
    for (size_t i = 0; i + 1 < len; i++)
      lines += buf[i] == '\n';
    tlc_parse_err_set(err, lines, len,
                      "no <Mapping> or <Contexts> element before the end of the document");
  }
  XML_ParserFree(x->b.p);
  tlc_free(x);
  return r;
}

int tlc_mapping_parse(tlc_mapping_t *m, const char *buf, size_t len, tlc_parse_err_t *err) {
  size_t i = 0;
  if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
    i = 3;
  while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'))
    i++;
  if (i < len && buf[i] == '<')
    return tlc_mapping_parse_xml(m, buf, len, err);
  return tlc_mapping_parse_text1(m, buf, len, err);
}

const char *tlc_mapping_ctx_display(const tlc_mapping_t *m, const struct tlc_table *t, uint32_t c,
                                    char *buf, size_t len) {
  if (m != NULL && c < t->ncontexts && t->contexts[c].kind == TLC_CTXK_TASK) {
    const char *n = tlc_mapping_ctx_name(m, t->contexts[c].key);
    if (n != NULL)
      return n;
  }
  return tlc_ctx_name(t, c, buf, len);
}

const tlc_map_area_t *tlc_mapping_row_entry(const tlc_mapping_t *m, const struct tlc_stat *r) {
  if (m == NULL)
    return NULL;
  return r->kind == TLC_ROW_STATE ? tlc_mapping_find_value(m, r->handle, r->state)
                                  : tlc_mapping_find(m, r->handle);
}

int tlc_mapping_row_unlisted(const tlc_mapping_t *m, const struct tlc_table *t, size_t i) {
  const tlc_stat_t *r = &t->rows[i];
  if (i > 0 && t->rows[i - 1].handle == r->handle && t->rows[i - 1].kind == r->kind &&
      t->rows[i - 1].state == r->state)
    return 0;
  return tlc_mapping_row_entry(m, r) == NULL;
}

const char *tlc_mapping_state_display(const tlc_mapping_t *m, uint32_t handle, uint64_t state,
                                      char *buf, size_t len) {
  const tlc_map_area_t *val = m != NULL ? tlc_mapping_find_value(m, handle, state) : NULL;
  const tlc_map_area_t *var = NULL;
  char vh[16], sv[24];
  if (val != NULL && val->parent != TLC_NO_HANDLE)
    var = tlc_mapping_find(m, val->parent);
  snprintf(vh, sizeof(vh), "%08X", handle);
  snprintf(sv, sizeof(sv), "%llX", (unsigned long long)state);
  snprintf(buf, len, "%s = %s", var != NULL && var->name[0] ? var->name : vh,
           val != NULL && val->name[0] ? val->name : sv);
  return buf;
}
