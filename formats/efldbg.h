/* efldbg.h - the EFL debug protocol (efl_debugd, EFL 1.26.3): framing and payloads, no I/O.
 *
 * A connection to efl_debugd carries packets, in both directions:
 *
 *     +-----------+-----------+-----------+----------------------------+
 *     | u32 size  | i32 cid   | i32 opcode| payload (size - 12 bytes)  |
 *     +-----------+-----------+-----------+----------------------------+
 *       all little-endian (eina's SWAP_32 is a no-op on little-endian hosts and a swap on
 *       big-endian ones); size counts the header; efl_debugd refuses size < 12 and
 *       size > 10,000,000 (EINA_DEBUG_MAX_PACKET_SIZE) and closes that client.
 *
 * cid is the destination when sending (0 = efl_debugd itself) and the source when receiving.
 * Opcodes 0 (register) and 1 (hello) are fixed; every other opcode is a number efl_debugd gives
 * to a name on request (the same number for the same name, for every client). docs/efl.md has
 * the whole conversation. This module only frames and parses; the source (daemon/ingest/efl.c)
 * decides what to send.
 *
 * Reader: a packet whose payload fits in max_ctl bytes and is not of the streamed opcode is
 * returned whole (TLC_EFLDBG_CTL, payload held in the reader's buffer); any other packet is
 * returned in pieces without being held (BEGIN with its first `prefix` payload bytes, DATA
 * slices pointing into the caller's input, END), so a 4 MiB evlog reply costs no buffer. Only
 * a size outside [12, max_packet] is an error (the stream cannot be re-framed after it).
 *
 * Pure: no I/O, no globals; every length from the peer is checked before it is used.
 */
#ifndef TLC_EFLDBG_H
#define TLC_EFLDBG_H

#include <stddef.h>
#include <stdint.h>

#define TLC_EFLDBG_HDR         12
#define TLC_EFLDBG_MAX_PACKET  10000000u /* EINA_DEBUG_MAX_PACKET_SIZE */
#define TLC_EFLDBG_OP_REGISTER 0
#define TLC_EFLDBG_OP_HELLO    1
#define TLC_EFLDBG_MAX_OPCODE  1000 /* efl_debugd's MAX_OPCODES: ids are 0..999 */
#define TLC_EFLDBG_NAME_MAX    255  /* longest application name kept (longer ones are cut) */
#define TLC_EFLDBG_PREFIX_MAX  16

/* Reader results (kind of tlc_efldbg_msg_t). */
enum tlc_efldbg_kind {
  TLC_EFLDBG_NEED = 0,  /* all input used, no message completed */
  TLC_EFLDBG_CTL = 1,   /* a whole packet: data/len = its payload (valid until the next push) */
  TLC_EFLDBG_BEGIN = 2, /* a streamed packet starts: data/len = its first min(prefix, payload)
                           bytes; hdr.size - 12 is the payload's length */
  TLC_EFLDBG_DATA = 3,  /* the next slice of the streamed payload (points into the input) */
  TLC_EFLDBG_END = 4    /* the streamed packet is complete */
};

typedef struct tlc_efldbg_hdr {
  uint32_t size; /* whole packet, header included */
  int32_t cid;
  int32_t opcode;
} tlc_efldbg_hdr_t;

typedef struct tlc_efldbg_msg {
  int kind; /* enum tlc_efldbg_kind */
  tlc_efldbg_hdr_t hdr;
  const uint8_t *data;
  size_t len;
} tlc_efldbg_msg_t;

typedef struct tlc_efldbg_rd {
  uint32_t max_packet; /* largest size accepted (<= TLC_EFLDBG_MAX_PACKET) */
  uint32_t max_ctl;    /* largest payload returned whole */
  uint32_t prefix;     /* payload bytes a BEGIN carries (<= TLC_EFLDBG_PREFIX_MAX) */
  int32_t stream_op;   /* opcode always streamed (-1: none) */
  uint8_t *ctl;        /* max_ctl bytes, allocated by init */
  uint8_t hbuf[TLC_EFLDBG_HDR + TLC_EFLDBG_PREFIX_MAX];
  size_t hlen;          /* bytes in hbuf (header, then a streamed packet's prefix) */
  size_t clen;          /* payload bytes in ctl */
  tlc_efldbg_hdr_t hdr; /* the packet being read */
  uint32_t left;        /* streamed: payload bytes not yet returned */
  int phase;            /* 0 header, 1 whole payload, 2 prefix, 3 streaming, 4 end due, 5 error */
  uint64_t at;          /* stream offset of the next input byte */
  uint64_t pkt_offset;  /* stream offset of the current packet */
  uint64_t packets;     /* packets completed */
  uint64_t err_offset;  /* where the error is */
  char err_reason[128]; /* why */
} tlc_efldbg_rd_t;

