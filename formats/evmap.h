/* evmap.h - the evlog mapping (SPEC section 2): decoded evlog items to engine events.
 *
 *   +name  E on code area `name` (type 0); the thread's innermost open activation, if any,
 *          first gets an S at the same time (TLC_EVF_SYNTH)
 *   -name  X on code area `name`; then the thread's new innermost, if any, gets an R (SYNTH)
 *   >name  W value 1 on state area `name` (type 3)     <name  X on it
 *   !name  W value 0 on data area `name` (type 2)
 *   *CPUFREQ n, *CPUUSED t   W on AUX area "CPUFREQ n" / "CPUUSED t" (type 4), value = the
 *          detail's unsigned decimal integer; other `*` items are metadata (no event)
 *
 * Handles are given in order of first appearance: the type nibble, then a counter per type
 * from 0 (`+a` 0x00000000, `+b` 0x00000001, `>s` 0x30000000, `!x` 0x20000000, `*CPUFREQ 0`
 * 0x40000000). The per-thread stacks mirror the engine's: X closes the innermost open
 * activation of its area in the thread and truncates those above it; X with no open
 * activation of its area changes nothing (the X is still emitted, without R). At a gap (an
 * input event with TLC_EVF_GAP, or tlc_evmap_gap) every stack is forgotten, as the engine
 * truncates everything there.
 *
 * Output events keep the input's time_ns, thread (the context), offset and evlog pointer, core
 * TLC_CORE_UNKNOWN; TLC_EVF_GAP goes on the first output, TLC_EVF_BLOCK_END on the last.
 *
 * Memory: a name table (open addressing) and per-thread stacks, each with a cap; they grow only
 * when a new name, a new thread or a deeper nesting appears, so the steady state allocates
 * nothing. Not thread-safe; one owner (the target's engine).
 */
#ifndef TLC_EVMAP_H
#define TLC_EVMAP_H

#include "formats/ckbuf.h"
#include "formats/mapping.h"
#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlc_evmap tlc_evmap_t;

typedef struct tlc_evmap_opts {
  size_t max_names;      /* areas, all types together (0: 1,000,000; at most 2^28) */
  size_t max_name_bytes; /* bytes of area names kept, NULs included (0: 64 MiB) */
  size_t max_depth;      /* open activations tracked per thread (0: 1024) */
  size_t max_threads;    /* threads with a stack (0: 65536) */
  /* A memory budget (may be NULL: none). A new area first asks charge_cb for what it will
   * hold at most (its name twice and its table entries twice: every array grows by doubling);
   * a refusal (non-zero) maps the item to nothing, counted in dropped_area_limit, as past
   * max_names. The names of a checkpoint (tlc_evmap_load) were granted before: they are
   * charged with force = 1, which the budget must grant. What was granted is given back
   * through release_cb when the mapper is freed. */
  int (*charge_cb)(void *ud, size_t bytes, int force);
  void (*release_cb)(void *ud, size_t bytes);
  void *acct_ud;
} tlc_evmap_opts_t;

typedef struct tlc_evmap_counters {
  uint64_t items;              /* events given to tlc_evmap_map */
  uint64_t events;             /* events produced, synthesised ones included */
  uint64_t synthesized;        /* S and R made up for nesting */
  uint64_t metadata;           /* `*` items other than CPUFREQ/CPUUSED (no event) */
  uint64_t parse_errors;       /* unknown first character, empty name, bad CPU detail */
  uint64_t dropped_area_limit; /* items whose new area would pass max_names/max_name_bytes or
                                  was refused by the memory budget (charge_cb) */
  uint64_t untracked_thread;   /* +/- items of threads beyond max_threads (no S/R made) */
  uint64_t depth_limit;        /* + items beyond max_depth (E emitted, not tracked) */
  uint64_t gaps;               /* times the stacks were forgotten */
} tlc_evmap_counters_t;

/* Creates a mapper with `opts` (NULL: defaults). Returns 0, TLC_EINVAL (max_names > 2^28) or
 * TLC_ENOMEM; *m is owned by the caller (tlc_evmap_free). */
int tlc_evmap_new(tlc_evmap_t **m, const tlc_evmap_opts_t *opts);

/* Frees everything; NULL is fine. Names returned earlier become invalid. */
void tlc_evmap_free(tlc_evmap_t *m);

/* Maps one decoded evlog event (in->evlog must be set) to 0, 1 or 2 engine events written to
 * out[0..n) in order. Returns n, TLC_EINVAL (no evlog extension) or TLC_ENOMEM (a new name,
 * thread or stack level could not be stored; no stack changed, so the same item can be mapped
 * again and gives the output it would have given). Items that map to nothing are counted. */
int tlc_evmap_map(tlc_evmap_t *m, const tlc_event_t *in, tlc_event_t out[2]);

/* A gap in the stream (reconnect, lost bytes): forgets every thread's open activations. */
void tlc_evmap_gap(tlc_evmap_t *m);

/* The counters (owned by m, updated by each call). */
const tlc_evmap_counters_t *tlc_evmap_counters(const tlc_evmap_t *m);

/* The area name of a handle ("CPUFREQ 0" for an AUX area), or NULL if it was never given.
 * Valid until the next tlc_evmap_map (which may move the name storage) or tlc_evmap_free. */
const char *tlc_evmap_name(const tlc_evmap_t *m, uint32_t handle);

/* Areas known, and the handle of the i-th in order of first appearance (i < count). */
size_t tlc_evmap_area_count(const tlc_evmap_t *m);
uint32_t tlc_evmap_area_handle(const tlc_evmap_t *m, size_t i);

/* Adds every area to `out` in order of first appearance (handle and name; a state area as one
 * entry with value 1, its only state; no parents) with tlc_mapping_add. The caller calls
 * tlc_mapping_finish afterwards. Returns 0 or tlc_mapping_add's error. */
int tlc_evmap_export(const tlc_evmap_t *m, tlc_mapping_t *out);

/* Checkpoints: appends m's whole state (names in order of appearance with their handles,
 * every thread's stack, counters) to w; returns 0 or w's error. tlc_evmap_load reads it back
 * into a fresh m (made with the caps the saved one had, or larger), checking every length,
 * handle and stack entry; 0, TLC_EINVAL (m not fresh), TLC_EFRAME (damaged, or past m's caps)
 * or TLC_ENOMEM. After an error m holds part of the state: free it. */
int tlc_evmap_save(const tlc_evmap_t *m, tlc_ckw_t *w);
int tlc_evmap_load(tlc_evmap_t *m, tlc_ckr_t *r);

#endif
