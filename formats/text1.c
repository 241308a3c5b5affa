/* text1.c - winIDEA Text1 export writer (see text1.h).
 *
 * Layout written (each section header names its entry format, as winIDEA does):
 *
 *   * INFO %TOTAL_TIME%
 *   7962907051
 *
 *   * CONTEXTS %NAME%,%HANDLE%
 *   core0,0x0
 *
 *   * HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%      (types 0,1; then Data 2,3; then AUX 4,5)
 *   00000000,main,
 *
 *   * STATISTICS(Functions) CONTEXT(core0) %HANDLE%,%VALUE%,%COUNT%,%T.NET%
 *   ...                                   (once per context, then CONTEXT(Neutral); the
 *                                          CONTEXT(...) part only when there are several)
 *   * STATISTICS(Data) ...   * STATISTICS(AUX) ...
 *
 *   * TIMELINE %HANDLE%,%EVENT%,%VALUE%,%TIME%
 *   20000000,W,00000001,4336
 *
 * Number formats (SPEC section 4): HANDLE 8 uppercase hex digits; VALUE uppercase hex, 8 digits
 * zero-padded in TIMELINE and unpadded elsewhere; times decimal ns; totals print 0 when empty;
 * MIN/MAX/AVG print nothing without samples; a macro that does not apply to the row's area type
 * prints nothing.
 *
 * Invariants: formats are compiled once into token lists (tlc_text1_set_format); a row is
 * written with no allocation; statistics rows are bucketed by context with one counting sort,
 * so the cost is O(rows + contexts), never rows x contexts. The timeline is streamed from the
 * tlc_timeline_t, never held in memory.
 *
 * Does not: read Text1 (mapping.c does), or decide which areas exist (the table does: only
 * observed areas have statistics, SPEC section 2).
 */
#include "formats/text1.h"

#include "base/alloc.h"
#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Macro ids, names and the entries each applies to. */
enum {
  M_LIT = 0,
  M_FORMAT,
  M_CLASS,
  M_CONTEXT,
  M_HANDLE,
  M_HANDLE_PARENT,
  M_HANDLE_STATE,
  M_NAME,
  M_NAME_PARENT,
  M_VALUE,
  M_VALUE_TYPE,
  M_VALUE_UNIT,
  M_FILE,
  M_COUNT,
  M_EVENT,
  M_TIME,
  M_TOTAL_TIME,
  M_PATH,
  M_CORE,      /* extension: core index of a timeline event (-1 unknown) */
  M_ANOMALIES, /* extension: anomalies counted on a statistics row */
  M_T_FIRST,   /* T.<kind>[.<crit>] macros follow: M_T_FIRST + kind * 4 + crit */
  M_T_LAST = M_T_FIRST + TLC_NKINDS * 4 - 1,
  M_COUNT_ALL
};

#define E_INFO (1u << TLC_T1_INFO)
#define E_CTX  (1u << TLC_T1_CONTEXT)
#define E_MAP  (1u << TLC_T1_MAPPING)
#define E_STAT (1u << TLC_T1_STATISTICS)
#define E_TL   (1u << TLC_T1_TIMELINE)
#define E_ALL  (E_INFO | E_CTX | E_MAP | E_STAT | E_TL)

static const struct {
  const char *name;
  unsigned id;
  unsigned entries;
} macros[] = {
  { "FORMAT", M_FORMAT, E_ALL },
  { "CLASS", M_CLASS, E_MAP | E_STAT },
  { "CONTEXT", M_CONTEXT, E_STAT | E_TL },
  { "HANDLE", M_HANDLE, E_CTX | E_MAP | E_STAT | E_TL },
  { "HANDLE.PARENT", M_HANDLE_PARENT, E_MAP | E_STAT },
  { "HANDLE.STATE", M_HANDLE_STATE, E_MAP | E_STAT },
  { "NAME", M_NAME, E_CTX | E_MAP | E_STAT },
  { "NAME.PARENT", M_NAME_PARENT, E_MAP | E_STAT },
  { "VALUE", M_VALUE, E_MAP | E_STAT | E_TL },
  { "VALUE.TYPE", M_VALUE_TYPE, E_MAP },
  { "VALUE.UNIT", M_VALUE_UNIT, E_MAP },
  { "FILE", M_FILE, E_MAP | E_STAT },
  { "COUNT", M_COUNT, E_STAT },
  { "EVENT", M_EVENT, E_TL },
  { "TIME", M_TIME, E_TL },
  { "TOTAL_TIME", M_TOTAL_TIME, E_INFO },
  { "PATH", M_PATH, E_MAP },
  { "CORE", M_CORE, E_TL },
  { "ANOMALIES", M_ANOMALIES, E_STAT },
};

