/* aprof.c - aprof report reader and JSON view (see aprof.h; format: seeds/003 and the notes
 * in seeds/README.md).
 *
 * A report is text, one item per line, the tag first:
 *
 *   c comment text                       v 2                  m time-usec
 *   e 1349361052   t <date>   f ./prog arg   a ./prog   k 123456   i rms   g 4
 *   r ArraySort 0x8048474 NONE 2          version 0: NAME ADDRESS IMAGE ID
 *   r "mmap" "/lib/ld-2.13.so" 30 [n]     later: quoted name and image, id, distinct rms
 *   u 30 "mangled"     d 30 "full demangled name"
 *   p 2 3 4 1                             4 values: id rms avg occ            (version 0)
 *   p 7 23 15 37 270 10 199 200           8 values: id rms min max sum occ real self (v2)
 *   p 7 23 15 37 270 10 199 200 10 10     10 values: v2's + self-min self-max (v3)
 *   p 7 23 15 37 270 3000 10 199 200 10 10 3000    12 values (seed; v4, v5, v6 in rms mode)
 *   ... 14 values (v5 rvms ratio sums; v6 drms: 2 deprecated), 16 and 18 (v6 drms: + cumulative
 *   syscall/thread input sums, + self syscall/thread input sums)
 *   x 24 352 350                          CCT node: routine, context, parent (-1: root)
 *   q 352 23 15 37 270 3000 10 199 200 10 10 3000  context point, same layout as p
 *
 * Invariants after a successful parse: routine ids and context ids are unique; every point's
 * owner and every context's routine and parent exist; the context tree has no cycle; points
 * are grouped by owner (file order kept inside a group). Forward references are allowed for
 * p, q and x (aprof writes q lines before the x lines of the tree), u and d must follow their
 * r line. Single-valued header lines (v e t f a m k i g) may appear once; `v` must precede
 * routine, point and context lines. The version decides how many values a point has
 * (layout_ok); version 1 and versions above 6 are refused. aprof-plot's `fav` line is skipped.
 *
 * Cost: one pass over the lines, hash lookups per reference, one counting sort per point kind:
 * O(input). Memory is capped by max_routines / max_points / max_contexts.
 *
 * Does not: merge points with the same (routine, rms) (aprof does that when merging reports),
 * check that costs are consistent (min <= max ...), or write reports (aprofw.c does).
 */
#include "formats/aprof.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/htab.h"
#include "formats/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_CAP 10000000u

typedef struct ap {
  tlc_aprof_t *a;
  const char *b;
  size_t n;
  uint64_t line;
  size_t lstart;
  tlc_parse_err_t *err;
  tlc_htab_t rmap, cmap; /* routine / context id -> index + 1 */
  int body;              /* an r/u/d/p/q/x line was seen */
  unsigned seen;         /* single-valued header lines seen, bit per letter */
} ap_t;

static size_t capv(size_t v) {
  return v ? v : DEFAULT_CAP;
}

