/* scan.h - record/block framing of stored bin1x and evlog streams (scan.c), for indexing files
 * without decoding them. Pure; any thread. */
#ifndef TLC_SCAN_H
#define TLC_SCAN_H

#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_SCAN_MAX_BLOCK (64u * 1024u * 1024u) /* evlog: default largest block */

/* One record (bin1x) or block (evlog) found at the start of a buffer. */
typedef struct tlc_scan_rec {
  size_t len;     /* bytes of the record/block */
  int64_t tmin;   /* smallest event time in it (bin1x: the record's time; evlog: items' index
                     times, tlc_evlog_index_time); INT64_MAX when none */
  int64_t tmax;   /* largest; INT64_MIN when none */
  uint32_t items; /* events in it (1 for bin1x) */
} tlc_scan_rec_t;

/* Looks at buf[0..len) of format f: returns 1 and fills *r for a whole valid record/block, 0
 * when more bytes are needed (*need set to the total length wanted, when known), or -1 when the
 * bytes cannot start a record (evlog: bad magic, a size implausible both ways for max_block (0:
 * TLC_SCAN_MAX_BLOCK), or another format). */
int tlc_scan_record(tlc_format_t f, const uint8_t *buf, size_t len, uint32_t max_block,
                    tlc_scan_rec_t *r, size_t *need);

#endif
