/* xref.c - an extreme's REF: `max|min:KIND:AREA[@CONTEXT]` parsed, and the sample it names
 * found among the rows of one area of a statistics table (xref.h).
 *
 * The lookup is what `tlcap around` (the daemon, on its loop, over a snapshot of that one
 * area) and `tlcapd replay --around` (over the statistics of every stored segment) share, so
 * that the two name the same sample and say the same when there is none. It looks at the
 * area's rows only: O(rows of the table) for the scan, O(areas of the mapping) for a name.
 * It does not read events: the moment around the sample is the caller's (moment.h).
 */
#include "formats/xref.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"

static const char *const kind_names[TLC_NKINDS] = { "net", "gross", "call", "period", "outside" };

#define LIST_MAX 8 /* contexts or handles a message lists */

int tlc_xref_parse(const char *ref, tlc_xref_t *x, char *err, size_t errlen) {
  const char *p, *colon, *at;
  size_t klen, alen;
  int k;
  if (ref == NULL || (strncmp(ref, "max:", 4) != 0 && strncmp(ref, "min:", 4) != 0))
    return 0;
  memset(x, 0, sizeof(*x));
  x->max = ref[1] == 'a';
  p = ref + 4;
  if ((colon = strchr(p, ':')) == NULL)
    goto bad;
  klen = (size_t)(colon - p);
  for (k = 0; k < TLC_NKINDS; k++)
    if (strlen(kind_names[k]) == klen && strncasecmp(p, kind_names[k], klen) == 0)
      break;
  if (k == TLC_NKINDS)
    goto bad;
  x->kind = (uint8_t)k;
  p = colon + 1;
  for (const char *q = p; *q != '\0'; q++)
    if ((unsigned char)*q < 0x20 || *q == 0x7f)
      goto bad;
  at = strrchr(p, '@');
  alen = at != NULL ? (size_t)(at - p) : strlen(p);
  if (alen == 0 || alen > TLC_XREF_AREA_MAX)
    goto bad;
  memcpy(x->area, p, alen);
  x->area[alen] = '\0';
  if (at != NULL) {
    size_t clen = strlen(at + 1);
    if (clen == 0 || clen > TLC_XREF_CTX_MAX)
      goto bad;
    memcpy(x->context, at + 1, clen + 1);
    x->has_context = 1;
  }
  return 1;
bad:
  snprintf(err, errlen,
           "around: '%.200s' is not an extreme's REF (max:KIND:AREA[@CONTEXT] or "
           "min:KIND:AREA[@CONTEXT], KIND net, gross, call, period or outside)",
           ref);
  return -1;
}

const char *tlc_xref_text(const tlc_xref_t *x, char *buf, size_t len) {
  snprintf(buf, len, "%s:%s:%s%s%s", x->max ? "max" : "min", kind_names[x->kind % TLC_NKINDS],
           x->area, x->has_context ? "@" : "", x->has_context ? x->context : "");
  return buf;
}

/* A number: 0x and hex, exactly `hex8` hex digits (the 8 `tlcap stats` shows), or decimal.
 * 0 with *v, or -1. */
static int parse_num(const char *s, int hex8, uint64_t max, uint64_t *v) {
  char *end;
  unsigned long long n;
  int base = 10;
  size_t len = strlen(s);
  if (len == 0 || s[0] == '-' || s[0] == '+' || s[0] == ' ')
    return -1;
  if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
    len -= 2;
  } else if (hex8 && len == 8 && strspn(s, "0123456789abcdefABCDEF") == 8) {
    base = 16;
  }
  if (strspn(s, base == 16 ? "0123456789abcdefABCDEF" : "0123456789") != len || len > 20)
    return -1;
  errno = 0;
  n = strtoull(s, &end, base);
  if (errno != 0 || *end != '\0' || n > max)
    return -1;
  *v = n;
  return 0;
}

