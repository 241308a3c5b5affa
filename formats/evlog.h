/* evlog.h - EFL Eina evlog blocks (efl_debug's capture files and live streams).
 *
 * Decoding goes through dec.h (tlc_dec_*); this header holds the evlog decoder state that
 * dec.h embeds, the module entry points dec.c dispatches to, and the encoder.
 *
 * Decoded events (see tlc_event.h): time_ns = llround(tim * 1e9), thread = the item's thread,
 * core TLC_CORE_UNKNOWN, handle 0, type TLC_EV_NONE, offset = stream offset of the item, and
 * `evlog` pointing at an extension held by the decoder (valid until the next call into it).
 * The last item of each block carries TLC_EVF_BLOCK_END; the first event after lost bytes or
 * after a block whose overflow count is > 0 carries TLC_EVF_GAP. A push never returns more
 * than TLC_EVLOG_BATCH events.
 */
#ifndef TLC_EVLOG_H
#define TLC_EVLOG_H

#include "base/out.h"
#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_EVLOG_MAGIC  0x0ffee211u
#define TLC_EVLOG_HEADER 12
#define TLC_EVLOG_ITEM   40
/* Smallest item: the 40-byte struct, an empty event string's NUL, rounded up to 8. */
#define TLC_EVLOG_MIN_ITEM 48
/* Largest item: event_next is a u16 and a multiple of 8. */
#define TLC_EVLOG_MAX_ITEM 65528
/* Events (and extensions) one push or finish can return at most. */
#define TLC_EVLOG_BATCH 256
/* The carry buffer: one maximal item plus room to append another without compacting. */
#define TLC_EVLOG_CARRY (2 * 65536)

struct tlc_dec;

/* Decoder state (embedded in tlc_dec_t; private to evlog.c). The unconsumed input is
 * carry[carry_off..carry_len) followed by the bytes of the current push. */
typedef struct tlc_evlog_state {
  uint8_t *carry;          /* TLC_EVLOG_CARRY bytes, allocated by init */
  size_t carry_off;        /* first unconsumed byte in carry */
  size_t carry_len;        /* end of the bytes held in carry */
  tlc_evlog_ext_t *ext;    /* TLC_EVLOG_BATCH extensions, parallel to the output batch */
  uint64_t at;             /* stream offset of the first unconsumed byte */
  uint64_t block_offset;   /* stream offset of the current block's header */
  uint32_t block_size;     /* its size field */
  uint32_t block_overflow; /* its overflow field */
  uint32_t block_seq;      /* its index among the blocks this decoder accepted */
  uint32_t block_left;     /* bytes of it not yet consumed */
  uint32_t next_seq;       /* block_seq of the next accepted block (never reset) */
  uint8_t phase;           /* 0 expecting a header, 1 inside a block, 2 scanning for a magic */
  uint8_t magic_be;        /* current block: magic big-endian */
  uint8_t sizes_be;        /* current block: size and overflow big-endian */
  uint8_t item_be;         /* current block: item fields big-endian (known after its first) */
  uint8_t gap;             /* the next event gets TLC_EVF_GAP */
  uint8_t lost;            /* resync: out of sync since the last accepted header */
  uint8_t sizes_known;     /* sizes_learned holds this stream's size order */
  uint8_t sizes_learned;   /* from the last header whose size read plausibly one way only */
  uint8_t tail[11];        /* resync: the last 11 bytes of the unit just accepted */
  uint8_t tail_len;        /* 11 right after an accepted header or item, 0 otherwise */
  uint8_t hdr_pre;         /* resync: the next header's first bytes are tail[0..hdr_pre) */
} tlc_evlog_state_t;

/* Module entry points for dec.c; same contracts as the tlc_dec_* functions. */
int tlc__evlog_init(struct tlc_dec *d);
void tlc__evlog_fini(struct tlc_dec *d);
int tlc__evlog_push(struct tlc_dec *d, const uint8_t *in, size_t len, size_t *used, tlc_event_t *ev,
                    size_t max);
int tlc__evlog_finish(struct tlc_dec *d, tlc_event_t *ev, size_t max);
void tlc__evlog_reset(struct tlc_dec *d);