static int ap_err(ap_t *p, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int ap_err(ap_t *p, int code, const char *fmt, ...) {
  va_list ap;
  if (p->err != NULL) {
    p->err->line = p->line;
    p->err->offset = p->lstart;
    va_start(ap, fmt);
    vsnprintf(p->err->reason, sizeof(p->err->reason), fmt, ap);
    va_end(ap);
  }
  return code;
}

/* Index + 1 for key, or 0. */
static size_t idmap_get(const tlc_htab_t *m, uint64_t k) {
  const uint64_t *v = tlc_htab_get(m, k);
  return v != NULL ? (size_t)*v : 0;
}

void tlc_aprof_init(tlc_aprof_t *a) {
  memset(a, 0, sizeof(*a));
}

void tlc_aprof_fini(tlc_aprof_t *a) {
  size_t i;
  for (i = 0; i < a->nroutines; i++) {
    tlc_free(a->routines[i].name);
    tlc_free(a->routines[i].image);
    tlc_free(a->routines[i].mangled);
    tlc_free(a->routines[i].demangled);
  }
  for (i = 0; i < a->ncomments; i++)
    tlc_free(a->comments[i]);
  tlc_free(a->comments);
  tlc_free(a->routines);
  tlc_free(a->points);
  tlc_free(a->contexts);
  tlc_free(a->cpoints);
  tlc_free(a->metric);
  tlc_free(a->mtime);
  tlc_free(a->date);
  tlc_free(a->command);
  tlc_free(a->app);
  tlc_free(a->input_metric);
  memset(a, 0, sizeof(*a));
}

/* ---------------------------------------------------------------- tokens */

static int blank(char c) {
  return c == ' ' || c == '\t';
}

/* Next blank-separated token of [*i, e): start in *s, length returned (0: none). */
static size_t tok(const char *b, size_t *i, size_t e, size_t *s) {
  size_t j = *i;
  while (j < e && blank(b[j]))
    j++;
  *s = j;
  while (j < e && !blank(b[j]))
    j++;
  *i = j;
  return j - *s;
}

/* Decimal u64: 1 ok, 0 malformed, -1 overflow. */
static int dec(const char *s, size_t n, uint64_t *v) {
  uint64_t x = 0;
  size_t i;
  if (n == 0)
    return 0;
  for (i = 0; i < n; i++) {
    unsigned d;
    if (s[i] < '0' || s[i] > '9')
      return 0;
    d = (unsigned)(s[i] - '0');
    if (x > (UINT64_MAX - d) / 10)
      return -1;
    x = x * 10 + d;
  }
  *v = x;
  return 1;
}

static int num(ap_t *p, const char *what, size_t *i, size_t e, uint64_t *v) {
  size_t s, n = tok(p->b, i, e, &s);
  int r;
  if (n == 0)
    return ap_err(p, TLC_ESYNTAX, "missing %s", what);
  r = dec(p->b + s, n, v);
  if (r == 0)
    return ap_err(p, TLC_ESYNTAX, "%s is not a number: \"%.*s\"", what, (int)(n > 40 ? 40 : n),
                  p->b + s);
  if (r < 0)
    return ap_err(p, TLC_ERANGE, "%s out of range: \"%.*s\"", what, (int)(n > 40 ? 40 : n),
                  p->b + s);
  return 0;
}

static int at_end(ap_t *p, size_t i, size_t e) {
  size_t s;
  if (tok(p->b, &i, e, &s) != 0)
    return ap_err(p, TLC_ESYNTAX, "unexpected text at column %zu", s - p->lstart + 1);
  return 0;
}

/* A "quoted" string at [*i, e): sets [*s, *s + *n) to its content and moves past it. */
static int quoted(ap_t *p, const char *what, size_t *i, size_t e, size_t *s, size_t *n) {
  size_t j = *i;
  const char *q;
  while (j < e && blank(p->b[j]))
    j++;
  if (j >= e || p->b[j] != '"')
    return ap_err(p, TLC_ESYNTAX, "expected quoted %s", what);
  q = memchr(p->b + j + 1, '"', e - j - 1);
  if (q == NULL)
    return ap_err(p, TLC_ESYNTAX, "unterminated quoted %s", what);
  *s = j + 1;
  *n = (size_t)(q - p->b) - j - 1;
  *i = (size_t)(q - p->b) + 1;
  if (*i < e && !blank(p->b[*i]))
    return ap_err(p, TLC_ESYNTAX, "text right after the closing quote of the %s", what);
  return 0;
}

static int setstr(ap_t *p, char **dst, const char *s, size_t n) {
  char *x = tlc_strndup(s, n);
  if (x == NULL)
    return ap_err(p, TLC_ENOMEM, "out of memory");
  tlc_free(*dst);
  *dst = x;
  return 0;
}

/* The rest of the line after the tag, blanks trimmed at both ends. */
static void rest(const char *b, size_t i, size_t e, size_t *s, size_t *n) {
  while (i < e && blank(b[i]))
    i++;
  while (e > i && blank(b[e - 1]))
    e--;
  *s = i;
  *n = e - i;
}

/* ---------------------------------------------------------------- lines */

static int line_r(ap_t *p, size_t i, size_t e) {
  tlc_aprof_t *a = p->a;
  tlc_aprof_routine_t rt, *nr;
  size_t ns, nn, is, in;
  uint64_t v;
  int r;
  memset(&rt, 0, sizeof(rt));
  while (i < e && blank(p->b[i]))
    i++;
  if (i < e && p->b[i] == '"') {
    if ((r = quoted(p, "routine name", &i, e, &ns, &nn)) < 0 ||
        (r = quoted(p, "image name", &i, e, &is, &in)) < 0 ||
        (r = num(p, "routine id", &i, e, &rt.id)) < 0)
      return r;
    {
      size_t s, j = i;
      if (tok(p->b, &j, e, &s) != 0) {
        if ((r = num(p, "distinct rms count", &i, e, &v)) < 0)
          return r;
        rt.has_distinct_rms = 1;
        rt.distinct_rms = v;
      }
    }
    if ((r = at_end(p, i, e)) < 0)
      return r;
  } else {
    /* version 0: NAME [ADDRESS] IMAGE ID, the name being everything before the last fields */
    size_t te[4], ts[4], k = 0, j = e;
    while (k < 4) {
      while (j > i && blank(p->b[j - 1]))
        j--;
      if (j == i)
        break;
      te[k] = j;
      while (j > i && !blank(p->b[j - 1]))
        j--;
      ts[k] = j;
      k++;
    }
    if (k < 3)
      return ap_err(p, TLC_ESYNTAX, "r line needs a name, an image and an id");
    if ((r = dec(p->b + ts[0], te[0] - ts[0], &rt.id)) <= 0)
      return ap_err(p, r < 0 ? TLC_ERANGE : TLC_ESYNTAX, "bad routine id \"%.*s\"",
                    (int)(te[0] - ts[0] > 40 ? 40 : te[0] - ts[0]), p->b + ts[0]);
    is = ts[1];
    in = te[1] - ts[1];
    ns = i;
    nn = 0;
    if (k == 4 && te[2] - ts[2] > 2 && p->b[ts[2]] == '0' &&
        (p->b[ts[2] + 1] == 'x' || p->b[ts[2] + 1] == 'X')) {
      size_t q;
      uint64_t x = 0;
      for (q = ts[2] + 2; q < te[2]; q++) {
        char c = p->b[q];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16)
          return ap_err(p, TLC_ESYNTAX, "bad routine address");
        if (x >> 60)
          return ap_err(p, TLC_ERANGE, "routine address out of range");
        x = (x << 4) | d;
      }
      rt.address = x;
      rt.has_address = 1;
      nn = ts[2] > i ? ts[2] - i : 0;
    } else {
      nn = te[2] - i;
    }
    while (nn > 0 && blank(p->b[ns + nn - 1]))
      nn--;
    if (nn == 0)
      return ap_err(p, TLC_ESYNTAX, "r line needs a name, an image and an id");
  }
  if (idmap_get(&p->rmap, rt.id))
    return ap_err(p, TLC_ESYNTAX, "routine id %llu defined twice (first at line %llu)",
                  (unsigned long long)rt.id,
                  (unsigned long long)a->routines[idmap_get(&p->rmap, rt.id) - 1].line);
  if (a->nroutines >= capv(a->max_routines))
    return ap_err(p, TLC_ELIMIT, "more than %zu routines", capv(a->max_routines));
  if ((nr = tlc_grow(a->routines, &a->caproutines, a->nroutines + 1, sizeof(*nr), 16)) == NULL)
    return ap_err(p, TLC_ENOMEM, "out of memory");
  a->routines = nr;
  rt.name = tlc_strndup(p->b + ns, nn);
  rt.image = tlc_strndup(p->b + is, in);
  rt.line = p->line;
  if (rt.name == NULL || rt.image == NULL) {
    tlc_free(rt.name);
    tlc_free(rt.image);
    return ap_err(p, TLC_ENOMEM, "out of memory");
  }
  a->routines[a->nroutines++] = rt;
  if (tlc_htab_put(&p->rmap, rt.id, a->nroutines) < 0)
    return ap_err(p, TLC_ENOMEM, "out of memory");
  return 0;
}