int tlc_xref_handle(const tlc_xref_t *x, const tlc_mapping_t *m, uint32_t *handle, char *err,
                    size_t errlen) {
  uint32_t found[LIST_MAX];
  size_t nfound = 0, more = 0;
  char ref[420];
  uint64_t v;
  for (size_t i = 0; m != NULL && i < m->nareas; i++) {
    size_t k;
    if (strcmp(m->areas[i].name, x->area) != 0)
      continue;
    for (k = 0; k < nfound && found[k] != m->areas[i].handle; k++)
      ;
    if (k < nfound)
      continue;
    if (nfound < LIST_MAX)
      found[nfound++] = m->areas[i].handle;
    else
      more++;
  }
  if (nfound == 1) {
    *handle = found[0];
    return 0;
  }
  tlc_xref_text(x, ref, sizeof(ref));
  if (nfound > 1) {
    size_t o = (size_t)snprintf(err, errlen, "%s: %s names %zu areas: name one by its handle:", ref,
                                x->area, nfound + more);
    for (size_t k = 0; k < nfound && o < errlen; k++)
      o += (size_t)snprintf(err + o, errlen - o, "%s 0x%08" PRIX32, k ? "," : "", found[k]);
    if (more > 0 && o < errlen)
      snprintf(err + o, errlen - o, ", ...");
    return TLC_EINVAL;
  }
  if (parse_num(x->area, 1, UINT32_MAX, &v) == 0) {
    *handle = (uint32_t)v;
    return 0;
  }
  snprintf(err, errlen,
           "%s: no area named %s on this target (an area is a mapped name or a "
           "handle: 0x0000002A, 0000002A or 42)",
           ref, x->area);
  return -ENOENT;
}

/* The context of row r as the exports name it (a state row: state=VALUE, its value's name
 * when mapped), into buf; returns it. */
static const char *row_ctx(const tlc_table_t *t, const tlc_mapping_t *m, const tlc_stat_t *r,
                           char *buf, size_t len) {
  if (r->kind == TLC_ROW_STATE) {
    const tlc_map_area_t *a = m != NULL ? tlc_mapping_find_value(m, r->handle, r->state) : NULL;
    if (a != NULL && a->name[0] != '\0')
      snprintf(buf, len, "%s", a->name);
    else
      snprintf(buf, len, "state=%" PRIu64, r->state);
    return buf;
  }
  if (r->context == TLC_CTX_NONE) {
    snprintf(buf, len, "-");
    return buf;
  }
  return tlc_mapping_ctx_display(m, t, r->context, buf, len);
}

/* Does row r's context answer to `want` (xref.h: a name, an id, state=VALUE)? */
static int ctx_matches(const tlc_table_t *t, const tlc_mapping_t *m, const tlc_stat_t *r,
                       const char *want) {
  char buf[160];
  uint64_t v;
  if (r->kind == TLC_ROW_STATE) {
    if (strncmp(want, "state=", 6) == 0)
      return parse_num(want + 6, 0, UINT64_MAX, &v) == 0 && v == r->state;
    return strcmp(row_ctx(t, m, r, buf, sizeof(buf)), want) == 0;
  }
  if (r->context == TLC_CTX_NONE || r->context >= t->ncontexts)
    return 0;
  if (strcmp(tlc_mapping_ctx_display(m, t, r->context, buf, sizeof(buf)), want) == 0 ||
      strcasecmp(tlc_ctx_name(t, r->context, buf, sizeof(buf)), want) == 0)
    return 1;
  return parse_num(want, 0, UINT64_MAX, &v) == 0 && v == tlc_ctx_handle(&t->contexts[r->context]);
}

/* ": a, b, c" - the contexts of rows rs[0..n) - appended to err at o. */
static void list_ctx(const tlc_table_t *t, const tlc_mapping_t *m, const tlc_stat_t *const *rs,
                     size_t n, char *err, size_t errlen, size_t o) {
  char buf[160];
  for (size_t i = 0; i < n && i < LIST_MAX && o < errlen; i++)
    o += (size_t)snprintf(err + o, errlen - o, "%s%s", i ? ", " : "",
                          row_ctx(t, m, rs[i], buf, sizeof(buf)));
  if (n > LIST_MAX && o < errlen)
    snprintf(err + o, errlen - o, ", ... (%zu in all)", n);
}