/* Initialises `rd` (max_packet 0: TLC_EFLDBG_MAX_PACKET). Allocates max_ctl bytes with
 * tlc_malloc. Returns 0, TLC_EINVAL (max_ctl > max_packet, prefix > TLC_EFLDBG_PREFIX_MAX) or
 * TLC_ENOMEM. Any thread, one owner. */
int tlc_efldbg_rd_init(tlc_efldbg_rd_t *rd, uint32_t max_packet, uint32_t max_ctl, uint32_t prefix);

/* Frees the buffer. Safe on zeroed memory. */
void tlc_efldbg_rd_fini(tlc_efldbg_rd_t *rd);

/* Back to the start of a stream (a new connection); keeps the settings and the buffer. */
void tlc_efldbg_rd_reset(tlc_efldbg_rd_t *rd);

/* Reads from in[0..len): *used = bytes taken, *m = the message (kind NEED when the input ran
 * out first). Returns m->kind (>= 0), or TLC_EFRAME (sticky) with err_offset/err_reason. Call
 * again with the rest of the input until it returns NEED with *used == len. */
int tlc_efldbg_rd_push(tlc_efldbg_rd_t *rd, const uint8_t *in, size_t len, size_t *used,
                       tlc_efldbg_msg_t *m);

/* ---- payloads from efl_debugd ---- */

/* One application, as "Daemon/Client/added" lists it. */
typedef struct tlc_efldbg_client {
  int32_t cid;
  int32_t pid;
  char name[TLC_EFLDBG_NAME_MAX + 1]; /* NUL-terminated; cut at TLC_EFLDBG_NAME_MAX bytes */
  int name_cut;                       /* the name was longer */
} tlc_efldbg_client_t;

/* The next record of an "added" payload (i32 cid, i32 pid, NUL-terminated name; efl_debugd
 * sends one per packet, efl_debug reads several). *off starts at 0. Returns 1 (record in *c,
 * *off advanced), 0 at the end, or TLC_EFRAME (a record cut short, a name without its NUL). */
int tlc_efldbg_added_next(const uint8_t *p, size_t len, size_t *off, tlc_efldbg_client_t *c);

/* The next cid of a "deleted" payload (i32 cids). Same returns as tlc_efldbg_added_next. */
int tlc_efldbg_deleted_next(const uint8_t *p, size_t len, size_t *off, int32_t *cid);

/* The answer to a register request: u64 cookie (echoed), then one i32 id per name asked for,
 * in order. Fills ids[0..*n). Returns 0, or TLC_EFRAME (shorter than the cookie, not a whole
 * number of ids, more than max ids, an id outside 0..TLC_EFLDBG_MAX_OPCODE-1). */
int tlc_efldbg_register_reply(const uint8_t *p, size_t len, uint64_t *cookie, int32_t *ids,
                              size_t max, size_t *n);

/* ---- packets to efl_debugd ---- */

/* Writes a 12-byte header. */
void tlc_efldbg_put_hdr(uint8_t out[TLC_EFLDBG_HDR], uint32_t size, int32_t cid, int32_t opcode);

/* Builds a whole hello packet (opcode 1, to efl_debugd): i32 version, i32 pid, name + NUL.
 * Returns its length, or TLC_ERANGE when it does not fit in cap. */
int tlc_efldbg_build_hello(uint8_t *out, size_t cap, int32_t version, int32_t pid,
                           const char *name);

/* Builds a whole register packet (opcode 0, to efl_debugd): u64 cookie, then each name with
 * its NUL. Returns its length, or TLC_ERANGE. */
int tlc_efldbg_build_register(uint8_t *out, size_t cap, uint64_t cookie, const char *const *names,
                              size_t n);

/* The efl_debug-style block header for an "EvLog/get" reply whose payload is the u32 overflow
 * count `ovf` (as received) followed by `items_len` bytes of items: magic 0x0ffee211, size
 * items_len, overflow - three little-endian u32 (formats/evlog.h reads either order). */
void tlc_efldbg_evlog_header(uint8_t out[12], uint32_t items_len, const uint8_t ovf[4]);

#endif