/* u / d: a routine's mangled or full demangled name. */
static int line_ud(ap_t *p, char tag, size_t i, size_t e) {
  uint64_t id;
  size_t s, n, k;
  int r;
  if ((r = num(p, "routine id", &i, e, &id)) < 0)
    return r;
  k = idmap_get(&p->rmap, id);
  if (k == 0)
    return ap_err(p, TLC_ESYNTAX, "%c line for routine id %llu, which no earlier r line defines",
                  tag, (unsigned long long)id);
  while (i < e && blank(p->b[i]))
    i++;
  if (i < e && p->b[i] == '"') {
    if ((r = quoted(p, "name", &i, e, &s, &n)) < 0 || (r = at_end(p, i, e)) < 0)
      return r;
  } else {
    rest(p->b, i, e, &s, &n);
  }
  return setstr(p, tag == 'u' ? &p->a->routines[k - 1].mangled : &p->a->routines[k - 1].demangled,
                p->b + s, n);
}

#define F8                                                                                         \
  (TLC_APF_MIN | TLC_APF_MAX | TLC_APF_SUM | TLC_APF_OCC | TLC_APF_REAL_SUM | TLC_APF_SELF_SUM)
#define F10 (F8 | TLC_APF_SELF_MIN | TLC_APF_SELF_MAX)
#define F12 (F10 | TLC_APF_SQR_SUM | TLC_APF_SELF_SQR)
#define F14 (F12 | TLC_APF_RATIO_SUM | TLC_APF_RATIO_SQR)
#define F16 (F14 | TLC_APF_CUMUL_SYSCALL | TLC_APF_CUMUL_THREAD)
#define F18 (F16 | TLC_APF_SELF_SYSCALL | TLC_APF_SELF_THREAD)

static const unsigned layout_fields[TLC_APROF_MAX_VALUES + 1] = {
  [4] = TLC_APF_AVG | TLC_APF_OCC,
  [8] = F8,
  [10] = F10,
  [12] = F12,
  [14] = F14,
  [16] = F16,
  [18] = F18,
};

/* Whether a point of k values fits the report's version (aprof's writer and aprof-plot's
 * reader: version 2 has 8 numbers, 3 adds self-min and self-max (10), 4 adds sqr-sum and
 * self-sqr (12), 5 may append the two rvms ratio sums (14), 6 the two deprecated input-size
 * sums and then the syscall/thread input sums of drms mode (14, 16, 18)). Without a `v` line
 * the count decides (aprof's version 0 has 4; the seed's layout, which documents no version,
 * 12). tlcap's exports before it wrote `v 4` said `v 3` over 12 numbers: read as version 4. */