static const char *const kind_names[TLC_NKINDS] = { "NET", "GROSS", "CALL", "PERIOD", "OUTSIDE" };
static const char *const crit_names[4] = { "", ".MIN", ".MAX", ".AVG" };

static const char *const entry_names[TLC_T1_NENTRIES] = { "InfoEntry", "ContextEntry",
                                                          "MappingEntry", "StatisticsEntry",
                                                          "TimelineEntry" };

static const char *const default_formats[TLC_T1_NENTRIES] = {
  "%TOTAL_TIME%",
  "%NAME%,%HANDLE%",
  "%HANDLE%,%NAME%,%VALUE%",
  "%HANDLE%,%VALUE%,%COUNT%,%T.NET%",
  "%HANDLE%,%EVENT%,%VALUE%,%TIME%",
};

/* Looks a macro name up; returns its id or 0. Accepts the seed's "T. OUTSIDE.MIN" spelling
 * (a stray space after "T.") as T.OUTSIDE.MIN. */
static unsigned macro_id(const char *s, size_t n, unsigned *entries) {
  char name[64];
  size_t i, j = 0;
  if (n >= sizeof(name))
    return 0;
  for (i = 0; i < n; i++) {
    if (s[i] == ' ' && j == 2 && name[0] == 'T' && name[1] == '.')
      continue;
    name[j++] = s[i];
  }
  name[j] = '\0';
  for (i = 0; i < sizeof(macros) / sizeof(macros[0]); i++) {
    if (strcmp(macros[i].name, name) == 0) {
      *entries = macros[i].entries;
      return macros[i].id;
    }
  }
  if (name[0] == 'T' && name[1] == '.') {
    unsigned k, c;
    for (k = 0; k < TLC_NKINDS; k++) {
      size_t kl = strlen(kind_names[k]);
      if (strncmp(name + 2, kind_names[k], kl) != 0)
        continue;
      for (c = 0; c < 4; c++) {
        if (strcmp(name + 2 + kl, crit_names[c]) == 0) {
          if (k == TLC_PERIOD && c == 0)
            return 0; /* the seed has no total period (SPEC: "no total") */
          *entries = E_STAT;
          return M_T_FIRST + k * 4 + c;
        }
      }
    }
  }
  return 0;
}

static int compile(tlc_text1_fmt_t *f, unsigned entry, const char *text, char *err, size_t errlen) {
  size_t n = strlen(text), i = 0;
  if (n >= sizeof(f->text)) {
    snprintf(err, errlen, "%s format is longer than %d bytes", entry_names[entry],
             TLC_T1_MAX_FORMAT - 1);
    return TLC_EINVAL;
  }
  memcpy(f->text, text, n + 1);
  f->ntok = 0;
  while (i < n) {
    tlc_text1_tok_t *t;
    if (f->ntok == TLC_T1_MAX_TOKENS) {
      snprintf(err, errlen, "%s format has more than %d fields", entry_names[entry],
               TLC_T1_MAX_TOKENS);
      return TLC_EINVAL;
    }
    t = &f->tok[f->ntok++];
    if (text[i] == '%') {
      const char *end = strchr(text + i + 1, '%');
      unsigned ent = 0, id;
      if (end == NULL) {
        snprintf(err, errlen, "%s format: unterminated macro at column %zu", entry_names[entry],
                 i + 1);
        return TLC_EINVAL;
      }
      if (end == text + i + 1) { /* "%%" is a literal percent sign */
        t->macro = M_LIT;
        t->off = (uint16_t)i;
        t->len = 1;
        i += 2;
        continue;
      }
      id = macro_id(text + i + 1, (size_t)(end - text - i - 1), &ent);
      if (id == 0) {
        snprintf(err, errlen, "%s format: unknown macro %%%.*s%%", entry_names[entry],
                 (int)(end - text - i - 1), text + i + 1);
        return TLC_EINVAL;
      }
      if ((ent & (1u << entry)) == 0) {
        snprintf(err, errlen, "%s format: macro %%%.*s%% does not apply to %s", entry_names[entry],
                 (int)(end - text - i - 1), text + i + 1, entry_names[entry]);
        return TLC_EINVAL;
      }
      t->macro = (uint16_t)id;
      t->off = (uint16_t)i;
      t->len = (uint16_t)(end - text - i + 1);
      i = (size_t)(end - text) + 1;
    } else {
      size_t j = i;
      while (j < n && text[j] != '%')
        j++;
      t->macro = M_LIT;
      t->off = (uint16_t)i;
      t->len = (uint16_t)(j - i);
      i = j;
    }
  }
  return 0;
}

