/* replay_moment.c - `tlcapd replay --around REF [--span DUR]`: the moment (history/moment.h),
 * a range of the stored segments centred on a time or on violation N of a budget, which the
 * gate's pass (replay_gate.c) finds first.
 */
#include "daemon/replay-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"

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
    int k = tlc_moment_parse_vref(rp->around_s, rp->vname, sizeof(rp->vname), &rp->vn, err,
                                  sizeof(err));
    if (k < 0) {
      fprintf(stderr, "tlcapd replay: --%s\n", err);
      return 2;
    }
    if (k == 1 && rp->budgets_path == NULL) {
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
    if (k == 1) {
      rp->has_vref = 1; /* the moment once the violation is found (tlc__rp_vref_moment) */
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
  if (tlc_moment_of_stretch(v.start, v.end, v.epoch <= (uint64_t)INT64_MAX ? (int64_t)v.epoch : 0,
                            rp->span_s, &rp->around, err, sizeof(err)) < 0) {
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
