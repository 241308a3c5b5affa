/* oracle_segments.c - the brute-force model (tests/oracle) over stored segments, for the
 * continuity tests: what an uninterrupted run over exactly these bytes gives.
 *
 *   oracle_segments FORMAT [--range A B] ITEM...    ITEM: a segment's data file, or GAP
 *
 * Segments are read in the order given, record by record (tlc_segread), decoded strictly
 * (evlog: through the evlog mapping) and pushed to the oracle; every `disconnect` or
 * `clock-reset` gap their manifests record is a gap at its place (as the live target made it), GAP
 * a gap where the test says one happened (a restart). With --range only the events whose target
 * time t has A <= t < B count, and a gap only between two of them (history, tlcapd replay
 * --since/--until). Prints the oracle's table as the JSON export (Neutral rows, no windows). Exit
 * 0, 1 on a read error, 2 usage.
 */
#include "base/alloc.h"
#include "base/err.h"
#include "formats/dec.h"
#include "formats/evmap.h"
#include "formats/json.h"
#include "formats/stats.h"
#include "oracle.h"
#include "store/seg/segread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 256

typedef struct st {
  int ranged; /* --range A B: only events with A <= t < B */
  int64_t lo, hi;
  int pending, any; /* ranged: a gap waits for the next event in the range */
  tlc_format_t fmt;
  tlc_dec_t dec;
  tlc_evmap_t *m;
  tlc_oracle_t *o;
  tlc_event_t ev[BATCH], out[2 * BATCH];
} st_t;

static void emit(st_t *s, const tlc_event_t *ev, size_t n) {
  if (!s->ranged) {
    tlc_oracle_push(s->o, ev, n);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (ev[i].time_ns < s->lo || ev[i].time_ns >= s->hi)
      continue;
    if (s->pending && s->any)
      tlc_oracle_gap(s->o); /* a gap counts between two events of the range */
    s->pending = 0;
    s->any = 1;
    tlc_oracle_push(s->o, &ev[i], 1);
  }
}

static void push(st_t *s, const tlc_event_t *ev, size_t n) {
  if (s->m == NULL) {
    emit(s, ev, n);
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int r = tlc_evmap_map(s->m, &ev[i], &s->out[k]);
    if (r > 0)
      k += (size_t)r;
  }
  emit(s, s->out, k);
}

static int feed(st_t *s, const uint8_t *p, size_t len) {
  while (len > 0) {
    size_t used = 0;
    int n = tlc_dec_push(&s->dec, p, len, &used, s->ev, BATCH);
    if (n < 0)
      return n;
    if (n > 0)
      push(s, s->ev, (size_t)n);
    if (n == 0 && used == 0)
      return TLC_EFRAME;
    p += used;
    len -= used;
  }
  return 0;
}

static void gap(st_t *s) {
  int n;
  while ((n = tlc_dec_finish(&s->dec, s->ev, BATCH)) > 0)
    push(s, s->ev, (size_t)n);
  tlc_dec_reset(&s->dec);
  if (s->ranged)
    s->pending = 1;
  else
    tlc_oracle_gap(s->o);
  if (s->m != NULL)
    tlc_evmap_gap(s->m);
}

static int segment(st_t *s, const char *path) {
  tlc_segread_t *r;
  tlc_seginfo_t info;
  char err[200];
  const uint8_t *rec;
  size_t len, gi = 0;
  uint64_t off;
  int rc = tlc_segread_open(path, s->fmt, 0, &r, err, sizeof err);
  if (rc != 0) {
    fprintf(stderr, "oracle_segments: %s: %s\n", path, err);
    return 1;
  }
  tlc_segread_info(r, &info);
  for (;;) {
    rc = tlc_segread_next(r, &rec, &len, &off);
    for (; gi < info.ngaps; gi++) {
      const char *reason;
      uint64_t cnt, goff;
      if (tlc_segread_gap(r, gi, &reason, &cnt, &goff) != 0 || (rc == 1 && goff > off))
        break;
      if (strcmp(reason, "disconnect") == 0 || strcmp(reason, "clock-reset") == 0 ||
          strcmp(reason, "reset") == 0)
        while (cnt-- > 0)
          gap(s);
    }
    if (rc != 1)
      break;
    if (feed(s, rec, len) != 0) {
      fprintf(stderr, "oracle_segments: %s: bad record at %llu\n", path, (unsigned long long)off);
      tlc_segread_close(r);
      return 1;
    }
  }
  tlc_segread_close(r);
  return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv) {
  st_t *s;
  tlc_oracle_opts_t oo;
  tlc_table_t t;
  tlc_out_t out;
  int rc = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: oracle_segments bin10|bin11|evlog ITEM...\n");
    return 2;
  }
  s = calloc(1, sizeof *s);
  s->fmt = strcmp(argv[1], "evlog") == 0   ? TLC_FMT_EVLOG
           : strcmp(argv[1], "bin10") == 0 ? TLC_FMT_BIN10
                                           : TLC_FMT_BIN11;
  memset(&oo, 0, sizeof oo);
  oo.clock_reset_ns = 1000000000; /* the daemon's default clock_reset_threshold */
  if (tlc_dec_init(&s->dec, s->fmt, NULL) != 0 || tlc_oracle_new(&s->o, s->fmt, &oo) != 0 ||
      (s->fmt == TLC_FMT_EVLOG && tlc_evmap_new(&s->m, NULL) != 0)) {
    fprintf(stderr, "oracle_segments: init failed\n");
    return 1;
  }
  int first = 2;
  if (argc >= 5 && strcmp(argv[2], "--range") == 0) {
    s->ranged = 1;
    s->lo = strtoll(argv[3], NULL, 0);
    s->hi = strtoll(argv[4], NULL, 0);
    first = 5;
  }
  for (int i = first; i < argc && rc == 0; i++) {
    if (strcmp(argv[i], "GAP") == 0)
      gap(s);
    else
      rc = segment(s, argv[i]);
  }
  if (rc != 0)
    return 1;
  {
    int n;
    while ((n = tlc_dec_finish(&s->dec, s->ev, BATCH)) > 0)
      push(s, s->ev, (size_t)n);
  }
  tlc_table_init(&t);
  if (tlc_oracle_table(s->o, &t, 0, 1) != 0)
    return 1;
  tlc_out_init(&out, 0, NULL, NULL);
  tlc_json_write(&out, &t, NULL, NULL, 0);
  fwrite(out.buf, 1, out.len, stdout);
  tlc_out_fini(&out);
  tlc_table_fini(&t);
  tlc_oracle_free(s->o);
  tlc_evmap_free(s->m);
  tlc_dec_fini(&s->dec);
  free(s);
  return 0;
}