static const char *layout_ok(const tlc_aprof_t *a, unsigned k) {
  if (!a->has_version)
    return k == 4 || k == 8 || k == 10 || k == 12 || k == 14 ? NULL : "4, 8, 10, 12 or 14";
  switch (a->version) {
  case 0:
    return k == 4 ? NULL : "4";
  case 2:
    return k == 8 ? NULL : "8";
  case 3:
    return k == 10 || k == 12 ? NULL : "10";
  case 4:
    return k == 12 ? NULL : "12";
  case 5:
    return k == 12 || k == 14 ? NULL : "12 or 14";
  default: /* 6 (the `v` line refuses the others) */
    return k == 12 || k == 14 || k == 16 || k == 18 ? NULL : "12, 14, 16 or 18";
  }
}

static int line_pq(ap_t *p, char tag, size_t i, size_t e) {
  tlc_aprof_t *a = p->a;
  uint64_t v[TLC_APROF_MAX_VALUES];
  unsigned k = 0;
  tlc_aprof_point_t pt, *np;
  size_t s, j = i;
  tlc_aprof_point_t **arr = tag == 'p' ? &a->points : &a->cpoints;
  size_t *cnt = tag == 'p' ? &a->npoints : &a->ncpoints;
  size_t *cap = tag == 'p' ? &a->cappoints : &a->capcpoints;
  const char *want;
  int r;
  while (tok(p->b, &j, e, &s) != 0) {
    if (k == TLC_APROF_MAX_VALUES)
      return ap_err(p, TLC_ESYNTAX, "%c line has more than %d values", tag, TLC_APROF_MAX_VALUES);
    if ((r = num(p, "value", &i, e, &v[k])) < 0)
      return r;
    k++;
    j = i;
  }
  if ((want = layout_ok(a, k)) != NULL) {
    if (a->has_version)
      return ap_err(p, TLC_ESYNTAX, "%c line has %u values; a version %llu report has %s", tag, k,
                    (unsigned long long)a->version, want);
    return ap_err(p, TLC_ESYNTAX, "%c line has %u values (%s expected)", tag, k, want);
  }
  if (a->layout == 0) {
    a->layout = k;
    a->fields = layout_fields[k];
  } else if (a->layout != k) {
    return ap_err(p, TLC_ESYNTAX, "%c line has %u values, earlier points have %u", tag, k,
                  a->layout);
  }
  if (a->npoints + a->ncpoints + a->ncomments >= capv(a->max_points))
    return ap_err(p, TLC_ELIMIT, "more than %zu points", capv(a->max_points));
  memset(&pt, 0, sizeof(pt));
  pt.owner = v[0];
  pt.rms = v[1];
  pt.line = p->line;
  if (k == 4) {
    pt.avg = v[2];
    pt.occ = v[3];
  } else {
    pt.min = v[2];
    pt.max = v[3];
    pt.sum = v[4];
    if (k <= 10) {
      pt.occ = v[5];
      pt.real_sum = v[6];
      pt.self_sum = v[7];
      if (k == 10) {
        pt.self_min = v[8];
        pt.self_max = v[9];
      }
    } else {
      pt.sqr_sum = v[5];
      pt.occ = v[6];
      pt.real_sum = v[7];
      pt.self_sum = v[8];
      pt.self_min = v[9];
      pt.self_max = v[10];
      pt.self_sqr_sum = v[11];
      if (k >= 14) {
        pt.ratio_sum = v[12];
        pt.ratio_sqr_sum = v[13];
      }
      if (k >= 16) {
        pt.cumul_syscall = v[14];
        pt.cumul_thread = v[15];
      }
      if (k == 18) {
        pt.self_syscall = v[16];
        pt.self_thread = v[17];
      }
    }
  }
  if ((np = tlc_grow(*arr, cap, *cnt + 1, sizeof(*np), 16)) == NULL)
    return ap_err(p, TLC_ENOMEM, "out of memory");
  *arr = np;
  (*arr)[(*cnt)++] = pt;
  return 0;
}