void tlc_text1_opts_default(tlc_text1_opts_t *opts) {
  unsigned e;
  char err[8];
  memset(opts, 0, sizeof(*opts));
  for (e = 0; e < TLC_T1_NENTRIES; e++)
    compile(&opts->fmt[e], e, default_formats[e], err, sizeof(err));
  opts->sections = TLC_T1_SEC_ALL;
}

int tlc_text1_set_format(tlc_text1_opts_t *opts, const char *spec, char *err, size_t errlen) {
  const char *eq = strchr(spec, '=');
  unsigned e;
  if (eq == NULL) {
    snprintf(err, errlen, "--text1-format expects ENTRY=FORMAT, got \"%s\"", spec);
    return TLC_EINVAL;
  }
  for (e = 0; e < TLC_T1_NENTRIES; e++) {
    if (strlen(entry_names[e]) == (size_t)(eq - spec) &&
        strncmp(entry_names[e], spec, (size_t)(eq - spec)) == 0) {
      tlc_text1_fmt_t tmp;
      int r = compile(&tmp, e, eq + 1, err, errlen);
      if (r == 0)
        opts->fmt[e] = tmp;
      return r;
    }
  }
  snprintf(err, errlen,
           "unknown Text1 entry \"%.*s\" (InfoEntry, ContextEntry, MappingEntry, "
           "StatisticsEntry, TimelineEntry)",
           (int)(eq - spec), spec);
  return TLC_EINVAL;
}

void tlc_text1_field(tlc_out_t *o, const char *s, char sep) {
  const char *p;
  if (!tlc_mapping_field_needs_quotes(s, sep)) {
    tlc_out_puts(o, s);
    return;
  }
  tlc_out_putc(o, '"');
  for (p = s; *p; p++) {
    if (*p == '"')
      tlc_out_putc(o, '"');
    tlc_out_putc(o, *p);
  }
  tlc_out_putc(o, '"');
}

/* Everything a token may need, for whichever entry is being written. */
typedef struct row_ctx {
  const tlc_text1_fmt_t *fmt;
  const char *klass;
  const char *context;
  uint32_t handle;
  int has_handle;
  const tlc_map_area_t *ma; /* mapping entry of the area (or of the state value) */
  const tlc_map_area_t *parent;
  const tlc_stat_t *row; /* statistics entry */
  const tlc_event_t *ev; /* timeline entry */
  int has_value;
  uint64_t value;
  unsigned value_width;
  const char *name; /* ContextEntry / fallback names */
  int64_t total_time;
  uint64_t ctx_handle; /* ContextEntry */
  int is_ctx;          /* writing a ContextEntry: HANDLE is the context handle */
} row_ctx_t;

static char sep_after(const tlc_text1_fmt_t *f, unsigned i) {
  if (i + 1 < f->ntok && f->tok[i + 1].macro == M_LIT)
    return f->text[f->tok[i + 1].off];
  return '\0';
}

static void put_t(tlc_out_t *o, const tlc_stat_t *r, unsigned k, unsigned crit) {
  const tlc_dist_t *d = &r->dist[k];
  if (!tlc_stat_kind_applies(r, k))
    return;
  switch (crit) {
  case 0:
    tlc_out_i64(o, r->total[k]);
    break;
  case 1:
    if (d->n)
      tlc_out_i64(o, d->min);
    break;
  case 2:
    if (d->n)
      tlc_out_i64(o, d->max);
    break;
  default:
    if (d->n)
      tlc_out_i64(o, tlc_dist_avg(d));
    break;
  }
}

