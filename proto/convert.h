/* convert.h - between stats.h's tlc_table_t and the protocol's messages, and frame packing.
 *
 * The daemon turns a snapshot table into a Tlcap__Snapshot (tlc_pb_snapshot_build) and packs
 * the envelope into one framed buffer (tlc_pb_frame_size/tlc_pb_frame_pack); the client turns
 * a received Snapshot back into a table (tlc_pb_snapshot_apply), so that `tlcap stats` prints
 * through the same exporters as `tlcapd replay`.
 *
 * Every allocation goes through tlc_malloc: protobuf-c's through tlc_pb_allocator, built
 * messages' through a tlc_pb_arena_t freed in one call. Pure: no I/O, no libuv.
 */
#ifndef TLC_CONVERT_H
#define TLC_CONVERT_H

#include "tlcap.pb-c.h"

#include "mapping.h"
#include "stats.h"

#include <stddef.h>
#include <stdint.h>

/* The protocol version this source tree speaks, and the oldest it still accepts. */
#define TLC_PROTO_VERSION     1u
#define TLC_PROTO_MIN_VERSION 1u

/* protobuf-c's allocator routed to tlc_malloc/tlc_free: pass it to every *__unpack and
 * *__free_unpacked call. */
extern ProtobufCAllocator tlc_pb_allocator;

/* A bump allocator for building messages: chunks from tlc_malloc, freed together. */
typedef struct tlc_pb_arena {
  struct tlc_pb_chunk *head;
  size_t used; /* bytes allocated so far (all chunks) */
  size_t max;  /* cap on `used` (0: 1 GiB) */
} tlc_pb_arena_t;

void tlc_pb_arena_init(tlc_pb_arena_t *a, size_t max);
/* Frees every chunk. Safe on zeroed memory. */
void tlc_pb_arena_fini(tlc_pb_arena_t *a);
/* Zeroed, 16-byte aligned memory valid until fini, or NULL (no memory or cap reached). */
void *tlc_pb_arena_alloc(tlc_pb_arena_t *a, size_t size);
/* An arena copy of s (NUL-terminated), or NULL. */
char *tlc_pb_arena_strdup(tlc_pb_arena_t *a, const char *s);

/* Which rows and parts of a table a snapshot carries. */
typedef struct tlc_pb_snap_sel {
  int windows;   /* copy the rolling windows */
  int quantiles; /* copy quantiles */
  /* Optional row filter: keep the row when it returns non-zero (NULL: keep all). */
  int (*keep)(void *ud, const tlc_stat_t *r);
  void *keep_ud;
} tlc_pb_snap_sel_t;

/* Fills `s` (initialised here) from table `t`; every pointer it holds lives in `a`. `target`
 * is copied. `m` (may be NULL) is added as Snapshot.mapping. Returns 0 or TLC_ENOMEM. */
int tlc_pb_snapshot_build(tlc_pb_arena_t *a, Tlcap__Snapshot *s, const tlc_table_t *t,
                          const char *target, const tlc_pb_snap_sel_t *sel, const tlc_mapping_t *m);

/* Fills `c` from the table counters (c is initialised here). */
void tlc_pb_counters_set(Tlcap__Counters *c, const tlc_counters_t *k);
/* The reverse. */
void tlc_pb_counters_get(tlc_counters_t *k, const Tlcap__Counters *c);

/* Applies a received snapshot to `t`: a full one replaces the table's content; a delta
 * replaces or adds the rows it carries (matched by handle, context and state) and takes its
 * header fields (times, counters, contexts, seq). Leaves `t` sorted. Validates what it copies
 * (context indices, array lengths, at most TLC_MAX_WINDOWS windows): returns 0, TLC_EFRAME for a
 * snapshot that does not make sense, or TLC_ENOMEM / TLC_ELIMIT (t->maxrows). */
int tlc_pb_snapshot_apply(tlc_table_t *t, const Tlcap__Snapshot *s);

/* Fills mapping `m` (initialised by the caller) from a received Mapping and finishes it.
 * Defined in convert_map.c (links formats' mapping.c). Returns 0 or a negative error. */
int tlc_pb_mapping_get(tlc_mapping_t *m, const Tlcap__Mapping *pm);

/* Framed size of an envelope: sets *payload to its packed size and returns header + payload. */
size_t tlc_pb_frame_size(const ProtobufCMessage *m, size_t *payload);
/* Writes header + payload into out (tlc_pb_frame_size bytes). Returns the bytes written. */
size_t tlc_pb_frame_pack(const ProtobufCMessage *m, size_t payload, uint8_t *out);

/* Names for the enums, for messages and JSON: "bin11", "connected", "ERR_TOO_LARGE", ... */
const char *tlc_pb_format_name(int f);
const char *tlc_pb_event_kind_name(int k);
const char *tlc_pb_error_name(int code);

#endif
