/* export.c - the main-export hook of bin1x segments (export.h): that segment's statistics in
 * Text1 or in winIDEA XML, beside the segment's .BIN timeline.
 *
 * The hook recomputes the segment's statistics from its own bytes (a fresh engine over the
 * segment's timeline), so a segment's export is exact for that segment even when the writer
 * rotated on its own (size, age, I/O error) or crash recovery sealed it, and costs the loop
 * nothing. It uses the target's settings as the store passes them (tlc_store_export_t): its
 * mapping (area and task names, variable -> state links, as the live engine has them) and its
 * context_area, so the export equals `tlcapd replay SEGMENT --mapping M --context-area H` (for
 * XML: with `--xml-timeline bin11|bin10`, less the quantiles and rolling windows, see below).
 * A segment sealed by crash recovery has no settings: its areas are listed by handle.
 *
 * Text1: INFO, CONTEXTS, HANDLE, STATISTICS with the default entry formats; no TIMELINE (the
 * .BIN is the timeline). XML (TimelineBinary, as winIDEA writes it): <base>.xml beside
 * <base>.xml.BIN, whose <Timeline binary="<base>.xml.BIN" .../> names the segment's data file;
 * the XML writer's own sidecar output is discarded (the segment already holds those bytes). The
 * Info counters bytes and records are the segment's (24 bytes per record).
 *
 * Cost: one engine pass over the segment (XML: plus one more read to count the timeline's
 * events). The engine runs without quantile histograms and without rolling windows: Text1 has
 * no macro that prints either (formats/text1.c), and the XML writer prints them only when a
 * table has them (they are optional in ProfilerExport.xsd, and winIDEA's XML has neither), so
 * they would only cost time on the store's thread (about half of the export's engine time).
 *
 * Runs on the store's thread that calls the hook (or the recovering thread); allocates its
 * engine, table and options per call; only reads the shared (immutable) mapping.
 */
#include "store/policy/export.h"

#include "base/alloc.h"
#include "base/err.h"
#include "engine/engine.h"
#include "engine/pipeline.h"
#include "formats/bin1x.h"
#include "formats/text1.h"
#include "formats/xml.h"

#include <string.h>

static int discard_cb(void *ud, const void *buf, size_t len) {
  (void)ud;
  (void)buf;
  (void)len;
  return 0;
}

static int write_xml(const tlc_store_export_t *x, const tlc_table_t *tab) {
  tlc_xml_opts_t xo;
  tlc_out_t side;
  tlc_xml_opts_default(&xo);
  xo.timeline = TLC_XML_TL_BINARY;
  xo.bin_version = x->format;
  xo.sidecar_name = x->data_name;
  tlc_out_init(&side, 0, discard_cb, NULL);
  int rc = tlc_xml_write(x->out, &xo, tab, x->mapping, x->timeline, &side);
  int src = tlc_out_fini(&side);
  return rc < 0 ? rc : src;
}

int tlc_stpol_main_export(void *ud, const tlc_store_export_t *x) {
  (void)ud;
  tlc_pipeline_t p;
  tlc_pipeline_conf_t pc;
  memset(&pc, 0, sizeof pc);
  pc.format = x->format;
  pc.with_engine = 1;
  tlc_engine_opts_default(&pc.engine);
  pc.engine.histograms = 0; /* no quantiles and no windows are printed: do not compute them */
  pc.engine.nwindows = 0;
  pc.engine.has_context_area = x->has_context_area;
  pc.engine.context_area = x->context_area;
  if (tlc_ctxpack_on(&x->pack))
    pc.engine.pack = x->pack;
  pc.engine.mapping = x->mapping;
  /* the timeline's events are decoded already (bin1x: no mapping, no range): the pipeline's
   * engine takes them as they are */
  int rc = tlc_pipeline_init(&p, &pc, NULL);
  if (rc < 0)
    return rc;
  const tlc_event_t *evs;
  int n;
  uint64_t records = 0;
  while ((n = x->timeline->next(x->timeline->ud, &evs)) > 0) {
    tlc_pipeline_events(&p, evs, (size_t)n, NULL);
    records += (uint64_t)n; /* bin1x: one event per record */
  }
  if (n < 0) {
    tlc_pipeline_fini(&p);
    return n;
  }
  tlc_table_t tab;
  tlc_table_init(&tab);
  tlc_snap_opts_t so = { 0, 0, 1, 0, 0, 0 }; /* all rows, Neutral; no windows, no quantiles */
  rc = tlc_engine_snapshot(p.engine, &tab, &so);
  tab.counters.records = records;
  tab.counters.bytes = records * TLC_BIN1X_RECORD;
  if (rc == 0 && x->xml) {
    rc = write_xml(x, &tab);
  } else if (rc == 0) {
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
  tlc_pipeline_fini(&p);
  return rc;
}
