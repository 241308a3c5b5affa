/* brw.h - BR profiler file export of a target's statistics (timed profile).
 *
 * One CREATE MODULE MAPPING per source file of the line areas (module numbers 1.. in order of
 * the files' first line area by handle), then per observed line area: CURRENT LINE (module,
 * line number, clause 0), FUNCTION NAME (the parent function's name; the seed has it follow
 * CURRENT LINE directly), TIME SPENT IN LINE (the line's NET time summed over its contexts) and
 * END CURRENT LINE. Numbers in network byte order (formats/br.h emitters). Lines without a
 * mapping entry go to a module for file "" with line number 0.
 *
 * Pure: reads a sorted tlc_table_t and an optional mapping, writes into a tlc_out_t.
 */
#ifndef TLC_BRW_H
#define TLC_BRW_H

#include "base/out.h"
#include "formats/mapping.h"
#include "formats/stats.h"

/* Returns 0, TLC_ELIMIT (more than 65535 source files), TLC_ENOMEM or the output's error. */
int tlc_br_export(tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m);
/* The number of line areas in t: what tlc_br_export writes an entry for. A table without one
 * exports to nothing (a BR file holds line entries only); callers say so. */
size_t tlc_br_line_areas(const tlc_table_t *t);

#endif
