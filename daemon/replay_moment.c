/* replay_moment.c - `tlcapd replay --around REF [--span DUR]`: the moment (history/moment.h),
 * a range of the stored segments centred on a time or on violation N of a budget, which the
 * gate's pass (replay_gate.c) finds first.
 */
#include "daemon/replay-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"
#include "formats/evmap.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int tlc__rp_around(rp_t *rp) {
  char err[256];
  if (rp->around_s != NULL || rp->span_s != NULL) { /* else nothing to do */
    /* the moment (history/moment.h): a range around REF */
    if (rp->around_s == NULL || rp->since_s != NULL || rp->until_s != NULL ||
        rp->state_dir == NULL || rp->target == NULL) {
      fprintf(stderr, "tlcapd replay: --around needs --state-dir and --target, and goes "
                      "without --since/--until (--span needs --around)\n");
      return 2;
    }
    int64_t span;
    int k = tlc_xref_parse(rp->around_s, &rp->xref, err, sizeof(err));
    if (k == 0)
      k = tlc_moment_parse_vref(rp->around_s, rp->vname, sizeof(rp->vname), &rp->vn, err,
                                sizeof(err));
    else if (k == 1)
      rp->has_xref = 1; /* its moment once the statistics are there (tlc__rp_xref_moment) */
    if (k < 0) {
      fprintf(stderr, "tlcapd replay: --%s\n", err);
      return 2;
    }
    if (k == 1 && !rp->has_xref && rp->budgets_path == NULL) {
      fprintf(stderr,
              "tlcapd replay: --around %s needs --budgets FILE: the violation is found by "
              "running those budgets over the target's stored segments\n",
              rp->around_s);
      return 2;
    }
    if (k == 1 && rp->span_s != NULL && tlc_moment_parse_span(rp->span_s, &span) < 0) {
      fprintf(stderr,
              "tlcapd replay: --span: '%s' is not a duration (such as 10ms, 500us, 2s; at most "
              "24h)\n",
              rp->span_s);
      return 2;
    }
    if (k == 1 && !rp->has_xref) {
      rp->has_vref = 1; /* the moment once the violation is found (tlc__rp_vref_moment) */
    } else if (rp->has_xref) {
      /* found in tlc__rp_xref_moment */
    } else if (tlc_moment_parse(rp->around_s, rp->span_s, tlc_when_now(), &rp->around, err,
                                sizeof(err)) < 0) {
      fprintf(stderr, "tlcapd replay: --%s\n", err);
      return 2;
    } else {
      rp->has_around = 1;
    }
  }
  return 0;
}

static int moment_files(rp_t *rp, int64_t start, int64_t end, int64_t epoch);

/* --around v:BUDGET:N: the gate's pass over every stored segment finds violation N of BUDGET
 * (as `tlcapd replay --budgets` counts it), whose stretch start - span .. end + span in its
 * clock epoch is then the moment, read as an `epoch:K:N` one is. 0 or the exit status. */
int tlc__rp_vref_moment(rp_t *rp) {
  tlc_hist_stream_t s;
  const tlc_event_t *evs;
  tlc_violation_t v;
  char err[600];
  int r, status = 0;
  if ((status = tlc__rp_gate_load(rp)) != 0)
    return status;
  if ((r = tlc__rp_stream_init(&s, rp, 1)) < 0) {
    fprintf(stderr, "tlcapd replay: %s\n", tlc_strerror(r));
    return 1;
  }
  rp->stream = &s;
  while (tlc_hist_stream_next(&s, &evs) > 0)
    ;
  rp->stream = NULL;
  if (s.bad_input || s.io_err)
    status = 1;
  r = tlc_bwatch_find(rp->watch, rp->vname, rp->vn, &v, err, sizeof(err));
  if (r < 0 && rp->vfound) {
    v = rp->vfirst;
    r = 0;
  }
  tlc_hist_stream_fini(&s);
  tlc_bwatch_free(rp->watch);
  rp->watch = NULL; /* the export is the moment's, not the gate's report */
  if (r < 0) {
    fprintf(stderr, "tlcapd replay: %s/%s: %s\n", rp->state_dir, rp->target, err);
    return 1;
  }
  if (status != 0)
    return status;
  return moment_files(rp, v.start, v.end, v.epoch <= (uint64_t)INT64_MAX ? (int64_t)v.epoch : 0);
}