static int line_x(ap_t *p, size_t i, size_t e) {
  tlc_aprof_t *a = p->a;
  tlc_aprof_ctx_t c, *nc;
  size_t s, n, j;
  int r;
  memset(&c, 0, sizeof(c));
  if ((r = num(p, "routine id", &i, e, &c.routine_id)) < 0 ||
      (r = num(p, "context id", &i, e, &c.id)) < 0)
    return r;
  j = i;
  n = tok(p->b, &j, e, &s);
  if (n == 2 && p->b[s] == '-' && p->b[s + 1] == '1') {
    c.parent_id = -1;
    i = j;
  } else {
    uint64_t v;
    if ((r = num(p, "parent context id", &i, e, &v)) < 0)
      return r;
    if (v > INT64_MAX)
      return ap_err(p, TLC_ERANGE, "parent context id out of range");
    c.parent_id = (int64_t)v;
  }
  if ((r = at_end(p, i, e)) < 0)
    return r;
  if (idmap_get(&p->cmap, c.id))
    return ap_err(p, TLC_ESYNTAX, "context id %llu defined twice", (unsigned long long)c.id);
  if (a->ncontexts >= capv(a->max_contexts))
    return ap_err(p, TLC_ELIMIT, "more than %zu contexts", capv(a->max_contexts));
  if ((nc = tlc_grow(a->contexts, &a->capcontexts, a->ncontexts + 1, sizeof(*nc), 16)) == NULL)
    return ap_err(p, TLC_ENOMEM, "out of memory");
  a->contexts = nc;
  c.line = p->line;
  a->contexts[a->ncontexts++] = c;
  if (tlc_htab_put(&p->cmap, c.id, a->ncontexts) < 0)
    return ap_err(p, TLC_ENOMEM, "out of memory");
  return 0;
}

static int line_header(ap_t *p, char tag, size_t i, size_t e) {
  tlc_aprof_t *a = p->a;
  static const char letters[] = "vetfamkig";
  const char *l = strchr(letters, tag);
  unsigned bit = 1u << (unsigned)(l - letters);
  size_t s, n;
  int r;
  if (p->seen & bit)
    return ap_err(p, TLC_ESYNTAX, "second '%c' line", tag);
  p->seen |= bit;
  switch (tag) {
  case 'v':
    if (p->body)
      return ap_err(p, TLC_ESYNTAX, "'v' line after routine or point lines");
    if ((r = num(p, "version", &i, e, &a->version)) < 0 || (r = at_end(p, i, e)) < 0)
      return r;
    if (a->version == 1 || a->version > 6)
      return ap_err(p, TLC_ESYNTAX, "version %llu is not one tlcap reads (0 and 2 to 6)",
                    (unsigned long long)a->version);
    a->has_version = 1;
    return 0;
  case 'k':
    if ((r = num(p, "total cost", &i, e, &a->total_cost)) < 0 || (r = at_end(p, i, e)) < 0)
      return r;
    a->has_total_cost = 1;
    return 0;
  case 'g':
    if ((r = num(p, "memory resolution", &i, e, &a->granularity)) < 0 || (r = at_end(p, i, e)) < 0)
      return r;
    a->has_granularity = 1;
    return 0;
  default:
    break;
  }
  rest(p->b, i, e, &s, &n);
  switch (tag) {
  case 'e':
    return setstr(p, &a->mtime, p->b + s, n);
  case 't':
    return setstr(p, &a->date, p->b + s, n);
  case 'f':
    return setstr(p, &a->command, p->b + s, n);
  case 'a':
    return setstr(p, &a->app, p->b + s, n);
  case 'i':
    return setstr(p, &a->input_metric, p->b + s, n);
  default: /* 'm' */
    if (n == 0)
      return ap_err(p, TLC_ESYNTAX, "empty metric");
    a->has_metric = 1;
    return setstr(p, &a->metric, p->b + s, n);
  }
}

static int line_c(ap_t *p, size_t i, size_t e) {
  tlc_aprof_t *a = p->a;
  size_t s, n;
  char *c, **ncm;
  if (a->npoints + a->ncpoints + a->ncomments >= capv(a->max_points))
    return ap_err(p, TLC_ELIMIT, "more than %zu points and comments", capv(a->max_points));
  if ((ncm = tlc_grow(a->comments, &a->capcomments, a->ncomments + 1, sizeof(*ncm), 16)) == NULL)
    return ap_err(p, TLC_ENOMEM, "out of memory");
  a->comments = ncm;
  rest(p->b, i, e, &s, &n);
  c = tlc_strndup(p->b + s, n);
  if (c == NULL)
    return ap_err(p, TLC_ENOMEM, "out of memory");
  a->comments[a->ncomments++] = c;
  return 0;
}

/* ---------------------------------------------------------------- resolution */

