/* budget.c - timing budgets: definitions and the budget file (see budget.h). */
#include "formats/budget.h"

#include "base/alloc.h"
#include "base/err.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const stat_names[] = { "net", "gross", "call", "period", "outside", "rate" };

const char *tlc_tbudget_stat_name(unsigned stat) {
  return stat <= TLC_BSTAT_RATE ? stat_names[stat] : "?";
}

int tlc_tbudget_init(tlc_tbudget_t *b, const char *name, const char *origin, char *err,
                     size_t errlen) {
  size_t i, n = strlen(name);
  memset(b, 0, sizeof(*b));
  if (n == 0 || n > TLC_BUDGET_NAME_MAX) {
    snprintf(err, errlen, "a budget name has 1 to %d characters", TLC_BUDGET_NAME_MAX);
    return -1;
  }
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (!isalnum(c) && c != '_' && c != '-' && c != '.') {
      snprintf(err, errlen, "a budget name has only letters, digits, _ - and .");
      return -1;
    }
  }
  memcpy(b->name, name, n + 1);
  strcpy(b->target, "*");
  b->stat = 0;
  snprintf(b->origin, sizeof(b->origin), "%s", origin != NULL ? origin : "");
  return 0;
}

int tlc_tbudget_duration(const char *s, int count, int64_t *ns) {
  static const struct {
    const char *u;
    int64_t mul;
  } units[] = { { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 } };
  int64_t whole = 0, frac = 0, fscale = 1;
  const char *p = s;
  size_t i;
  int digits = 0;
  while (*p >= '0' && *p <= '9') {
    if (whole > (INT64_MAX - 9) / 10)
      return -1;
    whole = whole * 10 + (*p++ - '0');
    digits++;
  }
  if (count) {
    if (digits == 0 || *p != '\0')
      return -1;
    *ns = whole;
    return 0;
  }
  if (*p == '.') {
    p++;
    while (*p >= '0' && *p <= '9') {
      if (fscale <= INT64_MAX / 10 / 10) { /* digits beyond 1e-17 add nothing */
        frac = frac * 10 + (*p - '0');
        fscale *= 10;
      }
      p++;
      digits++;
    }
  }
  if (digits == 0)
    return -1;
  for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    if (strcmp(p, units[i].u) == 0) {
      int64_t m = units[i].mul, v;
      if (whole > INT64_MAX / m)
        return -1;
      v = whole * m;
      /* the fraction: frac / fscale * m, exact for the digits a unit can resolve */
      if (frac != 0) {
        int64_t f;
        if (m >= fscale)
          f = frac * (m / fscale);
        else
          f = frac / (fscale / m);
        if (v > INT64_MAX - f)
          return -1;
        v += f;
      }
      *ns = v;
      return 0;
    }
  }
  return -1;
}

static int is_glob(const char *s) {
  return strpbrk(s, "*?[") != NULL;
}

static int parse_handle(const char *s, uint32_t *h) {
  size_t i;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    s += 2;
  if (strlen(s) != 8)
    return -1;
  for (i = 0; i < 8; i++)
    if (!isxdigit((unsigned char)s[i]))
      return -1;
  *h = (uint32_t)strtoul(s, NULL, 16);
  return 0;
}

static int set_str(char *dst, size_t cap, const char *key, const char *val, char *err,
                   size_t errlen) {
  size_t n = strlen(val);
  if (n == 0 || n >= cap) {
    snprintf(err, errlen, "%s: 1 to %zu characters", key, cap - 1);
    return -1;
  }
  memcpy(dst, val, n + 1);
  return 0;
}

