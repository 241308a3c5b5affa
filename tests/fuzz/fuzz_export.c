/* fuzz_export.c - libFuzzer harness for every statistics exporter (Text1, XML, JSON, aprof, BR)
 * on arbitrary tables and timelines, time extremes first.
 *
 * A table reaches an exporter from the engine (live, replay, the sealer's export), or rebuilt
 * from a subscriber's protobuf rows (`tlcap stats`): any int64 time, any count and any sum can
 * be in it, and `TOTAL_TIME = last - first` must not overflow for INT64_MIN..INT64_MAX in any
 * writer; this harness makes such values cheap to reach.
 *
 * Input: a stream of fields. A 64-bit field costs one selector byte: 0 INT64_MIN, 1 INT64_MAX,
 * 2 0, 3 -1, 4 INT64_MIN + 1, 5 INT64_MAX - 1, 255 the next 8 bytes raw (little-endian), any
 * other s a small value (s - 128) * 1000. Layout:
 *   byte 0   bit 0-1 format (bin10, bin11, evlog, bin11), bit 2 context_area = 0x30000000,
 *            bit 3 a Text1 format with every macro, bit 4 aprof in ns, bit 5 XML binary timeline
 *   byte 1   number of contexts (mod 5), byte 2 number of rows (mod 17)
 *   fields   first_time, last_time, counters.events; per context kind, core and key; per row:
 *            handle byte (type nibble 0..5 and index), context byte, count, value, then per
 *            kind total, n, sum, min, max, the four quantiles (sorted) and a has_q byte
 *   the rest timeline events: handle byte, type byte (0..4), core byte, time field
 * Checked: no crash, UB, leak, hang (ASan/UBSan/LSan); every writer returns 0 (a memory
 * output with room); TOTAL_TIME >= 0 whenever last_time >= first_time.
 */
#include "base/alloc.h"
#include "base/out.h"
#include "formats/aprofw.h"
#include "formats/brw.h"
#include "formats/json.h"
#include "formats/stats.h"
#include "formats/text1.h"
#include "formats/timeline.h"
#include "formats/xml.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct rd {
  const uint8_t *p;
  size_t n;
} rd_t;

static unsigned u8(rd_t *r) {
  if (r->n == 0)
    return 0;
  r->n--;
  return *r->p++;
}

static int64_t f64(rd_t *r) {
  unsigned s = u8(r), i;
  uint64_t v = 0;
  switch (s) {
  case 0:
    return INT64_MIN;
  case 1:
    return INT64_MAX;
  case 2:
    return 0;
  case 3:
    return -1;
  case 4:
    return INT64_MIN + 1;
  case 5:
    return INT64_MAX - 1;
  case 255:
    for (i = 0; i < 8; i++)
      v |= (uint64_t)u8(r) << (8 * i);
    return (int64_t)v;
  default:
    return ((int64_t)s - 128) * 1000;
  }
}

#define MAXEV 64

typedef struct tl {
  tlc_event_t ev[MAXEV];
  int n;
  int done;
} tl_t;

static int tl_next(void *ud, const tlc_event_t **evs) {
  tl_t *t = ud;
  if (t->done || t->n == 0)
    return 0;
  t->done = 1;
  *evs = t->ev;
  return t->n;
}

static int tl_rewind(void *ud) {
  ((tl_t *)ud)->done = 0;
  return 0;
}

static void sort_q(int64_t *q) {
  int i, j;
  for (i = 1; i < TLC_NQUANT; i++)
    for (j = i; j > 0 && q[j] < q[j - 1]; j--) {
      int64_t x = q[j];
      q[j] = q[j - 1];
      q[j - 1] = x;
    }
}