/* Groups points by owner (counting sort, stable). `kind` 'p': owners are routines. */
static int group(ap_t *p, char kind) {
  tlc_aprof_t *a = p->a;
  tlc_aprof_point_t *src = kind == 'p' ? a->points : a->cpoints, *dst;
  size_t n = kind == 'p' ? a->npoints : a->ncpoints,
         nown = kind == 'p' ? a->nroutines : a->ncontexts;
  const tlc_htab_t *map = kind == 'p' ? &p->rmap : &p->cmap;
  size_t i, *fill;
  if (n == 0)
    return 0;
  for (i = 0; i < n; i++) {
    size_t k = idmap_get(map, src[i].owner);
    if (k == 0) {
      p->line = src[i].line;
      p->lstart = 0;
      return ap_err(p, TLC_ESYNTAX, "%c line refers to %s id %llu, which no %s line defines", kind,
                    kind == 'p' ? "routine" : "context", (unsigned long long)src[i].owner,
                    kind == 'p' ? "r" : "x");
    }
    if (kind == 'p')
      a->routines[k - 1].npoints++;
    else
      a->contexts[k - 1].npoints++;
  }
  fill = tlc_calloc(nown, sizeof(*fill));
  dst = tlc_malloc(n * sizeof(*dst));
  if (fill == NULL || dst == NULL) {
    tlc_free(fill);
    tlc_free(dst);
    return ap_err(p, TLC_ENOMEM, "out of memory");
  }
  {
    size_t at = 0;
    for (i = 0; i < nown; i++) {
      if (kind == 'p') {
        a->routines[i].first_point = at;
        at += a->routines[i].npoints;
      } else {
        a->contexts[i].first_point = at;
        at += a->contexts[i].npoints;
      }
    }
  }
  for (i = 0; i < n; i++) {
    size_t k = idmap_get(map, src[i].owner) - 1;
    size_t first = kind == 'p' ? a->routines[k].first_point : a->contexts[k].first_point;
    dst[first + fill[k]++] = src[i];
  }
  tlc_free(fill);
  tlc_free(src);
  if (kind == 'p') {
    a->points = dst;
    a->cappoints = n;
  } else {
    a->cpoints = dst;
    a->capcpoints = n;
  }
  return 0;
}

static int resolve_tree(ap_t *p) {
  tlc_aprof_t *a = p->a;
  size_t i;
  uint8_t *st;
  for (i = 0; i < a->ncontexts; i++) {
    tlc_aprof_ctx_t *c = &a->contexts[i];
    size_t k = idmap_get(&p->rmap, c->routine_id);
    p->line = c->line;
    p->lstart = 0;
    if (k == 0)
      return ap_err(p, TLC_ESYNTAX, "x line refers to routine id %llu, which no r line defines",
                    (unsigned long long)c->routine_id);
    c->routine = k - 1;
    c->parent = SIZE_MAX;
    if (c->parent_id >= 0) {
      k = idmap_get(&p->cmap, (uint64_t)c->parent_id);
      if (k == 0)
        return ap_err(p, TLC_ESYNTAX, "x line's parent context %lld is not defined",
                      (long long)c->parent_id);
      c->parent = k - 1;
    }
  }
  /* no cycles: walk up from each node; 1 = on the current walk, 2 = known to reach a root */
  st = tlc_calloc(a->ncontexts ? a->ncontexts : 1, 1);
  if (st == NULL)
    return ap_err(p, TLC_ENOMEM, "out of memory");
  for (i = 0; i < a->ncontexts; i++) {
    size_t j = i;
    while (j != SIZE_MAX && st[j] == 0) {
      st[j] = 1;
      j = a->contexts[j].parent;
    }
    if (j != SIZE_MAX && st[j] == 1) {
      p->line = a->contexts[j].line;
      tlc_free(st);
      return ap_err(p, TLC_ESYNTAX, "the calling context tree has a cycle through context %llu",
                    (unsigned long long)a->contexts[j].id);
    }
    for (j = i; j != SIZE_MAX && st[j] == 1; j = a->contexts[j].parent)
      st[j] = 2;
  }
  tlc_free(st);
  return 0;
}

int tlc_aprof_parse(tlc_aprof_t *a, const char *buf, size_t len, tlc_parse_err_t *err) {
  ap_t p;
  size_t pos = 0;
  int r = 0;
  memset(&p, 0, sizeof(p));
  p.a = a;
  p.b = buf;
  p.n = len;
  p.err = err;
  if (err != NULL)
    memset(err, 0, sizeof(*err));
  while (pos < len && r == 0) {
    const char *nl = memchr(buf + pos, '\n', len - pos);
    size_t eol = nl ? (size_t)(nl - buf) : len, e = eol, i = pos;
    char tag;
    p.line++;
    p.lstart = pos;
    pos = nl ? eol + 1 : len;
    if (e > i && buf[e - 1] == '\r')
      e--;
    while (i < e && blank(buf[i]))
      i++;
    if (i == e)
      continue;
    if (e - i >= 3 && memcmp(buf + i, "fav", 3) == 0 && (e - i == 3 || blank(buf[i + 3])))
      continue; /* aprof-plot's favourite routines (its own bookkeeping): ignored */
    tag = buf[i++];
    if (i < e && !blank(buf[i])) {
      r = ap_err(&p, TLC_ESYNTAX, "unknown line tag \"%.*s\"",
                 (int)(e - i + 1 > 20 ? 20 : e - i + 1), buf + i - 1);
      break;
    }
    switch (tag) {
    case 'r':
    case 'u':
    case 'd':
    case 'p':
    case 'q':
    case 'x':
      p.body = 1;
      r = tag == 'r'                 ? line_r(&p, i, e)
          : tag == 'x'               ? line_x(&p, i, e)
          : tag == 'p' || tag == 'q' ? line_pq(&p, tag, i, e)
                                     : line_ud(&p, tag, i, e);
      break;
    case 'c':
      r = line_c(&p, i, e);
      break;
    case 'v':
    case 'e':
    case 't':
    case 'f':
    case 'a':
    case 'm':
    case 'k':
    case 'i':
    case 'g':
      r = line_header(&p, tag, i, e);
      break;
    default:
      r = ap_err(&p, TLC_ESYNTAX, "unknown line tag '%c'", tag);
      break;
    }
  }
  if (r == 0)
    r = resolve_tree(&p);
  if (r == 0)
    r = group(&p, 'p');
  if (r == 0)
    r = group(&p, 'q');
  if (r == 0 && a->metric == NULL) {
    a->metric = tlc_strndup("bb-count", 8);
    if (a->metric == NULL)
      r = ap_err(&p, TLC_ENOMEM, "out of memory");
  }
  tlc_htab_fini(&p.rmap);
  tlc_htab_fini(&p.cmap);
  return r;
}