int tlc_tbudget_set_key(tlc_tbudget_t *b, const char *key, const char *val, char *err,
                        size_t errlen) {
  if (strcmp(key, "target") == 0)
    return set_str(b->target, sizeof(b->target), key, val, err, errlen);
  if (strcmp(key, "area") == 0) {
    if (set_str(b->area, sizeof(b->area), key, val, err, errlen) != 0)
      return -1;
    if (parse_handle(val, &b->handle) == 0)
      b->area_kind = TLC_BAREA_HANDLE;
    else
      b->area_kind = is_glob(val) ? TLC_BAREA_GLOB : TLC_BAREA_NAME;
    return 0;
  }
  if (strcmp(key, "context") == 0) {
    if (strcmp(val, "any") == 0) {
      b->context[0] = '\0';
      return 0;
    }
    return set_str(b->context, sizeof(b->context), key, val, err, errlen);
  }
  if (strcmp(key, "stat") == 0) {
    unsigned i;
    for (i = 0; i <= TLC_BSTAT_RATE; i++)
      if (strcmp(val, stat_names[i]) == 0) {
        b->stat = (uint8_t)i;
        return 0;
      }
    snprintf(err, errlen, "stat: one of net, gross, call, period, outside, rate (not '%s')", val);
    return -1;
  }
  if (strcmp(key, "max") == 0 || strcmp(key, "min") == 0) {
    int64_t v;
    /* rate limits are counts; the stat may come after the limit, so a count is taken as such
     * and checked against the stat in tlc_tbudget_check */
    if (tlc_tbudget_duration(val, 0, &v) != 0 && tlc_tbudget_duration(val, 1, &v) != 0) {
      snprintf(err, errlen,
               "%s: a duration with its unit (250us, 1.5ms, 2s) or, for rate, a count (not "
               "'%s')",
               key, val);
      return -1;
    }
    if (key[1] == 'a') {
      b->max = v;
      b->has_max = (uint8_t)(tlc_tbudget_duration(val, 1, &v) == 0 ? 2 : 1);
    } else {
      b->min = v;
      b->has_min = (uint8_t)(tlc_tbudget_duration(val, 1, &v) == 0 ? 2 : 1);
    }
    return 0;
  }
  if (strcmp(key, "window") == 0) {
    if (tlc_tbudget_duration(val, 0, &b->window_ns) != 0 || b->window_ns <= 0) {
      snprintf(err, errlen, "window: a duration with its unit, more than 0 (not '%s')", val);
      return -1;
    }
    return 0;
  }
  snprintf(err, errlen, "%s: unknown key (target, area, context, stat, max, min, window)", key);
  return -1;
}

int tlc_tbudget_check(const tlc_tbudget_t *b, char *err, size_t errlen) {
  int rate = b->stat == TLC_BSTAT_RATE;
  if (b->area[0] == '\0') {
    snprintf(err, errlen, "area: missing");
    return -1;
  }
  if (!b->has_max && !b->has_min) {
    snprintf(err, errlen, "max or min: missing");
    return -1;
  }
  /* has_*: 2 = written as a bare count, 1 = with a unit */
  if ((b->has_max && (b->has_max == 2) != rate) || (b->has_min && (b->has_min == 2) != rate)) {
    snprintf(err, errlen,
             rate ? "max/min: a count of events for rate (no unit)"
                  : "max/min: a duration with its unit (ns, us, ms, s)");
    return -1;
  }
  if (b->has_max && b->has_min && b->min > b->max) {
    snprintf(err, errlen, "min: more than max");
    return -1;
  }
  if (rate != (b->window_ns > 0)) {
    snprintf(err, errlen,
             rate ? "window: missing (rate counts events per window)"
                  : "window: only for stat = rate");
    return -1;
  }
  return 0;
}

int tlc_tbudget_target_match(const tlc_tbudget_t *b, const char *name) {
  return fnmatch(b->target, name, 0) == 0;
}

int tlc_tbudget_area_match(const tlc_tbudget_t *b, uint32_t handle, const char *name) {
  switch (b->area_kind) {
  case TLC_BAREA_HANDLE:
    return handle == b->handle;
  case TLC_BAREA_GLOB:
    return name != NULL && name[0] != '\0' && fnmatch(b->area, name, 0) == 0;
  default:
    return name != NULL && strcmp(b->area, name) == 0;
  }
}

void tlc_tbudget_set_init(tlc_tbudget_set_t *s) {
  memset(s, 0, sizeof(*s));
}

void tlc_tbudget_set_fini(tlc_tbudget_set_t *s) {
  tlc_free(s->b);
  memset(s, 0, sizeof(*s));
}

long tlc_tbudget_set_find(const tlc_tbudget_set_t *s, const char *name) {
  size_t i;
  for (i = 0; i < s->n; i++)
    if (strcmp(s->b[i].name, name) == 0)
      return (long)i;
  return -1;
}

int tlc_tbudget_set_add(tlc_tbudget_set_t *s, const tlc_tbudget_t *b, char *err, size_t errlen) {
  if (tlc_tbudget_set_find(s, b->name) >= 0) {
    snprintf(err, errlen, "a second budget named %s", b->name);
    return -1;
  }
  if (s->n >= TLC_BUDGET_MAX) {
    snprintf(err, errlen, "more than %d budgets", TLC_BUDGET_MAX);
    return -1;
  }
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 8;
    tlc_tbudget_t *nb = tlc_realloc(s->b, nc * sizeof(*nb));
    if (nb == NULL)
      return TLC_ENOMEM;
    s->b = nb;
    s->cap = nc;
  }
  s->b[s->n++] = *b;
  return 0;
}

/* trims spaces at both ends of [*p, *e) */
static void trim(const char **p, const char **e) {
  while (*p < *e && isspace((unsigned char)**p))
    (*p)++;
  while (*e > *p && isspace((unsigned char)(*e)[-1]))
    (*e)--;
}

