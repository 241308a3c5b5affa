/* msg.h - pubsub's leaf: the limits every file shares, encoded messages shared by
 * reference count, errors encoded, and the module's log line (msg.c). Private to pubsub (and
 * its tests and fuzzers). Messages are built and their reference counts changed on the loop
 * thread only; the serving thread reads their bytes while a write job holds a reference;
 * tlc__ps_msg_pack may run on any thread (range answers are encoded on the pool).
 */
#ifndef TLC_PUBSUB_MSG_H
#define TLC_PUBSUB_MSG_H

#include "base/clock.h"
#include "base/list.h"
#include "pubsub/pubsub.h"

#include "proto/convert.h"
#include "proto/frame.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlc__ps_sub tlc__ps_sub_t;

#define WRITE_MAX_BUFS  16
#define WRITE_MAX_BYTES (1u << 20)
#define MAX_PATTERNS    64 /* per list in a Subscribe */
#define MAX_PATTERN_LEN 256
#define MAX_HANDLES     4096
#define MAX_COLUMNS_REQ                                                                            \
  1024 /* column ids in a Subscribe (duplicates and unknown ones included)                         \
        */
#define MAX_LISTENERS 8
#define READ_BUF      (64u * 1024u)
#define MAX_REJECTING 64             /* connections being told "too many subscribers" at once */
#define SNAP_CACHE    4              /* engine snapshots shared within one tick pass */
#define TICK_EARLY_NS 1000000u       /* a feed due within 1 ms runs in the current pass */
#define JOIN_FRESH_NS 10000000u      /* a joiner gets the mirror as is if it is this fresh */
#define TLS_OUT_SLACK (256u * 1024u) /* TLS: ciphertext beyond one write's plaintext (records) */
#define TLS_BUF_KEEP  (256u * 1024u) /* TLS: a larger ciphertext buffer is freed once written */
#define MIRROR_PART_ROWS                                                                           \
  8192 /* a target with more areas is snapshotted for a feed's tick in parts of this many rows */

enum msg_kind { PSM_CONTROL = 0, PSM_SNAP = 1, PSM_BATCH = 2 };

/* An encoded, framed message shared by reference count. */
typedef struct msg {
  uint32_t refs;
  uint8_t kind;
  uint64_t seq;   /* PSM_SNAP: engine seq */
  uint64_t base;  /* PSM_SNAP: base seq (0 = full) */
  size_t nevents; /* PSM_BATCH */
  size_t len;
  uint8_t data[];
} msg_t;

typedef struct ctl_node {
  STAILQ_ENTRY(ctl_node) link; /* in its subscriber's ctl queue */
  msg_t *m;
} ctl_node_t;

void tlc__ps_logf_(tlc_pubsub_t *ps, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
uint64_t tlc__ps_now_ms(tlc_pubsub_t *ps);
void tlc__ps_msg_unref(msg_t *m);
msg_t *tlc__ps_msg_ref(msg_t *m);
/* Encodes a ServerMessage into a new message (refs 1), or NULL (no memory, or above the cap:
 * *too_big is then set when given). */
msg_t *tlc__ps_msg_encode(tlc_pubsub_t *ps, const Tlcap__ServerMessage *sm, int kind, int *too_big);
/* The same with the cap given: any thread (range.c encodes range answers on the pool). */
msg_t *tlc__ps_msg_pack(size_t max_message, const Tlcap__ServerMessage *sm, int kind, int *too_big);
msg_t *tlc__ps_error_encode(tlc_pubsub_t *ps, uint32_t req, int code, const char *text, int fatal,
                            int detail);

#endif
