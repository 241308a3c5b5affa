/* br.c - BR profiler file reader, JSON view and record emitters (see br.h; format: seeds/002).
 *
 * Records (network byte order; offsets from the record's first byte):
 *
 *   1 CREATE MODULE MAPPING  [1][module u16][len u16][file name: len bytes]
 *   3 CURRENT LINE           [3][module u16][line u32][clause u8]          8 bytes
 *   4 TIME SPENT IN LINE     [4][time ns u64]                              9 bytes
 *   5 BACKTRACE INFORMATION  [5][module u16][line u32][clause u8]          8 bytes
 *   7 FUNCTION NAME          [7][len u8][name: len bytes]
 *   8 GOSUB                  [8]                                           1 byte
 *   9 MAIN ROUTINE           [9]                                           1 byte
 *   6 END CURRENT LINE       [6]                                           1 byte
 *
 * Structural rules enforced (the seed's words made strict; any break is TLC_EFRAME naming the
 * record's offset): a line entry opens with CURRENT LINE and closes with END CURRENT LINE, and
 * entries do not nest; TIME SPENT and BACKTRACE occur only inside an entry, TIME SPENT at most
 * once per entry; FUNCTION NAME, GOSUB and MAIN ROUTINE follow a CURRENT LINE or BACKTRACE
 * directly or after each other (the group annotates that position), each at most once per
 * position, and GOSUB and MAIN exclude each other; a MODULE MAPPING may come anywhere between
 * records (it ends an annotation group) and may repeat a number only with the same file name.
 * Modules never mapped are allowed (their file is unknown, null in JSON). A file that ends
 * inside an entry, or inside a record, is TLC_ETRUNC.
 *
 * Memory: lines and backtrace frames in two arrays (capped by max_lines / max_frames);
 * function names interned once each through a hash table; a 65536-entry module index.
 * Cost O(input).
 *
 * Does not: interpret clause numbers or check that line numbers exist in the module.
 */
#include "formats/br.h"

#include "base/alloc.h"
#include "base/err.h"
#include "formats/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CAP 10000000u

static const char *const rec_names[10] = {
  "type 0",           "CREATE MODULE MAPPING", "type 2",
  "CURRENT LINE",     "TIME SPENT IN LINE",    "BACKTRACE INFORMATION",
  "END CURRENT LINE", "FUNCTION NAME",         "GOSUB",
  "MAIN ROUTINE"
};

void tlc_br_init(tlc_br_t *b) {
  memset(b, 0, sizeof(*b));
}

void tlc_br_fini(tlc_br_t *b) {
  size_t i;
  for (i = 0; i < b->nmodules; i++)
    tlc_free(b->modules[i].file);
  for (i = 0; i < b->nnames; i++)
    tlc_free(b->names[i]);
  tlc_free(b->modules);
  tlc_free(b->lines);
  tlc_free(b->frames);
  tlc_free(b->names);
  tlc_free(b->modidx_);
  tlc_htab_fini(&b->nhash_);
  memset(b, 0, sizeof(*b));
}

