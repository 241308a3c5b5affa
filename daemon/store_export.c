/* store_export.c - the main-export hook of bin1x segments: Text1 with that segment's statistics.
 *
 * The hook recomputes the segment's statistics from its own bytes (a fresh engine over the
 * segment's timeline), so a segment's export is exact for that segment even when the writer
 * rotated on its own (size, age, I/O error) or crash recovery sealed it, and costs the loop
 * nothing. It uses the target's settings as the store passes them (tlc_store_export_t): its
 * mapping (area and task names, variable -> state links, as the live engine has them) and its
 * context_area, so the export equals `tlcapd replay SEGMENT --mapping M --context-area H`.
 * A segment sealed by crash recovery has no settings: its areas are listed by handle.
 * Runs on the sealer thread (or the recovering thread); allocates its engine, table and
 * options per call; only reads the shared (immutable) mapping.
 *
 * Cost: one engine pass over the segment. The engine runs without quantile histograms and
 * without rolling windows: Text1 has no macro that prints either (formats/text1.c), so they
 * would only cost time on the sealer thread (about half of the export's engine time).
 */
#include "engine.h"
#include "store.h"
#include "text1.h"
#include "tlc_alloc.h"
#include "tlc_err.h"

int tlc_store_text1_export(void *ud, const tlc_store_export_t *x) {
  (void)ud;
  tlc_engine_t *e;
  tlc_engine_opts_t eo;
  tlc_engine_opts_default(&eo);
  eo.histograms = 0; /* no quantiles and no windows are printed: do not compute them */
  eo.nwindows = 0;
  eo.has_context_area = x->has_context_area;
  eo.context_area = x->context_area;
  eo.mapping = x->mapping;
  int rc = tlc_engine_new(&e, x->format, &eo);
  if (rc < 0)
    return rc;
  const tlc_event_t *evs;
  int n;
  while ((n = x->timeline->next(x->timeline->ud, &evs)) > 0)
    tlc_engine_push(e, evs, (size_t)n);
  if (n < 0) {
    tlc_engine_free(e);
    return n;
  }
  tlc_table_t tab;
  tlc_table_init(&tab);
  tlc_snap_opts_t so = { 0, 0, 1, 0 }; /* all rows, Neutral; no windows, no quantiles */
  rc = tlc_engine_snapshot(e, &tab, &so);
  if (rc == 0) {
    tlc_text1_opts_t *opts = tlc_malloc(sizeof *opts); /* large; not on the writer's stack */
    if (!opts) {
      rc = TLC_ENOMEM;
    } else {
      tlc_text1_opts_default(opts);
      opts->sections &= ~TLC_T1_SEC_TIMELINE;
      rc = tlc_text1_write(x->out, opts, &tab, x->mapping, NULL);
      tlc_free(opts);
    }
  }
  tlc_table_fini(&tab);
  tlc_engine_free(e);
  return rc;
}