static void take(tlc_out_t *o, int r) {
  char *s;
  size_t len;
  if (r != 0)
    abort();
  s = tlc_out_take(o, &len);
  if (s == NULL)
    abort();
  tlc_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const tlc_format_t fmts[4] = { TLC_FMT_BIN10, TLC_FMT_BIN11, TLC_FMT_EVLOG,
                                        TLC_FMT_BIN11 };
  rd_t r = { data, size };
  tlc_table_t t;
  tl_t tl;
  tlc_timeline_t tline = { tl_next, tl_rewind, &tl };
  tlc_text1_opts_t t1;
  tlc_xml_opts_t xo;
  tlc_aprofw_opts_t ao;
  tlc_out_t o, side;
  unsigned mode, nctx, nrows, i, k, q;
  char err[128];
  if (size < 3)
    return 0;
  mode = u8(&r);
  nctx = u8(&r) % 5;
  nrows = u8(&r) % 17;
  tlc_table_init(&t);
  t.format = fmts[mode & 3];
  if (mode & 4) {
    t.has_context_area = 1;
    t.context_area = 0x30000000u;
  }
  t.first_time = f64(&r);
  t.last_time = f64(&r);
  t.counters.events = (uint64_t)f64(&r);
  for (i = 0; i < nctx; i++) {
    tlc_ctx_t c;
    memset(&c, 0, sizeof(c));
    c.kind = (uint8_t)(u8(&r) % 3);
    c.core = (uint8_t)u8(&r);
    c.key = (uint64_t)f64(&r);
    if (tlc_table_add_ctx(&t, &c) < 0)
      goto out;
  }
  for (i = 0; i < nrows && r.n > 0; i++) {
    tlc_stat_t *s = tlc_table_add(&t);
    unsigned h, cx;
    if (s == NULL)
      goto out;
    h = u8(&r);
    s->handle = ((uint32_t)(h >> 4) % 6) << 28 | (h & 15);
    s->kind = tlc_handle_area(s->handle) == 2 || tlc_handle_area(s->handle) == 4   ? TLC_ROW_DATA
              : tlc_handle_area(s->handle) == 3 || tlc_handle_area(s->handle) == 5 ? TLC_ROW_STATE
                                                                                   : TLC_ROW_CODE;
    cx = u8(&r);
    if (s->kind != TLC_ROW_CODE)
      s->context = TLC_CTX_NONE;
    else
      s->context = nctx == 0 || cx >= 0xF0 ? TLC_CTX_NEUTRAL : cx % nctx;
    s->count = (uint64_t)f64(&r);
    s->value = (uint64_t)f64(&r);
    s->value_min = s->value_max = s->value;
    s->has_value = (uint8_t)(cx & 1);
    s->state = s->kind == TLC_ROW_STATE ? (uint64_t)(cx >> 1) : 0;
    for (k = 0; k < TLC_NKINDS; k++) {
      tlc_dist_t *d = &s->dist[k];
      s->total[k] = f64(&r);
      d->n = (uint64_t)f64(&r);
      d->sum = f64(&r);
      d->min = f64(&r);
      d->max = f64(&r);
      d->sumsq_hi = (uint64_t)f64(&r);
      d->sumsq_lo = (uint64_t)f64(&r);
      for (q = 0; q < TLC_NQUANT; q++)
        d->q[q] = f64(&r);
      sort_q(d->q);
      d->has_q = (uint8_t)(u8(&r) & 1);
    }
  }
  tlc_table_sort(&t);
  memset(&tl, 0, sizeof(tl));
  while (r.n > 0 && tl.n < MAXEV) {
    tlc_event_t *e = &tl.ev[tl.n++];
    unsigned h = u8(&r);
    memset(e, 0, sizeof(*e));
    e->handle = ((uint32_t)(h >> 4) % 6) << 28 | (h & 15);
    e->type = (uint8_t)(u8(&r) % 5);
    e->core = (uint8_t)u8(&r);
    e->thread = e->core;
    e->data = (uint64_t)e->core;
    e->time_ns = f64(&r);
  }

  if (t.last_time >= t.first_time && tlc_table_total_time(&t) < 0)
    abort();

  /* Text1 */
  tlc_text1_opts_default(&t1);
  if (mode & 8) {
    if (tlc_text1_set_format(&t1,
                             "StatisticsEntry=%HANDLE%,%CONTEXT%,%COUNT%,%VALUE%,%T.NET%,"
                             "%T.NET.MIN%,%T.NET.MAX%,%T.NET.AVG%,%T.GROSS%,%T.GROSS.AVG%,"
                             "%T.CALL.MIN%,%T.CALL.MAX%,%T.CALL.AVG%,%T.PERIOD.MIN%,"
                             "%T.PERIOD.MAX%,%T.PERIOD.AVG%,%T.OUTSIDE%,%T.OUTSIDE.MIN%,"
                             "%T.OUTSIDE.MAX%,%T.OUTSIDE.AVG%,%ANOMALIES%",
                             err, sizeof(err)) != 0 ||
        tlc_text1_set_format(&t1, "TimelineEntry=%HANDLE%,%EVENT%,%VALUE%,%TIME%,%CORE%", err,
                             sizeof(err)) != 0 ||
        tlc_text1_set_format(&t1, "InfoEntry=%TOTAL_TIME%,%FORMAT%", err, sizeof(err)) != 0)
      abort();
  }
  tlc_out_init(&o, 0, NULL, NULL);
  take(&o, tlc_text1_write(&o, &t1, &t, NULL, &tline));
  tlc_out_fini(&o);

  /* XML */
  tlc_xml_opts_default(&xo);
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_out_init(&side, 0, NULL, NULL);
  if (mode & 32) {
    xo.timeline = TLC_XML_TL_BINARY;
    xo.sidecar_name = "x.bin";
  }
  take(&o, tlc_xml_write(&o, &xo, &t, NULL, &tline, &side));
  tlc_out_fini(&o);
  tlc_out_fini(&side);

  /* JSON */
  tlc_out_init(&o, 0, NULL, NULL);
  take(&o, tlc_json_write(&o, &t, NULL, "fuzz", (int)(mode >> 6) & 1));
  tlc_out_fini(&o);

  /* aprof */
  memset(&ao, 0, sizeof(ao));
  ao.ns = (mode >> 4) & 1;
  tlc_out_init(&o, 0, NULL, NULL);
  take(&o, tlc_aprof_write(&o, &ao, &t, NULL, &tline));
  tlc_out_fini(&o);

  /* BR */
  tlc_out_init(&o, 0, NULL, NULL);
  take(&o, tlc_br_export(&o, &t, NULL));
  tlc_out_fini(&o);
out:
  tlc_table_fini(&t);
  return 0;
}
