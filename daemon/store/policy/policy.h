/* policy.h - the storage policy: when segments open, rotate, seal and record gaps, decided from
 * the targets' events, and the store's life in the daemon (options from the configuration,
 * crash recovery at start, reload, the watchdog's health check).
 *
 * The policy is the storage's observer on the target registry (tlc_targets_observe): a target
 * gets a store target when it is created (its handle in t->store, the seam target.h
 * documents), its records and skipped bytes are written, its source is held while its share of
 * the store's queue is full (tlc_store_target_set_flow -> tlc_target_hold); a reconnect rotates
 * (SPEC 3); a disconnected target keeps its open segment (at most TLC_STPOL_HELD_SEGMENTS of
 * them), and seals it after idle_seal (SPEC 10); the decoder's cumulative counters become
 * manifest gaps (their increase); SIGHUP rotates every segment.
 *
 * It sits above both store/ and ingest/ (a library of its own, linking both): the store knows
 * no target, the targets know no store.
 *
 * Threads: everything here runs on the loop thread, except inside tlc_stpol_start, where crash
 * recovery runs on a helper thread (joined before it returns) while the loop thread extends
 * systemd's start timeout every second; the store's log lines of that time are serialised with
 * the loop's by a mutex.
 */
#ifndef TLC_STPOL_H
#define TLC_STPOL_H

#include "config/config.h"
#include "ingest/target.h"
#include "store/store.h"

#include <uv.h>

typedef struct tlc_stpol tlc_stpol_t;

/* Disconnected targets that keep their open segment (and its fds) until they reconnect; past
 * this many, a target's segment is sealed when it disconnects (its reconnect would seal it
 * anyway: the same segments, sealed earlier). The daemon keeps their fds in its reserve. */
#define TLC_STPOL_HELD_SEGMENTS 8

/* Starts storage in cfg->state_dir with the [daemon] storage keys, runs crash recovery (blocking
 * this call: before READY=1), starts the idle seal timer and registers the watchdog health
 * check. The targets are observed from tlc_stpol_observe on. `event_cb` (may be NULL) gets the
 * store's events (loop thread; during recovery, quarantines from the recovery thread). Returns 0 or
 * a negative error (logged; start-up must fail); a failed recovery is logged and storage runs on.
 */
int tlc_stpol_start(uv_loop_t *loop, tlc_targets_t *targets, const tlc_config_t *cfg,
                    void (*event_cb)(void *ud, const tlc_store_event_t *ev), void *event_ud,
                    tlc_stpol_t **out);

/* Registers the policy's observer on the targets: call it after the observers that must see a
 * target before storage does (continuity restores a target before storage opens it). 0 or
 * TLC_ELIMIT. */
int tlc_stpol_observe(tlc_stpol_t *p);

/* The store (valid until tlc_stpol_close). */
tlc_store_t *tlc_stpol_store(const tlc_stpol_t *p);

/* A target's store target, or NULL (storage not opened for it). */
tlc_store_target_t *tlc_stpol_target(const tlc_target_t *t);

/* SIGHUP: rotation, retention and sync limits and the main export's format apply now; the
 * settings that need a restart keep their running values (logged); every open segment is
 * sealed (SPEC 3). */
void tlc_stpol_reload(tlc_stpol_t *p, const tlc_config_t *c);

/* Stops observing, closes every target's store target and the store; `cb` once every handle is
 * closed. */
void tlc_stpol_close(tlc_stpol_t *p, void (*cb)(void *ud), void *ud);

#endif
