/* pipeline.c - decoder -> evlog mapping -> engine, one object for every place that runs it (see
 * pipeline.h).
 *
 * Cost: no copy per event on the way of a bin1x stream without a range (the decoder's events go
 * to the engine as they are); the evlog mapping writes its 0..2 outputs per item into `out`, and
 * a range (or a gap to mark) copies the events it keeps there.
 */
#include "engine/pipeline.h"

#include "base/err.h"

#include <string.h>

static int dec_open(tlc_pipeline_t *p) {
  int r = tlc_dec_init(&p->dec, p->format, &p->conf.dec);
  p->dec_live = r == 0;
  return r;
}

static int evmap_open(tlc_pipeline_t *p) {
  if (p->format != TLC_FMT_EVLOG)
    return 0;
  return tlc_evmap_new(&p->evmap, &p->conf.evmap);
}

int tlc_pipeline_init(tlc_pipeline_t *p, const tlc_pipeline_conf_t *conf,
                      const tlc_pipeline_io_t *io) {
  int r;
  memset(p, 0, sizeof(*p));
  p->conf = *conf;
  p->format = conf->format;
  if (io != NULL)
    p->io = *io;
  if ((conf->format == TLC_FMT_EVLOG || conf->has_from || conf->has_to) &&
      (p->io.raw == NULL || p->io.out == NULL || p->io.batch == 0))
    return TLC_EINVAL;
  r = dec_open(p);
  if (r != 0)
    return r;
  if (conf->with_engine) {
    r = tlc_engine_new(&p->engine, conf->format, &conf->engine);
    if (r != 0)
      goto fail;
  }
  r = evmap_open(p);
  if (r != 0)
    goto fail;
  return 0;
fail:
  tlc_pipeline_fini(p);
  return r;
}

void tlc_pipeline_fini(tlc_pipeline_t *p) {
  if (p->evmap != NULL)
    tlc_evmap_free(p->evmap);
  p->evmap = NULL;
  if (p->engine != NULL)
    tlc_engine_free(p->engine); /* releases its charges */
  p->engine = NULL;
  if (p->dec_live)
    tlc_dec_fini(&p->dec);
  p->dec_live = 0;
}

/* The mapping and range step: ev[0..n) -> *out. */
static int map(tlc_pipeline_t *p, const tlc_event_t *ev, size_t n, const tlc_event_t **out) {
  const tlc_pipeline_conf_t *c = &p->conf;
  size_t k = 0;
  *out = p->io.out;
  if (p->evmap == NULL && !c->has_from && !c->has_to && !p->pending_gap) {
    *out = ev; /* nothing to change: the decoder's events as they are */
    if (n > 0)
      p->any_out = 1;
    return (int)n;
  }
  if (p->io.out == NULL)
    return TLC_EINVAL;
  if (n > p->io.batch)
    return TLC_ERANGE; /* `out` holds two events per item of one batch */
  if (!c->has_from && !c->has_to && !p->pending_gap) {
    /* mapping only: straight into `out` (room for two per item) */
    for (size_t i = 0; i < n; i++) {
      int m = tlc_evmap_map(p->evmap, &ev[i], &p->io.out[k]);
      if (m < 0 && c->stop_on_map_error)
        return m;
      if (m > 0)
        k += (size_t)m;
    }
    if (k > 0)
      p->any_out = 1;
    *out = p->io.out;
    return (int)k;
  }
  for (size_t i = 0; i < n; i++) {
    tlc_event_t tmp[2];
    const tlc_event_t *src = &ev[i];
    int m = 1;
    if (p->evmap != NULL) {
      /* evmap forgets its stacks itself at an input event carrying TLC_EVF_GAP. */
      m = tlc_evmap_map(p->evmap, &ev[i], tmp);
      if (m < 0 && c->stop_on_map_error)
        return m;
      if (m <= 0)
        continue;
      src = tmp;
    }
    for (int j = 0; j < m; j++) {
      if (c->has_from && src[j].time_ns < c->from)
        continue;
      if (c->has_to && src[j].time_ns > c->to)
        continue;
      p->io.out[k] = src[j];
      if (p->pending_gap) { /* a gap only between events that come out */
        if (p->any_out)
          p->io.out[k].flags |= TLC_EVF_GAP;
        p->pending_gap = 0;
      }
      p->any_out = 1;
      k++;
    }
  }
  *out = p->io.out;
  return (int)k;
}

