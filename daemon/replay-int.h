/* replay-int.h - what the files of `tlcapd replay` share: its state (rp_t) and the functions
 * one file calls in another. replay.c (options, inputs, exports) calls the three others;
 * replay_moment.c (--around) calls replay_gate.c (--budgets) and replay_input.c (the stored
 * segments and the stream); none calls back up.
 */
#ifndef TLC_DAEMON_REPLAY_INT_H
#define TLC_DAEMON_REPLAY_INT_H

#include "budget/budget.h"
#include "config/config.h"
#include "engine/engine.h"
#include "history/history.h"
#include "history/moment.h"
#include "formats/dec.h"
#include "formats/mapping.h"
#include "formats/text1.h"
#include "formats/when.h"
#include "formats/xml.h"
#include "formats/xref.h"

#include <stddef.h>
#include <stdint.h>

#define RP_CHUNK         (1u << 20)
#define RP_BATCH         256
#define RP_HEAD          (24 * 256)   /* bytes format detection reads: 256 bin1x records */
#define RP_MAX_FILE_TEXT (256u << 20) /* aprof/BR/mapping files are read whole, up to this */

enum rp_export { EX_TEXT1, EX_XML, EX_APROF, EX_BR, EX_JSON, EX_BIN11, EX_BIN10, EX_EVLOG };

/* parse_options, select_inputs and open_output return RP_GO to go on, else the exit status. */
#define RP_GO (-1)

typedef struct rp {
  char **files;
  size_t nfiles;
  const char *format_opt;
  tlc_format_t fmt;
  const char *mapping_path;
  const char *output;
  int export_;
  int export_given; /* --export was given (aprof and BR inputs default to json) */
  int has_ctx_area;
  uint32_t ctx_area;
  /* packed task variable (SPEC 2): --context-rtos FILE, then each explicit option over it */
  const char *rtos_path;
  tlc_ctxpack_t pack; /* the options' values */
  uint8_t pack_set;   /* TLC_CFG_PK_* bits: which options were given */
  int has_from, has_to;
  int64_t from, to;
  tlc_text1_opts_t t1;
  tlc_xml_opts_t xml;
  tlc_mapping_t mapping;
  int has_mapping;
  /* --state-dir DIR --target NAME: the target's stored segments (history, SPEC 10) */
  const char *state_dir, *target;
  const char *since_s, *until_s; /* --since/--until as given (when.h) */
  tlc_hist_files_t hf;           /* the chosen segments (files[] points at them) */
  char seg_target[129];          /* the target the segments' manifests name ("" none) */
  char kept_map[1200];           /* --state-dir: the target's kept `tlcap mapping` file */
  const char *json_target;       /* export_target(): the JSON export's "target" (NULL: null) */
  /* --budgets FILE: the gate */
  const char *budgets_path;
  tlc_tbudget_set_t budgets;
  tlc_bwatch_t *watch;
  tlc_hist_stream_t *stream; /* while the gate runs: names from its evlog mapping and engine */
  /* --around REF [--span DUR]: the moment (history/moment.h), a range centred on REF */
  const char *around_s, *span_s;
  tlc_moment_t around;
  int has_around;
  /* --around v:BUDGET:N with --budgets: the violation found by the gate's pass first */
  int has_vref, vfound;
  char vname[TLC_BUDGET_NAME_MAX + 1];
  uint64_t vn;
  tlc_violation_t vfirst; /* the violation, seen as the gate counted it (vfound) */
  struct gate_loc *gloc;  /* while the gate runs on stored segments: its violations located */
  /* --around max|min:KIND:AREA[@CONTEXT]: the extreme of the statistics of every segment */
  int has_xref;
  tlc_xref_t xref;
} rp_t;

/* ---- replay_input.c: the inputs ---- */

/* --state-dir/--target: the target's segments chosen for the range (history.h), as the files.
 * 0, or the exit status. */
int tlc__rp_history_files(rp_t *rp, const tlc_when_range_t *range);
/* The files as one capture; with_engine: an engine is fed as the events are read. */
int tlc__rp_stream_init(tlc_hist_stream_t *s, rp_t *rp, int with_engine);
/* Detects (or checks) the format of every stream file. Returns 0, 1 (bad input) or 2. */
int tlc__rp_resolve_formats(rp_t *rp);
int tlc__rp_ends_with(const char *s, const char *suffix);
/* The first RP_HEAD bytes of a file: the count, or -1 with errno set. */
int tlc__rp_read_head(const char *path, uint8_t head[RP_HEAD]);

/* ---- replay_gate.c: the budget gate (--budgets) ---- */

/* Reads --budgets and makes the watch for the target the inputs name. 0 or the exit status. */
int tlc__rp_gate_load(rp_t *rp);
/* Pass 1 with the watch as the engine's tap, then the report. 0 (none), 3 (violations) or 1. */
int tlc__rp_budget_gate(rp_t *rp, tlc_hist_stream_t *s, struct tlc_out *o);

/* ---- replay_moment.c: --around ---- */

/* --around REF [--span DUR] as given (nothing without them): the moment (has_around), or a
 * violation (has_vref) or an extreme (has_xref) to find. 0 or the exit status. */
int tlc__rp_around(rp_t *rp);
/* --around v:BUDGET:N: finds the violation with the gate's pass, then chooses the moment's
 * segments. 0 or the exit status. */
int tlc__rp_vref_moment(rp_t *rp);
/* --around max|min:KIND:AREA[@CONTEXT]: finds the extreme in the statistics of every stored
 * segment, then chooses the moment's segments. 0 or the exit status. */
int tlc__rp_xref_moment(rp_t *rp);

#endif