/* The moment of the stretch start..end in clock epoch `epoch` (with --span), and the segments
 * that hold it instead of all of them. 0 or the exit status. */
static int moment_files(rp_t *rp, int64_t start, int64_t end, int64_t epoch) {
  char err[300];
  int status;
  if (tlc_moment_of_stretch(start, end, epoch, rp->span_s, &rp->around, err, sizeof(err)) < 0) {
    fprintf(stderr, "tlcapd replay: --%s\n", err);
    return 2;
  }
  rp->has_around = 1;
  /* the moment's segments instead of all of them */
  tlc_hist_files_fini(&rp->hf);
  memset(&rp->hf, 0, sizeof(rp->hf));
  rp->files = NULL;
  rp->nfiles = 0;
  if ((status = tlc__rp_history_files(rp, &rp->around.range)) != 0)
    return status;
  if (rp->nfiles == 0) {
    fprintf(stderr, "tlcapd replay: %s/%s: no segment holds %s\n", rp->state_dir, rp->target,
            rp->around_s);
    return 1;
  }
  return tlc__rp_resolve_formats(rp);
}

/* --around max|min:KIND:AREA[@CONTEXT]: the statistics of every stored segment of the target,
 * as the replay computes them (one pass with the engine), give the extreme (formats/xref.h:
 * the same lookup as the daemon's over its live statistics), names from --mapping, the
 * target's kept mapping or an evlog stream's own; its sample's stretch start - span .. end +
 * span in its clock epoch is then the moment, read as an `epoch:K:N` one is. 0 or the exit
 * status (1: no such area, context or sample, with the daemon's messages). */
int tlc__rp_xref_moment(rp_t *rp) {
  tlc_hist_stream_t s;
  const tlc_event_t *evs;
  tlc_snap_opts_t so;
  tlc_mapping_t names;
  const tlc_mapping_t *m = rp->has_mapping ? &rp->mapping : NULL;
  tlc_table_t t;
  tlc_at_t at;
  int64_t value;
  uint32_t h;
  char err[600];
  int r, status = 0;
  if ((r = tlc__rp_stream_init(&s, rp, 1)) < 0) {
    fprintf(stderr, "tlcapd replay: %s\n", tlc_strerror(r));
    return 1;
  }
  while (tlc_hist_stream_next(&s, &evs) > 0)
    ;
  if (s.bad_input || s.io_err)
    status = 1;
  tlc_mapping_init(&names);
  if (m == NULL && s.pipe.evmap != NULL && tlc_evmap_export(s.pipe.evmap, &names) == 0) {
    tlc_mapping_finish(&names);
    m = &names;
  }
  tlc_table_init(&t);
  memset(&so, 0, sizeof(so));
  r = s.pipe.engine != NULL ? tlc_engine_snapshot(s.pipe.engine, &t, &so) : TLC_ENOMEM;
  if (r < 0)
    snprintf(err, sizeof(err), "statistics: %s", tlc_strerror(r));
  else if ((r = tlc_xref_handle(&rp->xref, m, &h, err, sizeof(err))) == 0)
    r = tlc_xref_find(&rp->xref, &t, m, h, &at, &value, err, sizeof(err));
  tlc_table_fini(&t);
  tlc_mapping_fini(&names);
  tlc_hist_stream_fini(&s);
  if (r < 0) {
    fprintf(stderr, "tlcapd replay: %s/%s: %s\n", rp->state_dir, rp->target, err);
    return 1;
  }
  if (status != 0)
    return status;
  return moment_files(rp, at.start, at.end, (int64_t)at.epoch);
}