static void write_entry(tlc_out_t *o, const row_ctx_t *c) {
  const tlc_text1_fmt_t *f = c->fmt;
  unsigned i;
  for (i = 0; i < f->ntok; i++) {
    const tlc_text1_tok_t *t = &f->tok[i];
    char sep = sep_after(f, i);
    switch (t->macro) {
    case M_LIT:
      tlc_out_write(o, f->text + t->off, t->len);
      break;
    case M_FORMAT:
      tlc_text1_field(o, f->text, sep);
      break;
    case M_CLASS:
      if (c->klass)
        tlc_out_puts(o, c->klass);
      break;
    case M_CONTEXT:
      if (c->context)
        tlc_text1_field(o, c->context, sep);
      break;
    case M_HANDLE:
      if (c->is_ctx) {
        tlc_out_puts(o, "0x");
        tlc_out_hex(o, c->ctx_handle, 0);
      } else if (c->has_handle) {
        tlc_out_hex(o, c->handle, 8);
      }
      break;
    case M_HANDLE_PARENT:
      if (c->ma && c->ma->parent != TLC_NO_HANDLE)
        tlc_out_hex(o, c->ma->parent, 8);
      break;
    case M_HANDLE_STATE:
      if (c->ma && c->ma->state_handle != TLC_NO_HANDLE)
        tlc_out_hex(o, c->ma->state_handle, 8);
      break;
    case M_NAME:
      if (c->name)
        tlc_text1_field(o, c->name, sep);
      else if (c->ma)
        tlc_text1_field(o, c->ma->name, sep);
      break;
    case M_NAME_PARENT:
      if (c->parent)
        tlc_text1_field(o, c->parent->name, sep);
      break;
    case M_VALUE:
      if (c->has_value)
        tlc_out_hex(o, c->value, c->value_width);
      break;
    case M_VALUE_TYPE:
      if (c->ma)
        tlc_text1_field(o, c->ma->value_type, sep);
      break;
    case M_VALUE_UNIT:
      if (c->ma)
        tlc_text1_field(o, c->ma->unit, sep);
      break;
    case M_FILE:
      if (c->ma)
        tlc_text1_field(o, c->ma->file, sep);
      break;
    case M_PATH:
      if (c->ma)
        tlc_text1_field(o, c->ma->path, sep);
      break;
    case M_COUNT:
      if (c->row)
        tlc_out_u64(o, c->row->count);
      break;
    case M_ANOMALIES:
      if (c->row)
        tlc_out_u64(o, c->row->anomalies);
      break;
    case M_EVENT:
      if (c->ev)
        tlc_out_putc(o, tlc_ev_char(c->ev->type));
      break;
    case M_TIME:
      if (c->ev)
        tlc_out_i64(o, c->ev->time_ns);
      break;
    case M_CORE:
      if (c->ev) {
        if (c->ev->core == TLC_CORE_UNKNOWN)
          tlc_out_puts(o, "-1");
        else
          tlc_out_u64(o, c->ev->core);
      }
      break;
    case M_TOTAL_TIME:
      tlc_out_i64(o, c->total_time);
      break;
    default:
      if (t->macro >= M_T_FIRST && t->macro <= M_T_LAST && c->row) {
        unsigned x = t->macro - M_T_FIRST;
        put_t(o, c->row, x / 4, x % 4);
      }
      break;
    }
  }
  tlc_out_putc(o, '\n');
}

static void header(tlc_out_t *o, const char *sec, const char *ctx, const tlc_text1_fmt_t *f) {
  tlc_out_puts(o, "* ");
  tlc_out_puts(o, sec);
  if (ctx != NULL) {
    tlc_out_puts(o, " CONTEXT(");
    tlc_out_puts(o, ctx);
    tlc_out_putc(o, ')');
  }
  tlc_out_putc(o, ' ');
  tlc_out_write(o, f->text, strlen(f->text));
  tlc_out_putc(o, '\n');
}

static void write_info(tlc_out_t *o, const tlc_text1_opts_t *opts, const tlc_table_t *t) {
  row_ctx_t c;
  memset(&c, 0, sizeof(c));
  c.fmt = &opts->fmt[TLC_T1_INFO];
  c.total_time = tlc_table_total_time(t);
  header(o, "INFO", NULL, c.fmt);
  write_entry(o, &c);
  tlc_out_putc(o, '\n');
}