static int br_err(tlc_parse_err_t *e, uint64_t off, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int br_err(tlc_parse_err_t *e, uint64_t off, int code, const char *fmt, ...) {
  va_list ap;
  if (e != NULL) {
    e->line = 0;
    e->offset = off;
    va_start(ap, fmt);
    vsnprintf(e->reason, sizeof(e->reason), fmt, ap);
    va_end(ap);
  }
  return code;
}

static uint16_t be16(const uint8_t *p) {
  return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t be32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t be64(const uint8_t *p) {
  return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

static uint64_t hash_bytes(const uint8_t *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= s[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* Interns a function name; returns its index or a negative error. */
static long long intern(tlc_br_t *b, const uint8_t *s, size_t n) {
  uint64_t h;
  const uint64_t *v;
  char *c, **nn;
  const void *z = memchr(s, 0, n);
  if (z != NULL) /* names are C strings: cut at an embedded NUL */
    n = (size_t)((const uint8_t *)z - s);
  h = hash_bytes(s, n);
  for (v = tlc_htab_get(&b->nhash_, h); v != NULL; v = tlc_htab_get_next(&b->nhash_, h, v)) {
    const char *x = b->names[*v];
    if (strlen(x) == n && memcmp(x, s, n) == 0)
      return (long long)*v;
  }
  if (tlc_htab_reserve(&b->nhash_, b->nnames + 1) < 0)
    return TLC_ENOMEM;
  if ((nn = tlc_grow(b->names, &b->capnames, b->nnames + 1, sizeof(*nn), 64)) == NULL)
    return TLC_ENOMEM;
  b->names = nn;
  c = tlc_strndup((const char *)s, n);
  if (c == NULL)
    return TLC_ENOMEM;
  b->names[b->nnames] = c;
  (void)tlc_htab_add(&b->nhash_, h, b->nnames); /* reserved: cannot fail */
  return (long long)b->nnames++;
}

const char *tlc_br_module_file(const tlc_br_t *b, uint16_t module) {
  if (b->modidx_ == NULL || b->modidx_[module] == 0)
    return NULL;
  return b->modules[b->modidx_[module] - 1].file;
}

/* Record length from its first bytes; 0 when the header itself is cut. */
static size_t rec_len(const uint8_t *p, size_t left) {
  switch (p[0]) {
  case TLC_BR_MODULE:
    return left < 5 ? 0 : 5u + be16(p + 3);
  case TLC_BR_CURRENT_LINE:
  case TLC_BR_BACKTRACE:
    return 8;
  case TLC_BR_TIME:
    return 9;
  case TLC_BR_FUNCTION:
    return left < 2 ? 0 : 2u + p[1];
  default:
    return 1;
  }
}

int tlc_br_parse(tlc_br_t *b, const uint8_t *buf, size_t len, tlc_parse_err_t *err) {
  size_t pos = 0, maxl = b->max_lines ? b->max_lines : DEFAULT_CAP;
  size_t maxf = b->max_frames ? b->max_frames : DEFAULT_CAP;
  int in = 0;                 /* inside a line entry */
  tlc_br_frame_t *ann = NULL; /* position FUNCTION NAME / GOSUB / MAIN may annotate */
  size_t ann_line = 0, ann_frame = SIZE_MAX;
  if (err != NULL)
    memset(err, 0, sizeof(*err));
  while (pos < len) {
    const uint8_t *p = buf + pos;
    unsigned t = p[0];
    size_t n;
    tlc_br_line_t *cur = in ? &b->lines[b->nlines - 1] : NULL;
    if (t == 0 || t == 2 || t > 9)
      return br_err(err, pos, TLC_EFRAME, "unknown record type %u", t);
    n = rec_len(p, len - pos);
    if (n == 0 || n > len - pos)
      return br_err(err, pos, TLC_ETRUNC,
                    "%s record runs past the end of the file (%zu of %zu bytes)", rec_names[t],
                    len - pos, n ? n : (size_t)(t == TLC_BR_MODULE ? 5 : 2));
    /* the annotation target is re-derived from indexes: the arrays may have moved */
    ann = NULL;
    if (ann_frame != SIZE_MAX)
      ann = &b->frames[ann_frame];
    else if (ann_line)
      ann = &b->lines[ann_line - 1].at;
    switch (t) {
    case TLC_BR_MODULE: {
      uint16_t num = be16(p + 1);
      size_t fl = n - 5;
      char *f;
      const void *z = memchr(p + 5, 0, fl);
      if (z != NULL) /* file names are C strings: cut at an embedded NUL */
        fl = (size_t)((const uint8_t *)z - (p + 5));
      if (b->modidx_ == NULL) {
        b->modidx_ = tlc_calloc(65536, sizeof(*b->modidx_));
        if (b->modidx_ == NULL)
          return br_err(err, pos, TLC_ENOMEM, "out of memory");
      }
      if (b->modidx_[num]) {
        const char *old = b->modules[b->modidx_[num] - 1].file;
        if (strlen(old) != fl || memcmp(old, p + 5, fl) != 0)
          return br_err(err, pos, TLC_EFRAME,
                        "module %u mapped again to a different file (first at offset %llu)", num,
                        (unsigned long long)b->modules[b->modidx_[num] - 1].offset);
      } else {
        tlc_br_module_t *nm =
            tlc_grow(b->modules, &b->capmodules, b->nmodules + 1, sizeof(*nm), 64);
        if (nm != NULL)
          b->modules = nm;
        if (nm == NULL || (f = tlc_strndup((const char *)p + 5, fl)) == NULL)
          return br_err(err, pos, TLC_ENOMEM, "out of memory");
        b->modules[b->nmodules].number = num;
        b->modules[b->nmodules].file = f;
        b->modules[b->nmodules].offset = pos;
        b->nmodules++;
        b->modidx_[num] = (uint32_t)b->nmodules;
      }
      ann_line = 0;
      ann_frame = SIZE_MAX;
      break;
    }
    case TLC_BR_CURRENT_LINE: {
      tlc_br_line_t *l, *nl;
      if (in)
        return br_err(err, pos, TLC_EFRAME,
                      "CURRENT LINE inside the entry opened at offset %llu (no END CURRENT LINE)",
                      (unsigned long long)cur->offset);
      if (b->nlines >= maxl)
        return br_err(err, pos, TLC_ELIMIT, "more than %zu line entries", maxl);
      nl = tlc_grow(b->lines, &b->caplines, b->nlines + 1, sizeof(*nl), 64);
      if (nl == NULL)
        return br_err(err, pos, TLC_ENOMEM, "out of memory");
      b->lines = nl;
      l = &b->lines[b->nlines++];
      memset(l, 0, sizeof(*l));
      l->at.module = be16(p + 1);
      l->at.line = be32(p + 3);
      l->at.clause = p[7];
      l->at.function = TLC_BR_NONAME;
      l->first_bt = b->nframes;
      l->offset = pos;
      in = 1;
      ann_line = b->nlines;
      ann_frame = SIZE_MAX;
      break;
    }
    case TLC_BR_TIME:
      if (!in)
        return br_err(err, pos, TLC_EFRAME, "TIME SPENT IN LINE outside a line entry");
      if (cur->has_time)
        return br_err(err, pos, TLC_EFRAME, "second TIME SPENT IN LINE in the entry at offset %llu",
                      (unsigned long long)cur->offset);
      cur->has_time = 1;
      cur->time_ns = be64(p + 1);
      ann_line = 0;
      ann_frame = SIZE_MAX;
      break;
    case TLC_BR_BACKTRACE: {
      tlc_br_frame_t *f, *nf;
      if (!in)
        return br_err(err, pos, TLC_EFRAME, "BACKTRACE INFORMATION outside a line entry");
      if (b->nframes >= maxf)
        return br_err(err, pos, TLC_ELIMIT, "more than %zu backtrace records", maxf);
      nf = tlc_grow(b->frames, &b->capframes, b->nframes + 1, sizeof(*nf), 64);
      if (nf == NULL)
        return br_err(err, pos, TLC_ENOMEM, "out of memory");
      b->frames = nf;
      f = &b->frames[b->nframes++];
      memset(f, 0, sizeof(*f));
      f->module = be16(p + 1);
      f->line = be32(p + 3);
      f->clause = p[7];
      f->function = TLC_BR_NONAME;
      cur->nbt++;
      ann_line = 0;
      ann_frame = b->nframes - 1;
      break;
    }
    case TLC_BR_FUNCTION:
    case TLC_BR_GOSUB:
    case TLC_BR_MAIN:
      if (ann == NULL)
        return br_err(err, pos, TLC_EFRAME,
                      "%s record not right after CURRENT LINE or BACKTRACE INFORMATION",
                      rec_names[t]);
      if (t == TLC_BR_FUNCTION) {
        long long k;
        if (ann->function != TLC_BR_NONAME)
          return br_err(err, pos, TLC_EFRAME, "second FUNCTION NAME for the same position");
        k = intern(b, p + 2, n - 2);
        if (k < 0)
          return br_err(err, pos, TLC_ENOMEM, "out of memory");
        ann->function = (uint32_t)k;
      } else {
        if (ann->flags & (TLC_BR_F_GOSUB | TLC_BR_F_MAIN))
          return br_err(err, pos, TLC_EFRAME,
                        "%s after GOSUB or MAIN ROUTINE for the same position", rec_names[t]);
        ann->flags |= t == TLC_BR_GOSUB ? TLC_BR_F_GOSUB : TLC_BR_F_MAIN;
      }
      break;
    default: /* TLC_BR_END */
      if (!in)
        return br_err(err, pos, TLC_EFRAME, "END CURRENT LINE outside a line entry");
      in = 0;
      ann_line = 0;
      ann_frame = SIZE_MAX;
      break;
    }
    b->records++;
    b->by_type[t]++;
    pos += n;
  }
  if (in)
    return br_err(err, len, TLC_ETRUNC,
                  "file ends inside the line entry opened at offset %llu (no END CURRENT LINE)",
                  (unsigned long long)b->lines[b->nlines - 1].offset);
  return 0;
}

int tlc_br_sniff(const uint8_t *buf, size_t len) {
  size_t pos = 0, k = 0;
  int in = 0, ann = 0;
  if (len == 0 || (buf[0] != TLC_BR_MODULE && buf[0] != TLC_BR_CURRENT_LINE))
    return 0;
  while (pos < len && k < 16) {
    unsigned t = buf[pos];
    size_t n;
    if (t == 0 || t == 2 || t > 9)
      return 0;
    n = rec_len(buf + pos, len - pos);
    if (n == 0 || n > len - pos)
      return 0;
    switch (t) {
    case TLC_BR_CURRENT_LINE:
      if (in)
        return 0;
      in = ann = 1;
      break;
    case TLC_BR_BACKTRACE:
      if (!in)
        return 0;
      ann = 1;
      break;
    case TLC_BR_TIME:
      if (!in)
        return 0;
      ann = 0;
      break;
    case TLC_BR_END:
      if (!in)
        return 0;
      in = ann = 0;
      break;
    case TLC_BR_MODULE:
      ann = 0;
      break;
    default: /* FUNCTION NAME, GOSUB, MAIN ROUTINE */
      if (!ann)
        return 0;
      break;
    }
    pos += n;
    k++;
  }
  return 1;
}

/* ---------------------------------------------------------------- JSON */

static void jname(tlc_out_t *o, const tlc_br_t *b, uint32_t k) {
  if (k == TLC_BR_NONAME || k >= b->nnames)
    tlc_out_puts(o, "null");
  else
    tlc_json_string(o, b->names[k]);
}

static void jfile(tlc_out_t *o, const tlc_br_t *b, uint16_t module) {
  const char *f = tlc_br_module_file(b, module);
  if (f == NULL)
    tlc_out_puts(o, "null");
  else
    tlc_json_string(o, f);
}

static void jframe(tlc_out_t *o, const tlc_br_t *b, const tlc_br_frame_t *f) {
  tlc_out_puts(o, "\"module\": ");
  tlc_out_u64(o, f->module);
  tlc_out_puts(o, ", \"file\": ");
  jfile(o, b, f->module);
  tlc_out_puts(o, ", \"line\": ");
  tlc_out_u64(o, f->line);
  tlc_out_puts(o, ", \"clause\": ");
  tlc_out_u64(o, f->clause);
  tlc_out_puts(o, ", \"function\": ");
  jname(o, b, f->function);
  tlc_out_puts(o, (f->flags & TLC_BR_F_GOSUB) ? ", \"gosub\": true" : ", \"gosub\": false");
  tlc_out_puts(o, (f->flags & TLC_BR_F_MAIN) ? ", \"main\": true" : ", \"main\": false");
}

static int pos_cmp(const tlc_br_frame_t *a, const tlc_br_frame_t *b) {
  if (a->module != b->module)
    return a->module < b->module ? -1 : 1;
  if (a->line != b->line)
    return a->line < b->line ? -1 : 1;
  if (a->clause != b->clause)
    return a->clause < b->clause ? -1 : 1;
  return 0;
}

typedef struct sum_key {
  tlc_br_frame_t at;
  uint64_t time;
} sum_key_t;

static int key_cmp(const void *pa, const void *pb) {
  const sum_key_t *a = pa, *b = pb;
  return pos_cmp(&a->at, &b->at);
}

static int mod_cmp(const void *pa, const void *pb) {
  const tlc_br_module_t *a = pa, *b = pb;
  return a->number < b->number ? -1 : a->number > b->number;
}

int tlc_br_to_json(const tlc_br_t *b, tlc_out_t *o) {
  size_t i, j;
  sum_key_t *idx = NULL;
  tlc_br_module_t *mods = NULL;
  int timed = b->by_type[TLC_BR_TIME] > 0;
  if (b->nlines > 0) {
    idx = tlc_malloc(b->nlines * sizeof(*idx));
    if (idx == NULL)
      return TLC_ENOMEM;
  }
  if (b->nmodules > 0) {
    mods = tlc_malloc(b->nmodules * sizeof(*mods));
    if (mods == NULL) {
      tlc_free(idx);
      return TLC_ENOMEM;
    }
    memcpy(mods, b->modules, b->nmodules * sizeof(*mods));
    qsort(mods, b->nmodules, sizeof(*mods), mod_cmp);
  }
  tlc_out_puts(o, "{\n  \"schema\": \"tlcap-br/1\",\n  \"records\": ");
  tlc_out_u64(o, b->records);
  tlc_out_puts(o, timed ? ",\n  \"timed\": true,\n  \"modules\": ["
                        : ",\n  \"timed\": false,\n  \"modules\": [");
  for (i = 0; i < b->nmodules; i++) {
    tlc_out_puts(o, i ? ",\n    {\"number\": " : "\n    {\"number\": ");
    tlc_out_u64(o, mods[i].number);
    tlc_out_puts(o, ", \"file\": ");
    tlc_json_string(o, mods[i].file);
    tlc_out_putc(o, '}');
  }
  tlc_out_puts(o, b->nmodules ? "\n  ],\n  \"lines\": [" : "],\n  \"lines\": [");
  for (i = 0; i < b->nlines; i++) {
    const tlc_br_line_t *l = &b->lines[i];
    tlc_out_puts(o, i ? ",\n    {\"offset\": " : "\n    {\"offset\": ");
    tlc_out_u64(o, l->offset);
    tlc_out_puts(o, ", ");
    jframe(o, b, &l->at);
    tlc_out_puts(o, ", \"time_ns\": ");
    if (l->has_time)
      tlc_out_u64(o, l->time_ns);
    else
      tlc_out_puts(o, "null");
    tlc_out_puts(o, ", \"backtrace\": [");
    for (j = 0; j < l->nbt; j++) {
      tlc_out_puts(o, j ? ", {" : "{");
      jframe(o, b, &b->frames[l->first_bt + j]);
      tlc_out_putc(o, '}');
    }
    tlc_out_puts(o, "]}");
  }
  tlc_out_puts(o, b->nlines ? "\n  ],\n  \"summary\": [" : "],\n  \"summary\": [");
  for (i = 0; i < b->nlines; i++) {
    idx[i].at = b->lines[i].at;
    idx[i].time = b->lines[i].has_time ? b->lines[i].time_ns : 0;
  }
  if (b->nlines > 1)
    qsort(idx, b->nlines, sizeof(*idx), key_cmp);
  for (i = 0; i < b->nlines;) {
    const tlc_br_frame_t *at = &idx[i].at;
    uint64_t samples = 0, time = 0;
    for (j = i; j < b->nlines && pos_cmp(&idx[j].at, at) == 0; j++) {
      uint64_t t = idx[j].time;
      samples++;
      time = time + t < time ? UINT64_MAX : time + t;
    }
    tlc_out_puts(o, i ? ",\n    {\"module\": " : "\n    {\"module\": ");
    tlc_out_u64(o, at->module);
    tlc_out_puts(o, ", \"file\": ");
    jfile(o, b, at->module);
    tlc_out_puts(o, ", \"line\": ");
    tlc_out_u64(o, at->line);
    tlc_out_puts(o, ", \"clause\": ");
    tlc_out_u64(o, at->clause);
    tlc_out_puts(o, ", \"entries\": ");
    tlc_out_u64(o, samples);
    tlc_out_puts(o, ", \"time_ns\": ");
    tlc_out_u64(o, time);
    tlc_out_putc(o, '}');
    i = j;
  }
  tlc_out_puts(o, b->nlines ? "\n  ]\n}\n" : "]\n}\n");
  tlc_free(idx);
  tlc_free(mods);
  return o->err;
}

/* ---------------------------------------------------------------- emitters */

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

int tlc_br_write_module(tlc_out_t *o, uint16_t module, const char *file) {
  size_t n = strlen(file);
  uint8_t h[5];
  int cut = n > 0xFFFF;
  if (cut)
    n = 0xFFFF;
  h[0] = TLC_BR_MODULE;
  put16(h + 1, module);
  put16(h + 3, (uint16_t)n);
  tlc_out_write(o, h, sizeof(h));
  tlc_out_write(o, file, n);
  return cut;
}

static void position(tlc_out_t *o, uint8_t type, uint16_t module, uint32_t line, uint8_t clause) {
  uint8_t r[8];
  r[0] = type;
  put16(r + 1, module);
  put32(r + 3, line);
  r[7] = clause;
  tlc_out_write(o, r, sizeof(r));
}

void tlc_br_write_current_line(tlc_out_t *o, uint16_t module, uint32_t line, uint8_t clause) {
  position(o, TLC_BR_CURRENT_LINE, module, line, clause);
}

void tlc_br_write_backtrace(tlc_out_t *o, uint16_t module, uint32_t line, uint8_t clause) {
  position(o, TLC_BR_BACKTRACE, module, line, clause);
}

void tlc_br_write_time(tlc_out_t *o, uint64_t ns) {
  uint8_t r[9];
  r[0] = TLC_BR_TIME;
  put32(r + 1, (uint32_t)(ns >> 32));
  put32(r + 5, (uint32_t)ns);
  tlc_out_write(o, r, sizeof(r));
}

int tlc_br_write_function(tlc_out_t *o, const char *name) {
  size_t n = strlen(name);
  uint8_t h[2];
  int cut = n > 0xFF;
  if (cut)
    n = 0xFF;
  h[0] = TLC_BR_FUNCTION;
  h[1] = (uint8_t)n;
  tlc_out_write(o, h, sizeof(h));
  tlc_out_write(o, name, n);
  return cut;
}

void tlc_br_write_gosub(tlc_out_t *o) {
  tlc_out_putc(o, (char)TLC_BR_GOSUB);
}

void tlc_br_write_main(tlc_out_t *o) {
  tlc_out_putc(o, (char)TLC_BR_MAIN);
}

void tlc_br_write_end(tlc_out_t *o) {
  tlc_out_putc(o, (char)TLC_BR_END);
}
