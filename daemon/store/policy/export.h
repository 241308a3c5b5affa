/* export.h - the main export of bin1x segments, the hook tlcapd gives the store
 * (tlc_store_opts_t.export_cb): that segment's statistics in Text1 or in winIDEA XML, beside its
 * .BIN timeline. It runs a statistics engine, which the store does not know: the policy, above
 * both, connects the two (docs/storage.md "winIDEA naming").
 */
#ifndef TLC_STPOL_EXPORT_H
#define TLC_STPOL_EXPORT_H

#include "store/seg/seg.h"

/* A tlc_store_export_fn: runs a fresh statistics engine over the segment's events (with x's
 * mapping and context_area; no quantiles, no windows) and writes Text1 (INFO, CONTEXTS, HANDLE,
 * STATISTICS with the default entry formats) or, with x->xml, winIDEA XML whose
 * <Timeline binary=...> is the segment's .BIN (its TimelineBinary: nothing more is written to
 * it). `ud` is unused. Runs on the store's thread that calls the hook (its post-seal worker, or
 * the recovering thread); allocates its engine, table and options per call and only reads the
 * shared, immutable mapping. Returns 0 or a negative error. */
int tlc_stpol_main_export(void *ud, const tlc_store_export_t *x);

#endif