static void write_contexts(tlc_out_t *o, const tlc_text1_opts_t *opts, const tlc_table_t *t,
                           const tlc_mapping_t *m) {
  size_t i;
  char buf[64];
  header(o, "CONTEXTS", NULL, &opts->fmt[TLC_T1_CONTEXT]);
  for (i = 0; i < t->ncontexts; i++) {
    row_ctx_t c;
    memset(&c, 0, sizeof(c));
    c.fmt = &opts->fmt[TLC_T1_CONTEXT];
    c.name = tlc_mapping_ctx_display(m, t, (uint32_t)i, buf, sizeof(buf));
    c.ctx_handle = tlc_ctx_handle(&t->contexts[i]);
    c.is_ctx = 1;
    write_entry(o, &c);
  }
  tlc_out_putc(o, '\n');
}

/* Fills the mapping-derived fields of c for (handle, state value). */
static void fill_names(row_ctx_t *c, const tlc_mapping_t *m, const tlc_stat_t *r) {
  c->ma = tlc_mapping_row_entry(m, r);
  c->parent = NULL;
  if (c->ma != NULL && c->ma->parent != TLC_NO_HANDLE)
    c->parent = tlc_mapping_find(m, c->ma->parent);
}

static int in_class(uint32_t handle, unsigned lo_area) {
  unsigned a = tlc_handle_area(handle);
  return a == lo_area || a == lo_area + 1;
}

/* One line of a HANDLE(...) section: a mapping entry, or an observed area it does not list. */
typedef struct hitem {
  uint32_t owner; /* the function or variable the entry belongs to (itself for those) */
  uint8_t child;  /* a line (under its function) or a state (under its variable) */
  uint8_t has_value;
  uint32_t handle;
  uint64_t value;
  const tlc_map_area_t *ma;
} hitem_t;

static int hitem_cmp(const void *pa, const void *pb) {
  const hitem_t *a = pa, *b = pb;
  if (a->owner != b->owner)
    return a->owner < b->owner ? -1 : 1;
  if (a->child != b->child)
    return a->child < b->child ? -1 : 1;
  if (a->handle != b->handle)
    return a->handle < b->handle ? -1 : 1;
  if (a->value != b->value)
    return a->value < b->value ? -1 : 1;
  return 0;
}

/* Owner of a child entry: its mapping parent, else (states) the variable with the same low 28
 * bits, winIDEA's numbering; a line without a known parent stands on its own. */
static uint32_t owner_of(uint32_t handle, const tlc_map_area_t *ma) {
  unsigned area = tlc_handle_area(handle);
  if (ma != NULL && ma->parent != TLC_NO_HANDLE)
    return ma->parent;
  if (area == TLC_AREA_VARSTATE || area == TLC_AREA_AUXSTATE)
    return ((uint32_t)(area - 1) << 28) | (handle & 0x0FFFFFFFu);
  return handle;
}

/* One HANDLE(...) section: the mapping's entries of that class and the observed areas the
 * mapping does not list, each parent followed by its children (a function by its lines, a
 * variable by its states), as winIDEA lists them; the mapping reader relies on that order to
 * link states to variables when the format has no HANDLE.PARENT. */
static int write_handles(tlc_out_t *o, const tlc_text1_opts_t *opts, const tlc_table_t *t,
                         const tlc_mapping_t *m, unsigned lo_area, const char *klass) {
  const tlc_text1_fmt_t *f = &opts->fmt[TLC_T1_MAPPING];
  char sec[32];
  size_t i, n = 0, mn = m ? m->nareas : 0;
  hitem_t *items;
  snprintf(sec, sizeof(sec), "HANDLE(%s)", klass);
  header(o, sec, NULL, f);
  items = tlc_malloc((mn + t->nrows + 1) * sizeof(*items));
  if (items == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < mn; i++) {
    const tlc_map_area_t *ma = &m->areas[i];
    if (!in_class(ma->handle, lo_area))
      continue;
    items[n].handle = ma->handle;
    items[n].child = tlc_handle_area(ma->handle) != lo_area;
    items[n].owner = items[n].child ? owner_of(ma->handle, ma) : ma->handle;
    items[n].has_value = ma->has_value;
    items[n].value = ma->has_value ? ma->value : 0;
    items[n].ma = ma;
    n++;
  }
  for (i = 0; i < t->nrows; i++) {
    const tlc_stat_t *r = &t->rows[i];
    int st = r->kind == TLC_ROW_STATE;
    if (!in_class(r->handle, lo_area) || !tlc_mapping_row_unlisted(m, t, i))
      continue;
    items[n].handle = r->handle;
    items[n].child = tlc_handle_area(r->handle) != lo_area;
    items[n].owner = items[n].child ? owner_of(r->handle, NULL) : r->handle;
    items[n].has_value = (uint8_t)st;
    items[n].value = st ? r->state : 0;
    items[n].ma = NULL;
    n++;
  }
  qsort(items, n, sizeof(*items), hitem_cmp);
  for (i = 0; i < n; i++) {
    row_ctx_t c;
    memset(&c, 0, sizeof(c));
    c.fmt = f;
    c.klass = klass;
    c.has_handle = 1;
    c.handle = items[i].handle;
    c.ma = items[i].ma;
    c.has_value = items[i].has_value;
    c.value = items[i].value;
    if (c.ma == NULL)
      c.name = "";
    else if (c.ma->parent != TLC_NO_HANDLE)
      c.parent = tlc_mapping_find(m, c.ma->parent);
    write_entry(o, &c);
  }
  tlc_free(items);
  tlc_out_putc(o, '\n');
  return 0;
}

