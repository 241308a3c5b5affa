/* tlc_event.h - the one decoded-event shape shared by every format, the engine and the tools.
 *
 * A bin10/bin11 record decodes into the common fields only (`evlog` is NULL). An evlog item
 * decodes into the common fields (time_ns = round(tim * 1e9), thread, core unknown, handle 0,
 * type TLC_EV_NONE until the evlog mapping step of evmap.h gives it a handle and a type) plus
 * an extension with the item's own fields and string slices. Slices point into the input chunk
 * or the decoder's carry buffer and stay valid until the next call into the same decoder.
 *
 * Pure data: no functions here beyond tiny inline helpers.
 */
#ifndef TLC_EVENT_H
#define TLC_EVENT_H

#include <stdint.h>

/* Event types, as the winIDEA seed numbers them (bin11 flags & 0xF, bin10 (event >> 24) & 0xF). */
enum tlc_ev_type {
  TLC_EV_EXIT = 0,    /* X */
  TLC_EV_SUSPEND = 1, /* S */
  TLC_EV_RESUME = 2,  /* R */
  TLC_EV_ENTRY = 3,   /* E */
  TLC_EV_WRITE = 4,   /* W */
  TLC_EV_NONE = 0xFF  /* evlog item not mapped (yet), or metadata only */
};

/* Area types: the handle's top nibble. */
enum tlc_area_type {
  TLC_AREA_FUNCTION = 0,
  TLC_AREA_LINE = 1,
  TLC_AREA_VARIABLE = 2,
  TLC_AREA_VARSTATE = 3,
  TLC_AREA_AUX = 4,
  TLC_AREA_AUXSTATE = 5
};

#define TLC_CORE_UNKNOWN 0xFF

/* Stream formats. */
typedef enum tlc_format {
  TLC_FMT_NONE = 0,
  TLC_FMT_BIN10 = 1,
  TLC_FMT_BIN11 = 2,
  TLC_FMT_EVLOG = 3
} tlc_format_t;

/* tlc_event_t.flags */
#define TLC_EVF_SYNTH     0x0001 /* synthesised by the evlog mapping (S before E, R after X) */
#define TLC_EVF_GAP       0x0002 /* bytes or items were lost before this event (resync, overflow) */
#define TLC_EVF_BLOCK_END 0x0004 /* evlog: the last item of its block (a storage cut point) */
/* bin1x resync: this record's time lies more than the decoder's tolerance below the last
 * record's and the records after it confirm it (a board reset: the engine starts a new clock
 * epoch when the step is also more than its clock_reset_ns) */
#define TLC_EVF_RESTART 0x0008

/* The fields of an Eina_Evlog_Item and where it sits, for evlog events only. */
typedef struct tlc_evlog_ext {
  double tim;              /* seconds, CLOCK_MONOTONIC of the writer */
  double srctim;           /* 0.0 unless a source time is known */
  uint64_t obj;            /* object pointer value as recorded */
  const char *event;       /* NUL-terminated inside the item; e.g. "+foo", "*CPUFREQ 0" */
  const char *detail;      /* NUL-terminated inside the item, or NULL when absent */
  const uint8_t *item;     /* the item's raw bytes, strings and padding included */
  uint64_t block_offset;   /* stream offset of the block header holding this item */
  uint32_t block_size;     /* the block's size field (bytes after the 12-byte header) */
  uint32_t block_overflow; /* the block's overflow count */
  uint32_t block_seq;      /* 0-based index of the block in the stream */
  uint16_t event_len;      /* strlen(event) */
  uint16_t detail_len;     /* strlen(detail), 0 when absent */
  uint16_t item_len;       /* event_next: bytes from this item to the next */
  uint8_t item_be;         /* 1 if the item fields were big-endian */
  uint8_t header_be;       /* 1 if the block header's magic was big-endian */
  uint8_t sizes_be;        /* 1 if its size and overflow words were big-endian (may differ) */
} tlc_evlog_ext_t;

typedef struct tlc_event {
  int64_t time_ns; /* event time in nanoseconds */
  uint64_t data;   /* W value (data and AUX), 0 otherwise */
  uint64_t thread; /* evlog thread id; 0 for bin1x */
  uint64_t offset; /* byte offset of the record/item in the stream (after any preamble) */
  uint32_t handle; /* area handle; top nibble = enum tlc_area_type */
  uint32_t raw;    /* bin11: the flags word; bin10: the event word; as received */
  uint8_t type;    /* enum tlc_ev_type */
  uint8_t core;    /* core index, TLC_CORE_UNKNOWN (0xFF) when unknown */
  uint16_t flags;  /* TLC_EVF_* */
  uint32_t reserved_;
  const tlc_evlog_ext_t *evlog; /* NULL unless decoded from evlog */
} tlc_event_t;

static inline unsigned tlc_handle_area(uint32_t handle) {
  return handle >> 28;
}

/* 'E', 'S', 'R', 'X', 'W' for the five types, '?' otherwise. */
static inline char tlc_ev_char(unsigned type) {
  static const char c[] = "XSREW";
  return type <= TLC_EV_WRITE ? c[type] : '?';
}

#endif