int tlc_xref_find(const tlc_xref_t *x, const tlc_table_t *t, const tlc_mapping_t *m,
                  uint32_t handle, tlc_at_t *at, int64_t *value, char *err, size_t errlen) {
  const tlc_stat_t *rows[LIST_MAX + 1], *r = NULL;
  size_t nrows = 0, nmatch = 0, o;
  char ref[420], ctx[160];
  const tlc_dist_t *d;
  const char *kname = kind_names[x->kind % TLC_NKINDS];
  tlc_xref_text(x, ref, sizeof(ref));
  for (size_t i = 0; i < t->nrows; i++) {
    const tlc_stat_t *s = &t->rows[i];
    if (s->handle != handle || s->context == TLC_CTX_NEUTRAL)
      continue;
    if (nrows <= LIST_MAX)
      rows[nrows] = s;
    nrows++;
    if (x->has_context && ctx_matches(t, m, s, x->context)) {
      nmatch++;
      r = s;
    }
  }
  if (nrows == 0) {
    snprintf(err, errlen, "%s: no sample of %s (0x%08" PRIX32 ") yet", ref, x->area, handle);
    return TLC_ERANGE;
  }
  if (x->has_context && nmatch != 1) {
    if (rows[0]->kind == TLC_ROW_DATA) {
      snprintf(err, errlen, "%s: %s is a data area: it has no contexts (%s:%s:%s)", ref, x->area,
               x->max ? "max" : "min", kname, x->area);
      return -ENOENT;
    }
    o = (size_t)snprintf(err, errlen, "%s: %s %s in %s; its %s: ", ref,
                         nmatch == 0 ? "no context" : "several contexts answer to", x->context,
                         x->area, rows[0]->kind == TLC_ROW_STATE ? "states" : "contexts");
    list_ctx(t, m, rows, nrows, err, errlen, o);
    return nmatch == 0 ? -ENOENT : TLC_EINVAL;
  }
  if (!x->has_context) {
    if (nrows > 1) {
      o = (size_t)snprintf(err, errlen, "%s: %s has samples in %zu %s: name one (%s@NAME): ", ref,
                           x->area, nrows, rows[0]->kind == TLC_ROW_STATE ? "states" : "contexts",
                           ref);
      list_ctx(t, m, rows, nrows, err, errlen, o);
      return TLC_EINVAL;
    }
    r = rows[0];
  }
  ctx[0] = '\0';
  if (r->context != TLC_CTX_NONE || r->kind == TLC_ROW_STATE) { /* " in core0": where it is */
    char buf[150];
    snprintf(ctx, sizeof(ctx), " in %s", row_ctx(t, m, r, buf, sizeof(buf)));
  }
  if (!tlc_stat_kind_applies(r, x->kind)) {
    snprintf(err, errlen, "%s: %s is a %s area: it has no %s samples", ref, x->area,
             r->kind == TLC_ROW_DATA ? "data" : "state", kname);
    return TLC_EINVAL;
  }
  d = &r->dist[x->kind];
  if (d->n == 0) {
    snprintf(err, errlen, "%s: no %s sample of %s%s yet", ref, kname, x->area, ctx);
    return TLC_ERANGE;
  }
  *at = x->max ? d->max_at : d->min_at;
  *value = x->max ? d->max : d->min;
  if (!at->known) {
    snprintf(err, errlen,
             "%s: the time of %s's %s %s%s (%" PRId64 " ns) is not known: statistics "
             "restored from an older checkpoint have none until a sample makes a new extreme",
             ref, x->area, x->max ? "MAX" : "MIN", kname, ctx, *value);
    return TLC_ERANGE;
  }
  return 0;
}
