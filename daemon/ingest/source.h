/* source.h - the interface every ingest source kind implements, and the one sync over them.
 *
 * A source kind (TCP listen: tcp.c, TCP dial: dial.c, serial: serial.c, EFL through efl_debugd:
 * efl.c) is one const tlc_source_ops_t, as nng registers a transport (`nni_sp_tran`): the
 * registry (sources.c) knows the kinds only through their tables, and the kinds never call each
 * other. Each running source is an object of its kind that begins with a tlc_source_t (the
 * kind's ops, the daemon, its settings as started); the registry keeps one list of them per kind.
 *
 * tlc_sources_sync() reconciles the running sources with d->cfg by kind and name (start at
 * launch, SIGHUP add/remove/change, shutdown with d->stopping set):
 *   - a running source whose section is still there and that takes the new settings in place
 *     (same_config): kept untouched (its connections and targets carry on; per-target settings
 *     apply to targets created from then on); apply() copies what it takes;
 *   - changed in a way it cannot take (a dial or serial source's address, format or line
 *     settings; an efl source's pattern, address, poll interval or socket): stopped and started
 *     again - targets and their statistics are kept, since they live in the registry;
 *   - removed: stopped. A removed listener's accepted connections stay open until their peers
 *     close them (they belong to targets, not to the listener);
 *   - new: started, kind by kind in registration order, each kind's in configuration order (so
 *     targets created at start come in the same order at every launch);
 *   - shutdown (d->stopping): every kind's drain (what the kernel already holds is read and fed),
 *     then every source stopped.
 *
 * Everything runs on the loop thread.
 */
#ifndef TLC_SOURCE_H
#define TLC_SOURCE_H

#include "base/list.h"
#include "config/config.h"
#include "ingest/target.h"

#include <stddef.h>
#include <stdint.h>

struct tlc_ingest;
struct tlc_json_w;

#define TLC_SOURCE_KINDS 8 /* kinds the registry holds */

typedef struct tlc_source tlc_source_t;
typedef struct tlc_source_ops tlc_source_ops_t;

/* Why a source is stopped (each kind words its own log line). */
typedef enum tlc_source_why {
  TLC_SOURCE_REMOVED,  /* its section is gone from the configuration */
  TLC_SOURCE_CHANGED,  /* its settings changed in a way it cannot take: started again */
  TLC_SOURCE_SHUTDOWN, /* the daemon stops */
} tlc_source_why_t;

/* One running source: the first member of each kind's object. */
struct tlc_source {
  LIST_ENTRY(tlc_source) link; /* the registry's list of this kind */
  const tlc_source_ops_t *ops;
  struct tlc_ingest *d;
  tlc_cfg_source_t cfg; /* the settings as started (or as last applied) */
};

LIST_HEAD(tlc_source_list, tlc_source); /* zeroed memory is an empty list */

/* A source kind. Every member runs on the loop thread; optional ones may be NULL. */
struct tlc_source_ops {
  int kind;         /* enum tlc_src_kind: the sections of the configuration it serves */
  const char *name; /* "listen", "dial", "serial", "efl" */
  /* A start error of this kind fails the sync (a listener that cannot bind fails start-up);
   * otherwise the kind logs it and the source is tried again at the next sync. */
  int start_errors_fatal;
  /* Starts a source for `cfg` (copied). Returns 0 and *out (the registry links it), or a
   * negative error after logging it naming the source. */
  int (*start)(struct tlc_ingest *d, const tlc_cfg_source_t *cfg, tlc_source_t **out);
  /* Stops `s`: it is already unlinked; its handles close and its memory is freed in their close
   * callbacks. Its targets are detached with a reason that says `why`. */
  void (*stop)(tlc_source_t *s, tlc_source_why_t why);
  /* 1 if running `s` takes `cfg` in place (cfg NULL: its section is gone - only a source that
   * outlives its section, an inherited listener, says 1), else 0: stopped, started again. */
  int (*same_config)(const tlc_source_t *s, const tlc_cfg_source_t *cfg);
  /* Optional: takes `cfg` (may be NULL) in place after same_config said 1; by default the
   * registry copies it into s->cfg. */
  void (*apply)(tlc_source_t *s, const tlc_cfg_source_t *cfg);
  /* Optional, shutdown: reads what the kernel holds for the kind's connections or ttys (non-
   * blocking, bounded) and feeds it, before the sources stop. */
  void (*drain)(struct tlc_ingest *d);
  /* Optional, SIGHUP before `nc` replaces d->cfg: 0 if the kind can take `nc`, else TLC_EINVAL
   * with why[] saying what needs a restart (appended after "; " when why[] is not empty). */
  int (*check_reload)(const struct tlc_ingest *d, const tlc_config_t *nc, char *why, size_t whylen);
  /* Optional: appends " key=value..." to the NUL-terminated STATUS text in buf. */
  void (*status)(const struct tlc_ingest *d, char *buf, size_t len);
  /* Optional: writes the kind's members of the stats dump's daemon-level object. */
  void (*dump)(const struct tlc_ingest *d, struct tlc_json_w *w);
};