/* Closes the open budget (if any) into s. */
static int finish(tlc_tbudget_set_t *s, tlc_tbudget_t *cur, int *open, char *msg, size_t msglen) {
  int rc;
  if (!*open)
    return 0;
  *open = 0;
  if (tlc_tbudget_check(cur, msg, msglen) != 0)
    return -1;
  rc = tlc_tbudget_set_add(s, cur, msg, msglen);
  return rc;
}

int tlc_tbudget_parse(tlc_tbudget_set_t *s, const char *text, size_t len, const char *fname,
                      char *err, size_t errlen) {
  tlc_tbudget_t cur;
  char msg[512], key[64], val[TLC_BUDGET_PAT_MAX + 2], origin[160];
  size_t pos = 0, line = 0, sec_line = 0;
  int open = 0, rc;
  s->n = 0;
  memset(&cur, 0, sizeof(cur));
  while (pos < len) {
    const char *p = text + pos, *nl = memchr(p, '\n', len - pos), *e = nl != NULL ? nl : text + len;
    pos = (size_t)(e - text) + (nl != NULL);
    line++;
    trim(&p, &e);
    if (p == e || *p == '#' || *p == ';')
      continue;
    if (memchr(p, '\0', (size_t)(e - p)) != NULL) {
      snprintf(err, errlen, "%s:%zu: a NUL byte", fname, line);
      goto fail;
    }
    if (*p == '[') {
      const char *q = e - 1, *n;
      if ((rc = finish(s, &cur, &open, msg, sizeof(msg))) != 0)
        goto fail_sec;
      if (*q != ']' || (size_t)(e - p) < 9 || strncmp(p, "[budget", 7) != 0 ||
          !isspace((unsigned char)p[7])) {
        snprintf(err, errlen, "%s:%zu: only [budget NAME] sections in a budget file", fname, line);
        goto fail;
      }
      n = p + 8;
      while (n < q && isspace((unsigned char)*n))
        n++;
      if ((size_t)(q - n) >= sizeof(key) + 1 || q == n) {
        snprintf(err, errlen, "%s:%zu: [budget NAME]: a name of 1 to %d characters", fname, line,
                 TLC_BUDGET_NAME_MAX);
        goto fail;
      }
      {
        char name[TLC_BUDGET_NAME_MAX + 2];
        size_t nl2 = (size_t)(q - n);
        if (nl2 > TLC_BUDGET_NAME_MAX) {
          snprintf(err, errlen, "%s:%zu: [budget NAME]: a name of 1 to %d characters", fname, line,
                   TLC_BUDGET_NAME_MAX);
          goto fail;
        }
        memcpy(name, n, nl2);
        name[nl2] = '\0';
        snprintf(origin, sizeof(origin), "%s:%zu", fname, line);
        if (tlc_tbudget_init(&cur, name, origin, msg, sizeof(msg)) != 0) {
          snprintf(err, errlen, "%s:%zu: [budget %s]: %s", fname, line, name, msg);
          goto fail;
        }
      }
      open = 1;
      sec_line = line;
      continue;
    }
    {
      const char *eq = memchr(p, '=', (size_t)(e - p)), *kp = p, *ke = eq, *vp, *ve = e;
      if (eq == NULL) {
        snprintf(err, errlen, "%s:%zu: 'key = value' expected", fname, line);
        goto fail;
      }
      if (!open) {
        snprintf(err, errlen, "%s:%zu: a key outside a [budget NAME] section", fname, line);
        goto fail;
      }
      trim(&kp, &ke);
      vp = eq + 1;
      trim(&vp, &ve);
      if ((size_t)(ke - kp) >= sizeof(key) || (size_t)(ve - vp) >= sizeof(val)) {
        snprintf(err, errlen, "%s:%zu: [budget %s]: key or value too long", fname, line, cur.name);
        goto fail;
      }
      memcpy(key, kp, (size_t)(ke - kp));
      key[ke - kp] = '\0';
      memcpy(val, vp, (size_t)(ve - vp));
      val[ve - vp] = '\0';
      if (tlc_tbudget_set_key(&cur, key, val, msg, sizeof(msg)) != 0) {
        snprintf(err, errlen, "%s:%zu: [budget %s] %s", fname, line, cur.name, msg);
        goto fail;
      }
    }
  }
  if ((rc = finish(s, &cur, &open, msg, sizeof(msg))) != 0)
    goto fail_sec;
  return 0;
fail_sec:
  if (rc == TLC_ENOMEM) {
    s->n = 0;
    return TLC_ENOMEM;
  }
  snprintf(err, errlen, "%s:%zu: [budget %s] %s", fname, sec_line, cur.name, msg);
fail:
  s->n = 0;
  return -1;
}