static void stat_entry(tlc_out_t *o, const tlc_text1_fmt_t *f, const tlc_mapping_t *m,
                       const tlc_stat_t *r, const char *klass, const char *context) {
  row_ctx_t c;
  memset(&c, 0, sizeof(c));
  c.fmt = f;
  c.klass = klass;
  c.context = context;
  c.row = r;
  c.handle = r->handle;
  c.has_handle = 1;
  fill_names(&c, m, r);
  switch (r->kind) {
  case TLC_ROW_STATE:
    c.has_value = 1;
    c.value = r->state;
    break;
  case TLC_ROW_DATA:
    c.has_value = r->has_value;
    c.value = r->value;
    break;
  default: /* a line area's VALUE is its line number, from the mapping */
    if (tlc_handle_area(r->handle) == TLC_AREA_LINE && c.ma != NULL && c.ma->has_value) {
      c.has_value = 1;
      c.value = c.ma->value;
    }
    break;
  }
  write_entry(o, &c);
}

static int write_statistics(tlc_out_t *o, const tlc_text1_opts_t *opts, const tlc_table_t *t,
                            const tlc_mapping_t *m) {
  const tlc_text1_fmt_t *f = &opts->fmt[TLC_T1_STATISTICS];
  size_t nctx = t->ncontexts, i, *start = NULL, *order = NULL;
  char buf[64];
  int multi = nctx > 1;
  if (tlc_table_by_context(t, &start, &order) < 0)
    return TLC_ENOMEM;
  if (!multi) {
    const char *cn = nctx == 1 ? tlc_mapping_ctx_display(m, t, 0, buf, sizeof(buf)) : NULL;
    header(o, "STATISTICS(Functions)", NULL, f);
    for (i = start[0]; i < start[nctx > 0 ? 1 : 0]; i++)
      stat_entry(o, f, m, &t->rows[order[i]], "Functions", cn);
    tlc_out_putc(o, '\n');
  } else {
    size_t b;
    for (b = 0; b <= nctx; b++) {
      const char *cn =
          b < nctx ? tlc_mapping_ctx_display(m, t, (uint32_t)b, buf, sizeof(buf)) : "Neutral";
      header(o, "STATISTICS(Functions)", cn, f);
      for (i = start[b]; i < start[b + 1]; i++)
        stat_entry(o, f, m, &t->rows[order[i]], "Functions", cn);
      tlc_out_putc(o, '\n');
    }
  }
  tlc_free(start);
  tlc_free(order);
  header(o, "STATISTICS(Data)", NULL, f);
  for (i = 0; i < t->nrows; i++)
    if (t->rows[i].kind != TLC_ROW_CODE && in_class(t->rows[i].handle, TLC_AREA_VARIABLE))
      stat_entry(o, f, m, &t->rows[i], "Data", NULL);
  tlc_out_putc(o, '\n');
  header(o, "STATISTICS(AUX)", NULL, f);
  for (i = 0; i < t->nrows; i++)
    if (t->rows[i].kind != TLC_ROW_CODE && in_class(t->rows[i].handle, TLC_AREA_AUX))
      stat_entry(o, f, m, &t->rows[i], "AUX", NULL);
  tlc_out_putc(o, '\n');
  return 0;
}

