/* ckfile.h - a target's checkpoint file: layout, encoder and bounds-checked reader (pure: no
 * I/O, no libuv; the daemon's continuity.c does the files, tests/fuzz/fuzz_checkpoint.c the
 * fuzzing).
 *
 *   offset size
 *        0    8  magic "TLCCKPT\n"
 *        8    4  version (TLC_CKPT_VERSION)
 *       12    4  byte-order mark 0x01020304 in the writer's order (another order: refused)
 *       16    4  position valid (0/1): the storage position the statistics cover
 *       20    4  reserved (0)
 *       24    8  position: segment sequence
 *       32    8  position: bytes of that segment
 *       40    8  position: disconnect gaps of that segment before it
 *       48    8  reserved (0)
 *       56    8  wall clock of the checkpoint (Unix ns)
 *       64    8  payload length P
 *       72    P  payload: the target section (name, format, settings, counters, gap log,
 *                connected), then the engine (daemon/engine/checkpoint.c), then for evlog
 *                the evlog mapping (formats/evmap.c)
 *     72+P    8  FNV-1a 64 (word-wise, formats/ckbuf.h) of every byte before it
 *
 * All integers in the writer's byte order. A file is valid only as a whole: length, magic,
 * version, byte order and checksum are checked before anything else is read.
 */
#ifndef TLC_CKFILE_H
#define TLC_CKFILE_H

#include "engine/engine.h"
#include "formats/ckbuf.h"
#include "ingest/target.h"

#include <stddef.h>
#include <stdint.h>

/* Version 3: the engine section (ENG3) carries when each row's extremes were taken, with their
 * wall clock and stored location. Version 2 files (ENG2: the times without those two, read as
 * 0) and version 1 files (TLC_CKPT_VERSION_MIN) are still read: a version 1 file's extremes'
 * times are unknown (tlc_at_t.known = 0) until a sample makes a new extreme. */
#define TLC_CKPT_VERSION     3
#define TLC_CKPT_VERSION_MIN 1
#define TLC_CKPT_HEADER      72
#define TLC_CKPT_NAME        "target.checkpoint" /* <state>/<target>/target.checkpoint */
#define TLC_MAP_NAME         "target.mapping" /* <state>/<target>/target.mapping: `tlcap mapping` */

typedef struct tlc_ckpt_pos {
  int valid;
  uint64_t seq, bytes, disconnects;
} tlc_ckpt_pos_t;

/* What a checkpoint's target section says before the state (to create the target). */
typedef struct tlc_ckpt_info {
  char name[TLC_TARGET_NAME_MAX + 1];
  tlc_format_t format;
  int src_kind;
  tlc_target_conf_t conf; /* mapping_path points into mapping_path[] below */
  char mapping_path[1024];
  char rtos_path[1024]; /* conf.rtos_path points here */
  int connected;        /* a connection was attached when it was taken */
  tlc_ckpt_pos_t pos;
  int64_t wall_ns;
} tlc_ckpt_info_t;

/* Starts a checkpoint in w (tlc_ckw_init'ed): the header's room, then the target's payload
 * (name, settings, counters, engine, evlog mapping). The engine's queued histogram samples are
 * counted (no statistic changes). Loop thread (the target's). Returns 0 or w's error. */
int tlc_ckpt_encode(tlc_target_t *t, tlc_ckw_t *w);

/* The same in parts (continuity.c: the loop thread never stalls on a large target): begin
 * writes the header's room, the target section and the engine's head; each step appends up to
 * `units` engine rows (tlc_engine_save_step), and the last one the evlog mapping. The target
 * must not change between begin and the last step (its input is held: target.h
 * tlc_target_freeze). begin returns 0 or w's error; step 0 (more), 1 (done) or w's error.
 * Loop thread (the target's). The bytes are those of tlc_ckpt_encode. */
int tlc_ckpt_encode_begin(tlc_target_t *t, tlc_engine_saver_t *sv, tlc_ckw_t *w);
int tlc_ckpt_encode_step(tlc_target_t *t, tlc_engine_saver_t *sv, tlc_ckw_t *w, size_t units);

/* Completes a checkpoint encoded by tlc_ckpt_encode: writes the header (position, wall clock)
 * and appends the checksum. Any thread (the buffer is the caller's). 0 or w's error. */
int tlc_ckpt_finish(tlc_ckw_t *w, const tlc_ckpt_pos_t *pos, int64_t wall_ns);

/* The header of a checkpoint whose payload is `payload` bytes long (tlc_ckpt_finish's, for a
 * file written in pieces: the caller then appends the checksum of header and payload). */
void tlc_ckpt_header(uint8_t h[TLC_CKPT_HEADER], const tlc_ckpt_pos_t *pos, int64_t wall_ns,
                     uint64_t payload);

/* Checks a whole file buf[0..len): length, magic, version, byte order, checksum; then reads
 * the target section's header into *info. Returns 0; TLC_EVERSION (another version or byte
 * order), TLC_EFRAME (damaged: `why` says where). */
int tlc_ckpt_check(const uint8_t *buf, size_t len, tlc_ckpt_info_t *info, char *why, size_t wl);

/* Restores a checked file into `t`, a target just created (no event yet) with the settings the
 * file names (format, engine options): counters, gap log, engine, evlog mapping. Returns 0;
 * TLC_EINVAL (the target's settings differ: incompatible), TLC_EVERSION, TLC_EFRAME (damaged),
 * TLC_ENOMEM. On error the target is as created (statistics and counters empty). */
int tlc_ckpt_restore(tlc_target_t *t, const uint8_t *buf, size_t len, char *why, size_t wl);

#endif