int tlc_aprof_sniff(const char *buf, size_t len) {
  size_t pos = 0, n = len < 4096 ? len : 4096, lines = 0;
  if (memchr(buf, 0, n) != NULL)
    return 0;
  while (pos < n && lines < 8) {
    const char *nl = memchr(buf + pos, '\n', n - pos);
    size_t e = nl ? (size_t)(nl - buf) : n, i = pos;
    if (nl == NULL && n < len)
      break; /* a line cut by the 4 KiB window: judge by the complete ones */
    if (e > i && buf[e - 1] == '\r')
      e--;
    while (i < e && blank(buf[i]))
      i++;
    if (i < e) {
      if (strchr("vetcfamkirudpxqg", buf[i]) == NULL || (i + 1 < e && !blank(buf[i + 1])))
        return 0;
      lines++;
    }
    pos = nl ? (size_t)(nl - buf) + 1 : n;
  }
  return lines > 0;
}

/* ---------------------------------------------------------------- JSON */

static void jkey(tlc_out_t *o, const char *ind, const char *k) {
  tlc_out_puts(o, ind);
  tlc_out_putc(o, '"');
  tlc_out_puts(o, k);
  tlc_out_puts(o, "\": ");
}

static void jstr_or_null(tlc_out_t *o, const char *s) {
  if (s == NULL)
    tlc_out_puts(o, "null");
  else
    tlc_json_string(o, s);
}

static void jpoint(tlc_out_t *o, const tlc_aprof_point_t *pt, unsigned f) {
  static const struct {
    unsigned bit;
    const char *name;
    size_t off;
  } cols[] = {
    { TLC_APF_MIN, "min", offsetof(tlc_aprof_point_t, min) },
    { TLC_APF_MAX, "max", offsetof(tlc_aprof_point_t, max) },
    { TLC_APF_SUM, "sum", offsetof(tlc_aprof_point_t, sum) },
    { TLC_APF_SQR_SUM, "sqr_sum", offsetof(tlc_aprof_point_t, sqr_sum) },
    { TLC_APF_OCC, "occ", offsetof(tlc_aprof_point_t, occ) },
    { TLC_APF_REAL_SUM, "real_sum", offsetof(tlc_aprof_point_t, real_sum) },
    { TLC_APF_SELF_SUM, "self_sum", offsetof(tlc_aprof_point_t, self_sum) },
    { TLC_APF_SELF_MIN, "self_min", offsetof(tlc_aprof_point_t, self_min) },
    { TLC_APF_SELF_MAX, "self_max", offsetof(tlc_aprof_point_t, self_max) },
    { TLC_APF_SELF_SQR, "self_sqr_sum", offsetof(tlc_aprof_point_t, self_sqr_sum) },
    { TLC_APF_AVG, "avg", offsetof(tlc_aprof_point_t, avg) },
    { TLC_APF_RATIO_SUM, "ratio_sum", offsetof(tlc_aprof_point_t, ratio_sum) },
    { TLC_APF_RATIO_SQR, "ratio_sqr_sum", offsetof(tlc_aprof_point_t, ratio_sqr_sum) },
    { TLC_APF_CUMUL_SYSCALL, "cumul_syscall", offsetof(tlc_aprof_point_t, cumul_syscall) },
    { TLC_APF_CUMUL_THREAD, "cumul_thread", offsetof(tlc_aprof_point_t, cumul_thread) },
    { TLC_APF_SELF_SYSCALL, "self_syscall", offsetof(tlc_aprof_point_t, self_syscall) },
    { TLC_APF_SELF_THREAD, "self_thread", offsetof(tlc_aprof_point_t, self_thread) },
  };
  size_t i;
  tlc_out_puts(o, "{\"rms\": ");
  tlc_out_u64(o, pt->rms);
  for (i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
    uint64_t v;
    if (!(f & cols[i].bit))
      continue;
    memcpy(&v, (const char *)pt + cols[i].off, sizeof(v));
    tlc_out_puts(o, ", \"");
    tlc_out_puts(o, cols[i].name);
    tlc_out_puts(o, "\": ");
    tlc_out_u64(o, v);
  }
  tlc_out_putc(o, '}');
}

