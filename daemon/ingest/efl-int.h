/* efl-int.h - what efl.c (the efl_debugd connection: connect, the conversation, the probe,
 * start and stop) and efl_app.c (the applications it reports: their targets, evlog on and off,
 * the replies; and the packets written to efl_debugd) share. efl_app.c never calls efl.c.
 * Loop thread only. */
#ifndef TLC_EFL_INT_H
#define TLC_EFL_INT_H

#include "base/list.h"
#include "ingest/sources.h"

#include "formats/efldbg.h"

#include <stddef.h>
#include <stdint.h>

#define MAX_APPS           256
#define CTL_MAX            (64u * 1024u)
#define WQ_MAX             (1u << 20)
#define CONNECT_TIMEOUT_MS 5000
#define CLOSE_TIMEOUT_MS   1000
#define GRACE_MS           1000 /* + 2 poll intervals: the application registers its handlers */
#define VERIFY_TIMEOUT_MS  5000 /* for efl_debugd to announce our probe */
#define PROBE_PREFIX       "tlcapd-probe-"

enum {
  OP_OBSERVE,
  OP_ADDED,
  OP_DELETED,
  OP_CPU_ON,
  OP_CPU_OFF,
  OP_EV_GET,
  OP_EV_ON,
  OP_EV_OFF,
  OP_N
};

enum app_state { APP_WAITING, APP_CAPTURING, APP_NO_CPUFREQ, APP_EVLOG_OFF };
enum { ON_NONE, ON_CPUFREQ, ON_EVLOG };
/* The debugger port's standing: VERIFY_NONE (no efl_debugd socket to check it against: taken
 * as it is), VERIFY_PENDING (our probe went in through the socket; applications wait),
 * VERIFY_OK (the port announced the probe: it is the efl_debugd of that socket). */
enum { VERIFY_NONE, VERIFY_PENDING, VERIFY_OK };

typedef struct efl_app {
  LIST_ENTRY(efl_app) link; /* e->apps */
  int32_t cid, pid;
  char name[TLC_EFLDBG_NAME_MAX + 1]; /* as efl_debugd gave it (may be cut) */
  tlc_target_t *target;
  int state;            /* enum app_state */
  int nocpufreq;        /* reported: no CPU/Freq/on handler (evlog via EvLog/on) */
  int evlog_seen;       /* a reply with the overflow word: its evlog ran */
  int on_kind;          /* the last "on" sent */
  int on_effect;        /* a non-empty reply came after it: exactly one "on" took effect */
  uint64_t on_ms;       /* when the first "on" of this kind was sent */
  int pending;          /* an EvLog/get is outstanding */
  int pending_after_on; /* ... and was sent after the last "on" */
  uint64_t pending_since;
  int skip; /* the streamed reply is being skipped (too large, decode error) */
  uint64_t replies, empty, blocks, bytes, timeouts, on_retries;
} efl_app_t;

typedef struct tlc_efl {
  tlc_source_t src; /* first: d, cfg */
  char addr[TLC_PEER_MAX];
  struct sockaddr_storage sa;
  uv_tcp_t *tcp; /* NULL while not connected; freed in its close callback */
  uv_connect_t creq;
  int connecting, registered;
  uv_timer_t *timer; /* connect timeout, reconnect backoff, close timeout */
  uv_timer_t *poll;
  int handles; /* open handles: the struct is freed when stopping and none is left */
  int stopping;
  tlc_efldbg_rd_t rd;
  uint64_t cookie;
  int32_t op[OP_N];
  LIST_HEAD(, efl_app) apps; /* matched applications, newest first */
  size_t napps;
  efl_app_t *cur; /* the application the streamed packet comes from (NULL: ignore it) */
  uint64_t backoff;
  int last_err;
  uint64_t connects, disconnects, apps_seen, apps_matched, apps_refused, no_cpufreq;
  uint64_t apps_refused_cap, targets_reused; /* efl_max_targets */
  uint64_t apps_refused_full;                /* the target table full (no eviction) */
  char sock[TLC_CFG_PATH];                   /* efl_debugd's Unix socket ("": no check) */
  uv_pipe_t *probe;                          /* our probe "application" on it, while verifying */
  uv_connect_t preq;
  int verify;          /* VERIFY_* */
  int sock_missing;    /* the last check found no socket (logged once until it changes) */
  char probe_name[40]; /* PROBE_PREFIX + 16 hex digits, new for every connection */
  uint64_t verified, untrusted, probe_busy;
  uint64_t protocol_errors, polls_skipped, ignored;
} tlc_efl_t;

/* ---- efl_app.c ---- */

/* Queues one packet to efl_debugd (header built here). Returns 0 or a negative error (nothing
 * queued). */
int tlc__efl_send_pkt(tlc_efl_t *e, int32_t cid, int32_t op, const void *payload, size_t plen);
/* Queues `len` bytes of a built packet on `s` (copied), or on the connection to efl_debugd. */
int tlc__efl_send_raw_to(uv_stream_t *s, const uint8_t *pkt, size_t len);
int tlc__efl_send_raw(tlc_efl_t *e, const uint8_t *pkt, size_t len);

/* "Added": an application efl_debugd reports (not a probe); matched ones get their target. */
void tlc__efl_app_added(tlc_efl_t *e, const tlc_efldbg_client_t *c, uint64_t now);
/* "Deleted": the application with `cid` exited; its target detaches. */
void tlc__efl_app_deleted(tlc_efl_t *e, int32_t cid);
/* Gives a matched application its target and turns its evlog on. 0, or -1 when refused (the
 * caller drops it with tlc__efl_app_drop). */
int tlc__efl_app_capture(tlc_efl_t *e, efl_app_t *a, uint64_t now);
/* Unlinks and frees an application that never got its target. */
void tlc__efl_app_drop(tlc_efl_t *e, efl_app_t *a);
/* Frees an unlinked application; its target detaches with `reason`. */
void tlc__efl_app_free(tlc_efl_t *e, efl_app_t *a, const char *reason);
/* The "off" that matches the "on" that took effect (queued, best effort). */
void tlc__efl_send_off(tlc_efl_t *e, efl_app_t *a);
/* An EvLog/get reply begins (fed to its application's target) and goes on. */
void tlc__efl_reply_begin(tlc_efl_t *e, const tlc_efldbg_msg_t *m, uint64_t now);
void tlc__efl_reply_data(tlc_efl_t *e, const tlc_efldbg_msg_t *m);
/* The cap on the source's targets, and how many it has in the target table. */
size_t tlc__efl_max_targets(const tlc_efl_t *e);
size_t tlc__efl_source_targets(const tlc_efl_t *e);

#endif