int tlc_pipeline_events(tlc_pipeline_t *p, const tlc_event_t *ev, size_t n,
                        const tlc_event_t **out) {
  const tlc_event_t *o;
  int k = map(p, ev, n, &o);
  if (out != NULL)
    *out = o;
  if (k <= 0)
    return k;
  if (p->engine != NULL)
    tlc_engine_push(p->engine, o, (size_t)k);
  if (p->io.mapped_cb != NULL)
    p->io.mapped_cb(p->io.ud, o, (size_t)k);
  return k;
}

/* Decoded events (n, or the decoder's error): observers, then the rest of the way. */
static int decoded(tlc_pipeline_t *p, int n, const uint8_t *chunk, size_t clen, uint64_t coff,
                   const tlc_event_t **out, int *nout) {
  const tlc_event_t *o = p->io.out;
  int k = 0;
  if (n > 0) {
    if (p->io.decoded_cb != NULL)
      p->io.decoded_cb(p->io.ud, p->io.raw, (size_t)n, chunk, clen, coff);
    k = tlc_pipeline_events(p, p->io.raw, (size_t)n, &o);
  }
  if (out != NULL)
    *out = o;
  if (nout != NULL)
    *nout = k;
  return n;
}

int tlc_pipeline_push(tlc_pipeline_t *p, const uint8_t *buf, size_t len, size_t *used,
                      const tlc_event_t **out, int *nout) {
  uint64_t pos = p->dec.pos;
  int n;
  *used = 0;
  if (!p->dec_live)
    return decoded(p, TLC_EINVAL, NULL, 0, 0, out, nout);
  n = tlc_dec_push(&p->dec, buf, len, used, p->io.raw, p->io.batch);
  if (*used > 0 && p->io.bytes_cb != NULL)
    p->io.bytes_cb(p->io.ud, buf, *used, pos);
  return decoded(p, n, buf, *used, pos, out, nout);
}

int tlc_pipeline_finish(tlc_pipeline_t *p, const tlc_event_t **out, int *nout) {
  if (!p->dec_live)
    return decoded(p, 0, NULL, 0, 0, out, nout);
  return decoded(p, tlc_dec_finish(&p->dec, p->io.raw, p->io.batch), NULL, 0, 0, out, nout);
}

int tlc_pipeline_idle(tlc_pipeline_t *p, const tlc_event_t **out, int *nout) {
  if (!p->dec_live)
    return decoded(p, 0, NULL, 0, 0, out, nout);
  return decoded(p, tlc_dec_idle(&p->dec, p->io.raw, p->io.batch), NULL, 0, 0, out, nout);
}

void tlc_pipeline_gap(tlc_pipeline_t *p) {
  if (p->engine != NULL)
    tlc_engine_gap(p->engine);
  if (p->evmap != NULL)
    tlc_evmap_gap(p->evmap);
}

void tlc_pipeline_gap_mark(tlc_pipeline_t *p) {
  if (p->evmap != NULL)
    tlc_evmap_gap(p->evmap);
  p->pending_gap = 1;
}

void tlc_pipeline_reset(tlc_pipeline_t *p) {
  if (p->dec_live)
    tlc_dec_reset(&p->dec);
}

static void add_counters(tlc_dec_counters_t *a, const tlc_dec_counters_t *b) {
  a->bytes += b->bytes;
  a->records += b->records;
  a->bytes_skipped += b->bytes_skipped;
  a->resyncs += b->resyncs;
  a->records_invalid += b->records_invalid;
  a->truncated += b->truncated;
  a->blocks += b->blocks;
  a->overflow_blocks += b->overflow_blocks;
  a->overflow_items += b->overflow_items;
}

int tlc_pipeline_restart(tlc_pipeline_t *p) {
  if (p->dec_live) {
    add_counters(&p->total, &p->dec.c);
    tlc_dec_fini(&p->dec);
    p->dec_live = 0;
  }
  return dec_open(p);
}

int tlc_pipeline_rewind(tlc_pipeline_t *p) {
  int r = tlc_pipeline_restart(p);
  memset(&p->total, 0, sizeof(p->total));
  p->pending_gap = p->any_out = 0;
  if (p->evmap != NULL) {
    tlc_evmap_free(p->evmap);
    p->evmap = NULL;
  }
  if (r != 0)
    return r;
  return evmap_open(p);
}

struct tlc_engine *tlc_pipeline_take_engine(tlc_pipeline_t *p) {
  struct tlc_engine *e = p->engine;
  p->engine = NULL;
  return e;
}

void tlc_pipeline_dec_counters(const tlc_pipeline_t *p, tlc_dec_counters_t *out) {
  *out = p->total;
  if (p->dec_live)
    add_counters(out, &p->dec.c);
}