static void jpoints(tlc_out_t *o, const tlc_aprof_point_t *pts, size_t n, unsigned f) {
  size_t i;
  tlc_out_puts(o, "\"points\": [");
  for (i = 0; i < n; i++) {
    tlc_out_puts(o, i ? ",\n        " : "\n        ");
    jpoint(o, &pts[i], f);
  }
  tlc_out_puts(o, n ? "\n      ]" : "]");
}

int tlc_aprof_to_json(const tlc_aprof_t *a, tlc_out_t *o) {
  size_t i;
  tlc_out_puts(o, "{\n");
  jkey(o, "  ", "schema");
  tlc_out_puts(o, "\"tlcap-aprof/1\",\n");
  jkey(o, "  ", "version");
  tlc_out_u64(o, a->version);
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "metric");
  jstr_or_null(o, a->metric ? a->metric : "bb-count");
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "metric_given");
  tlc_out_puts(o, a->has_metric ? "true,\n" : "false,\n");
  jkey(o, "  ", "layout");
  if (a->layout)
    tlc_out_u64(o, a->layout);
  else
    tlc_out_puts(o, "null");
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "mtime");
  jstr_or_null(o, a->mtime);
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "date");
  jstr_or_null(o, a->date);
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "command");
  jstr_or_null(o, a->command);
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "app");
  jstr_or_null(o, a->app);
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "input_metric");
  jstr_or_null(o, a->input_metric);
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "total_cost");
  if (a->has_total_cost)
    tlc_out_u64(o, a->total_cost);
  else
    tlc_out_puts(o, "null");
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "memory_resolution");
  if (a->has_granularity)
    tlc_out_u64(o, a->granularity);
  else
    tlc_out_puts(o, "null");
  tlc_out_puts(o, ",\n");
  jkey(o, "  ", "comments");
  tlc_out_putc(o, '[');
  for (i = 0; i < a->ncomments; i++) {
    if (i)
      tlc_out_puts(o, ", ");
    tlc_json_string(o, a->comments[i]);
  }
  tlc_out_puts(o, "],\n");
  jkey(o, "  ", "routines");
  tlc_out_putc(o, '[');
  for (i = 0; i < a->nroutines; i++) {
    const tlc_aprof_routine_t *r = &a->routines[i];
    tlc_out_puts(o, i ? ",\n    {" : "\n    {");
    tlc_out_puts(o, "\"id\": ");
    tlc_out_u64(o, r->id);
    tlc_out_puts(o, ", \"name\": ");
    tlc_json_string(o, r->name);
    tlc_out_puts(o, ", \"image\": ");
    tlc_json_string(o, r->image);
    tlc_out_puts(o, ", \"address\": ");
    if (r->has_address) {
      tlc_out_puts(o, "\"0x");
      tlc_out_hex(o, r->address, 0);
      tlc_out_putc(o, '"');
    } else {
      tlc_out_puts(o, "null");
    }
    tlc_out_puts(o, ", \"mangled\": ");
    jstr_or_null(o, r->mangled);
    tlc_out_puts(o, ", \"demangled\": ");
    jstr_or_null(o, r->demangled);
    if (r->has_distinct_rms) {
      tlc_out_puts(o, ", \"distinct_rms\": ");
      tlc_out_u64(o, r->distinct_rms);
    }
    tlc_out_puts(o, ",\n      ");
    jpoints(o, r->npoints ? a->points + r->first_point : NULL, r->npoints, a->fields);
    tlc_out_putc(o, '}');
  }
  tlc_out_puts(o, a->nroutines ? "\n  ],\n" : "],\n");
  jkey(o, "  ", "contexts");
  tlc_out_putc(o, '[');
  for (i = 0; i < a->ncontexts; i++) {
    const tlc_aprof_ctx_t *c = &a->contexts[i];
    tlc_out_puts(o, i ? ",\n    {" : "\n    {");
    tlc_out_puts(o, "\"id\": ");
    tlc_out_u64(o, c->id);
    tlc_out_puts(o, ", \"routine\": ");
    tlc_out_u64(o, c->routine_id);
    tlc_out_puts(o, ", \"parent\": ");
    if (c->parent_id < 0)
      tlc_out_puts(o, "null");
    else
      tlc_out_u64(o, (uint64_t)c->parent_id);
    tlc_out_puts(o, ",\n      ");
    jpoints(o, c->npoints ? a->cpoints + c->first_point : NULL, c->npoints, a->fields);
    tlc_out_putc(o, '}');
  }
  tlc_out_puts(o, a->ncontexts ? "\n  ]\n}\n" : "]\n}\n");
  return o->err;
}