/* The decoder's rule for a block header's size field: 1 when `size` is plausible (at most
 * max_block, 0: 64 MiB; a multiple of 8; 0 or at least one item), else 0. Pure. */
int tlc_evlog_size_ok(uint32_t size, uint32_t max_block);

/* An item's time `tim` (seconds) as an index time in ns for storage manifests: 1 and *ns =
 * round(tim * 1e9) when tim is finite and |tim| < 9e9 s (the items' times a segment's index
 * and time range count), else 0 (the item counts, its time does not). Pure. */
int tlc_evlog_index_time(double tim, int64_t *ns);

/* 1 if buf starts with a block header whose magic reads in either byte order. */
int tlc_evlog_looks_like(const uint8_t *buf, size_t len);

/* ---- Encoder -------------------------------------------------------------------------- */

typedef struct tlc_evlog_enc_opts {
  uint32_t max_block; /* largest block size written (bytes after the header); 0: 64 MiB */
  uint8_t item_be;    /* items built from fields: big-endian (0: little-endian, as eina) */
  uint8_t header_be;  /* blocks with no recorded header: magic and sizes big-endian */
} tlc_evlog_enc_opts_t;

/* Collects the items of one block (the header needs the block's size), then writes header and
 * items. The block buffer grows on demand up to max_block and is kept for the next block. */
typedef struct tlc_evlog_enc {
  tlc_evlog_enc_opts_t opts;
  uint8_t *buf;      /* items of the open block */
  size_t len, cap;   /* bytes collected, allocated */
  int open;          /* a block is being collected */
  int recorded;      /* its items came from decoded events with a block_seq */
  uint32_t seq;      /* their block_seq */
  uint32_t overflow; /* the header's overflow count */
  uint8_t magic_be, sizes_be;
  uint64_t blocks; /* blocks written */
  uint64_t items;  /* items written */
} tlc_evlog_enc_t;

/* Initialises `e` with `opts` (NULL: defaults). Allocates nothing. Returns 0 or TLC_EINVAL
 * (max_block below one item or above 64 MiB). */
int tlc_evlog_enc_init(tlc_evlog_enc_t *e, const tlc_evlog_enc_opts_t *opts);

/* Frees the block buffer; unwritten items are dropped (call flush first). Safe on zeroed
 * memory. */
void tlc_evlog_enc_fini(tlc_evlog_enc_t *e);

/* Adds a decoded evlog event (ev->evlog must be set). With ext->item the raw item bytes are
 * copied verbatim (padding included); otherwise the item is built from ext's fields and
 * ev->thread in ext->item_be order. A new block starts (the open one is written to `o`) when
 * ext->block_seq differs from the open block's, when the open block was built without recorded
 * blocks, or when the item would make the block exceed max_block; a recorded block keeps its
 * header's byte orders and its overflow count (on its first part only). Returns 0, TLC_EINVAL
 * (no ext), TLC_ERANGE (item too long for a u16 event_next or for max_block), TLC_ENOMEM, or
 * o's sticky error. */
int tlc_evlog_enc_add(tlc_evlog_enc_t *e, const tlc_event_t *ev, tlc_out_t *o);

/* Adds an item built from fields (detail NULL: absent) to the open block, or to a new one with
 * opts' header order and overflow 0 when the open block is a recorded one or is full. Same
 * returns as tlc_evlog_enc_add. */
int tlc_evlog_enc_add_item(tlc_evlog_enc_t *e, double tim, double srctim, uint64_t thread,
                           uint64_t obj, const char *event, const char *detail, tlc_out_t *o);

/* Writes the open block, if any, to `o` (does not flush `o` itself). Returns 0 or o's sticky
 * error. */
int tlc_evlog_enc_flush(tlc_evlog_enc_t *e, tlc_out_t *o);

/* Builds one item into buf[0..cap): the 40-byte struct (fields in `be` order, event_offset 40,
 * detail right after the event's NUL), the strings, and zero padding to a multiple of 8.
 * Returns the item's length (its event_next), or TLC_ERANGE if it does not fit in cap or in a
 * u16. */
int tlc_evlog_item_build(uint8_t *buf, size_t cap, double tim, double srctim, uint64_t thread,
                         uint64_t obj, const char *event, const char *detail, int be);

#endif