/* A registered kind and its running sources, newest first (in tlc_ingest_t; zeroed: none). */
typedef struct tlc_source_kind {
  const tlc_source_ops_t *ops;
  struct tlc_source_list running;
} tlc_source_kind_t;

/* The built-in kinds (each defined in its own file), in start and stop order. */
extern const tlc_source_ops_t tlc_listen_source_ops; /* tcp.c */
extern const tlc_source_ops_t tlc_dial_source_ops;   /* dial.c */
extern const tlc_source_ops_t tlc_serial_source_ops; /* serial.c */
extern const tlc_source_ops_t tlc_efl_source_ops;    /* efl.c */

/* Adds a kind after the built-ins (which the registry adds itself at the first register, sync
 * or link). Returns 0, TLC_EINVAL if a kind of that number is there, TLC_ELIMIT past
 * TLC_SOURCE_KINDS. */
int tlc_sources_register(struct tlc_ingest *d, const tlc_source_ops_t *ops);

/* The list of running sources of `ops`'s kind, newest first (NULL if it is not registered).
 * `d` is const for the readers (status, dump, counts); only the kind changes its sources. */
struct tlc_source_list *tlc_sources_running(const struct tlc_ingest *d,
                                            const tlc_source_ops_t *ops);

/* Links a source that a kind started outside the sync (an inherited listener) into its list. */
void tlc_sources_link(tlc_source_t *s);

/* Reconciles the running sources with d->cfg (see above). Returns 0, or the first start error
 * of a kind whose start errors are fatal: at the first sync (start-up, which the caller then
 * fails) the kinds after that one are not started; at later syncs they are still applied. */
int tlc_sources_sync(struct tlc_ingest *d);

/* SIGHUP, before `nc` replaces d->cfg: every kind's check_reload. 0, or TLC_EINVAL with why[]
 * naming what would need a restart; the caller then refuses the whole reload. */
int tlc_sources_check_reload(const struct tlc_ingest *d, const tlc_config_t *nc, char *why,
                             size_t whylen);

/* The configured sources that run no source (a start that failed: a listener that could not
 * bind at a reload, a serial device or efl socket that could not be opened; tried again at the
 * next sync). Returns their count; why[] lists them ("serial NAME not running; ..."). */
size_t tlc_sources_down(const struct tlc_ingest *d, char *why, size_t len);

/* Every kind's status (appended to buf) and dump members. */
void tlc_sources_status(const struct tlc_ingest *d, char *buf, size_t len);
void tlc_sources_dump(const struct tlc_ingest *d, struct tlc_json_w *w);

/* ---- helpers the kinds share (sources.c) ---- */

/* Next reconnect delay: doubles `*cur` (starting at backoff_min, capped at backoff_max) and
 * returns it with +-25% jitter. */
uint64_t tlc__backoff_next(const struct tlc_ingest *d, uint64_t *cur);

/* Target creation settings for `name` coming from source (kind, src_name). */
void tlc__target_conf(const struct tlc_ingest *d, int kind, const char *src_name, const char *name,
                      tlc_format_t format, tlc_target_conf_t *out);

/* Fills a target's creation settings from the config, its source and the settings found by
 * tlc_config_tset. `mapping_path` in the result points into `c`. */
void tlc_target_conf_from_config(const tlc_config_t *c, const tlc_cfg_source_t *src,
                                 const char *name, tlc_format_t format, int resync,
                                 tlc_target_conf_t *out);

#endif
