/* moment.c - the stored events around a moment: its range and its writers (moment.h). */
#include "history/moment.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/json.h"
#include "formats/bin1x.h"
#include "formats/evlog.h"
#include "formats/json.h"
#include "formats/text1.h"
#include "formats/tlc_event.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void event_json(tlc_json_w_t *w, const tlc_evctx_t *x, const tlc_table_t *t,
                       const tlc_mapping_t *m, const tlc_event_t *ev) {
  char ebuf[2] = { tlc_ev_char(ev->type), '\0' }, cbuf[64];
  const tlc_map_area_t *a = m != NULL ? tlc_mapping_find(m, ev->handle) : NULL;
  tlc_json_w_open(w, NULL, '{');
  tlc_json_w_i64(w, "time", ev->time_ns);
  if (ev->core == TLC_CORE_UNKNOWN)
    tlc_json_w_i64(w, "core", -1);
  else
    tlc_json_w_u64(w, "core", ev->core);
  tlc_json_w_str(w, "context", tlc_evctx_name(x, t, m, ev, cbuf, sizeof(cbuf)));
  tlc_json_w_hex8(w, "handle", ev->handle);
  if (a != NULL && a->name[0] != '\0')
    tlc_json_w_str(w, "name", a->name);
  tlc_json_w_str(w, "event", ebuf);
  if (ev->type == TLC_EV_WRITE)
    tlc_json_w_u64(w, "value", ev->data);
  tlc_json_w_close(w, '}');
}

int tlc_moment_json(tlc_out_t *o, const tlc_moment_t *mo, const char *target, const tlc_table_t *t,
                    const tlc_mapping_t *m, tlc_timeline_t *tl) {
  tlc_json_w_t w;
  tlc_evctx_t *x = tlc_calloc(1, sizeof(*x));
  uint64_t nev = 0;
  int r;
  if (x == NULL)
    return TLC_ENOMEM;
  tlc_json_w_init(&w, o, 0);
  tlc_json_w_open(&w, NULL, '{');
  tlc_json_w_str(&w, "target", target);
  tlc_json_w_open(&w, "around", '{');
  tlc_json_w_str(&w, "clock", mo->range.kind == TLC_WHEN_WALL ? "wall" : "target");
  if (mo->range.kind == TLC_WHEN_TARGET && mo->range.epoch >= 0)
    tlc_json_w_i64(&w, "epoch", mo->range.epoch);
  tlc_json_w_i64(&w, "ref", mo->ref);
  tlc_json_w_i64(&w, "span", mo->span);
  tlc_json_w_i64(&w, "since", mo->range.since);
  tlc_json_w_i64(&w, "until", mo->range.until);
  tlc_json_w_close(&w, '}');
  tlc_json_w_open(&w, "events", '[');
  r = tl->rewind(tl->ud);
  while (r == 0) {
    const tlc_event_t *evs;
    int n = tl->next(tl->ud, &evs);
    if (n <= 0) {
      r = n;
      break;
    }
    for (int k = 0; k < n; k++) {
      if (evs[k].type > TLC_EV_WRITE)
        continue;
      event_json(&w, x, t, m, &evs[k]);
      tlc_evctx_update(x, t, &evs[k]);
      nev++;
    }
    if (o->err)
      r = o->err;
  }
  tlc_json_w_close(&w, ']');
  tlc_json_w_u64(&w, "count", nev);
  if (r == 0) {
    tlc_json_w_t sw = w;
    r = tlc_json_begin_member(&sw, o, "stats", t, m, target);
    if (r == 0)
      r = tlc_json_rows(&sw, o, t, m);
    if (r == 0)
      r = tlc_json_end_member(&sw, o);
    w = sw;
  }
  tlc_json_w_close(&w, '}');
  tlc_out_putc(o, '\n');
  tlc_free(x);
  return r < 0 ? r : o->err;
}

static int write_native(tlc_out_t *o, int export_, tlc_format_t in, tlc_timeline_t *tl) {
  tlc_format_t to = export_ == TLC_MOMENT_BIN11   ? TLC_FMT_BIN11
                    : export_ == TLC_MOMENT_BIN10 ? TLC_FMT_BIN10
                                                  : TLC_FMT_EVLOG;
  tlc_evlog_enc_t enc;
  int r = 0, n;
  if (to == TLC_FMT_EVLOG) {
    if (in != TLC_FMT_EVLOG)
      return TLC_EFORMAT; /* a bin1x capture has no evlog strings */
    if ((r = tlc_evlog_enc_init(&enc, NULL)) < 0)
      return r;
  }
  r = tl->rewind(tl->ud);
  while (r == 0) {
    const tlc_event_t *evs;
    n = tl->next(tl->ud, &evs);
    if (n <= 0) {
      r = n;
      break;
    }
    for (int i = 0; i < n && r == 0; i++) {
      const tlc_event_t *ev = &evs[i];
      if (to == TLC_FMT_EVLOG) {
        if (!(ev->flags & TLC_EVF_SYNTH)) /* S/R synthesised by the mapping are not items */
          r = tlc_evlog_enc_add(&enc, ev, o);
      } else if (ev->type <= TLC_EV_WRITE) {
        uint8_t rec[TLC_BIN1X_RECORD];
        tlc_event_t e = *ev;
        if (in != to)
          e.raw = 0; /* the received word belongs to another layout */
        tlc_bin1x_encode(to, &e, rec);
        tlc_out_write(o, rec, sizeof(rec));
      }
    }
    if (r == 0 && o->err)
      r = o->err;
  }
  if (to == TLC_FMT_EVLOG) {
    if (r == 0)
      r = tlc_evlog_enc_flush(&enc, o);
    tlc_evlog_enc_fini(&enc);
  }
  return r;
}

int tlc_moment_write(tlc_out_t *o, int export_, tlc_format_t in, const tlc_moment_t *mo,
                     const char *target, const tlc_table_t *t, const tlc_mapping_t *m,
                     tlc_timeline_t *tl) {
  switch (export_) {
  case TLC_MOMENT_TEXT1: {
    tlc_text1_opts_t op;
    tlc_text1_opts_default(&op);
    return tlc_text1_write(o, &op, t, m, tl);
  }
  case TLC_MOMENT_JSON:
    return tlc_moment_json(o, mo, target, t, m, tl);
  case TLC_MOMENT_BIN11:
  case TLC_MOMENT_BIN10:
  case TLC_MOMENT_EVLOG:
    return write_native(o, export_, in, tl);
  default:
    return TLC_EINVAL;
  }
}
