/* replay_input.c - `tlcapd replay`'s inputs: the stored segments of --state-dir/--target for a
 * range, the files' formats, and the stream that reads them as one capture.
 */
#include "daemon/replay-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "base/fileread.h"
#include "store/seg/segread.h"

/* Messages of the stream (decode and read errors) and of segment selection. */
static void say_cb(void *ud, const char *msg) {
  (void)ud;
  fprintf(stderr, "tlcapd replay: %s\n", msg);
}

/* --state-dir/--target: the target's segments chosen for the range (history.h), as the files.
 * 0, or the exit status. */
int tlc__rp_history_files(rp_t *rp, const tlc_when_range_t *range) {
  char err[400];
  tlc_hist_epoch_ctx_t ec = { 1000000000, -1 }; /* offline: the default threshold */
  int r = tlc_hist_select(rp->state_dir, rp->target, range, &ec, tlc_when_now(), &rp->hf, say_cb,
                          NULL, err, sizeof(err));
  if (r != 0) {
    fprintf(stderr, "tlcapd replay: %s\n", err);
    return 1;
  }
  tlc_free(rp->files); /* sized for the operands (none): the segments instead */
  rp->files = rp->hf.files;
  rp->nfiles = rp->hf.n;
  rp->has_from = rp->hf.has_from;
  rp->from = rp->hf.from;
  rp->has_to = rp->hf.has_to;
  rp->to = rp->hf.to;
  if (rp->hf.n > 0 && rp->format_opt != NULL && strcmp(rp->format_opt, "auto") == 0)
    rp->format_opt = tlc_format_name(rp->hf.fmt);
  return 0;
}

int tlc__rp_ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The files as one capture (history.h: the stream the daemon's range queries use too);
 * with_engine: an engine (rp's context area and mapping) is fed as the events are read, until
 * tlc_pipeline_take_engine. */
int tlc__rp_stream_init(tlc_hist_stream_t *s, rp_t *rp, int with_engine) {
  memset(s, 0, sizeof(*s));
  s->files = rp->files;
  s->nfiles = rp->nfiles;
  s->gap_before = rp->hf.n > 0 ? rp->hf.gap_before : NULL;
  s->conf.format = rp->fmt;
  s->conf.has_from = rp->has_from;
  s->conf.has_to = rp->has_to;
  s->conf.from = rp->from;
  s->conf.to = rp->to;
  s->has_wall = rp->hf.n > 0 && rp->hf.has_wall; /* a wall-clock range: cut by arrival */
  s->wall_since = rp->hf.wall_since;
  s->wall_until = rp->hf.wall_until;
  s->conf.stop_on_map_error = 1;
  s->conf.with_engine = with_engine;
  tlc_engine_opts_default(&s->conf.engine);
  s->conf.engine.has_context_area = (uint8_t)rp->has_ctx_area;
  s->conf.engine.context_area = rp->ctx_area;
  if (tlc_ctxpack_on(&rp->pack))
    s->conf.engine.pack = rp->pack;
  s->conf.engine.mapping = rp->has_mapping ? &rp->mapping : NULL;
  if (rp->watch != NULL && with_engine)
    tlc_bwatch_engine_opts(rp->watch, &s->conf.engine);
  s->msg = say_cb;
  s->report = 1;
  return tlc_hist_stream_init(s);
}

/* Reads the first RP_HEAD bytes of a file (format detection looks no further). Returns the
 * count, or -1 with errno set when the file cannot be opened. */
int tlc__rp_read_head(const char *path, uint8_t head[RP_HEAD]) {
  size_t n;
  FILE *fp = fopen(path, "rb");
  if (fp == NULL)
    return -1;
  n = fread(head, 1, RP_HEAD, fp);
  fclose(fp);
  return (int)n;
}

/* Detects (or checks) the format of every stream file. Returns 0, 1 (bad input) or 2. */
int tlc__rp_resolve_formats(rp_t *rp) {
  size_t i;
  tlc_format_t common = TLC_FMT_NONE;
  for (i = 0; i < rp->nfiles; i++) {
    tlc_format_t f;
    if (strcmp(rp->format_opt, "auto") == 0 && tlc__rp_ends_with(rp->files[i], ".zst")) {
      tlc_segread_t *sr;
      tlc_seginfo_t info;
      char err[200] = "";
      int r = tlc_segread_open(rp->files[i], TLC_FMT_NONE, 0, &sr, err, sizeof(err));
      if (r < 0) {
        fprintf(stderr, "tlcapd replay: %s: %s\n", rp->files[i], err[0] ? err : tlc_strerror(r));
        return 1;
      }
      tlc_segread_info(sr, &info);
      tlc_segread_close(sr);
      f = info.format;
      fprintf(stderr, "tlcapd replay: %s: format auto: %s (compressed segment)\n", rp->files[i],
              tlc_format_name(f));
    } else if (strcmp(rp->format_opt, "auto") == 0) {
      uint8_t head[RP_HEAD];
      char why[160];
      int n = tlc__rp_read_head(rp->files[i], head);
      if (n < 0) {
        fprintf(stderr, "tlcapd replay: %s: %s\n", rp->files[i], strerror(errno));
        return 1;
      }
      f = tlc_dec_detect(head, (size_t)n, why, sizeof(why));
      if (f == TLC_FMT_NONE) {
        fprintf(stderr, "tlcapd replay: %s: byte 0: cannot tell the format: %s\n", rp->files[i],
                why);
        return 1;
      }
      fprintf(stderr, "tlcapd replay: %s: format auto: %s\n", rp->files[i], why);
    } else {
      f = tlc_format_parse(rp->format_opt);
    }
    if (common != TLC_FMT_NONE && f != common) {
      fprintf(stderr,
              "tlcapd replay: %s: format %s differs from %s of the files before it; replay "
              "one capture at a time\n",
              rp->files[i], tlc_format_name(f), tlc_format_name(common));
      return 1;
    }
    common = f;
  }
  rp->fmt = common;
  return 0;
}