void tlc_evctx_update(tlc_evctx_t *x, const tlc_table_t *t, const tlc_event_t *ev) {
  if (t->has_context_area && ev->handle == t->context_area &&
      (ev->type == TLC_EV_WRITE || ev->type == TLC_EV_ENTRY)) {
    x->has_task[ev->core] = 1;
    x->task[ev->core] = ev->data;
  }
}

const char *tlc_evctx_name(const tlc_evctx_t *x, const tlc_table_t *t, const tlc_mapping_t *m,
                           const tlc_event_t *ev, char *buf, size_t len) {
  if (ev->evlog != NULL || t->format == TLC_FMT_EVLOG) {
    snprintf(buf, len, "thread%llX", (unsigned long long)ev->thread);
    return buf;
  }
  if (t->has_context_area && x->has_task[ev->core]) {
    const char *n = m ? tlc_mapping_ctx_name(m, x->task[ev->core]) : NULL;
    if (n != NULL)
      return n;
    snprintf(buf, len, "task%llX", (unsigned long long)x->task[ev->core]);
    return buf;
  }
  if (ev->core == TLC_CORE_UNKNOWN)
    snprintf(buf, len, "core?");
  else
    snprintf(buf, len, "core%u", (unsigned)ev->core);
  return buf;
}

static int write_timeline(tlc_out_t *o, const tlc_text1_opts_t *opts, const tlc_table_t *t,
                          const tlc_mapping_t *m, tlc_timeline_t *tl) {
  const tlc_text1_fmt_t *f = &opts->fmt[TLC_T1_TIMELINE];
  int need_ctx = 0, n, r;
  unsigned i;
  tlc_evctx_t *x;
  char buf[64];
  for (i = 0; i < f->ntok; i++)
    if (f->tok[i].macro == M_CONTEXT)
      need_ctx = 1;
  x = tlc_calloc(1, sizeof(*x));
  if (x == NULL)
    return TLC_ENOMEM;
  header(o, "TIMELINE", NULL, f);
  r = tl->rewind(tl->ud);
  while (r == 0) {
    const tlc_event_t *evs;
    int k;
    n = tl->next(tl->ud, &evs);
    if (n < 0) {
      r = n;
      break;
    }
    if (n == 0)
      break;
    for (k = 0; k < n; k++) {
      const tlc_event_t *ev = &evs[k];
      unsigned area = tlc_handle_area(ev->handle);
      row_ctx_t c;
      if (ev->type > TLC_EV_WRITE)
        continue;
      memset(&c, 0, sizeof(c));
      c.fmt = f;
      c.ev = ev;
      c.handle = ev->handle;
      c.has_handle = 1;
      if (ev->type == TLC_EV_WRITE || area >= TLC_AREA_VARIABLE) {
        c.has_value = 1;
        c.value = ev->data;
        c.value_width = 8;
      }
      if (need_ctx)
        c.context = tlc_evctx_name(x, t, m, ev, buf, sizeof(buf));
      write_entry(o, &c);
      tlc_evctx_update(x, t, ev);
    }
    if (o->err)
      r = o->err;
  }
  tlc_free(x);
  tlc_out_putc(o, '\n');
  return r;
}

int tlc_text1_write(tlc_out_t *o, const tlc_text1_opts_t *opts, const tlc_table_t *t,
                    const tlc_mapping_t *m, tlc_timeline_t *tl) {
  int r = 0;
  if (opts->sections & TLC_T1_SEC_INFO)
    write_info(o, opts, t);
  if (opts->sections & TLC_T1_SEC_CONTEXTS)
    write_contexts(o, opts, t, m);
  if (opts->sections & TLC_T1_SEC_HANDLE) {
    if (r == 0)
      r = write_handles(o, opts, t, m, TLC_AREA_FUNCTION, "Functions");
    if (r == 0)
      r = write_handles(o, opts, t, m, TLC_AREA_VARIABLE, "Data");
    if (r == 0)
      r = write_handles(o, opts, t, m, TLC_AREA_AUX, "AUX");
  }
  if (r == 0 && (opts->sections & TLC_T1_SEC_STATISTICS))
    r = write_statistics(o, opts, t, m);
  if (r == 0 && (opts->sections & TLC_T1_SEC_TIMELINE) && tl != NULL)
    r = write_timeline(o, opts, t, m, tl);
  if (r == 0)
    r = o->err;
  return r;
}
