/* frame.h - varint length-delimited framing of the subscriber protocol.
 *
 * A frame is a base-128 varint (protobuf's encoding, at most 10 bytes, value < 2^64) giving
 * the payload length, followed by the payload: protobuf's standard delimited framing. The
 * decoder is incremental (bytes arrive in any split, down to one at a time) and checks the
 * announced length against its cap before it allocates anything, so a header announcing 4 GiB
 * costs nothing. A zero-length frame is refused (no valid request encodes to nothing useful,
 * and refusing it keeps "empty" probes from costing a dispatch).
 *
 * Pure C: no I/O, no libuv. Not thread-safe; one decoder per connection.
 */
#ifndef TLC_FRAME_H
#define TLC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define TLC_FRAME_MAX_HEADER 10

/* Writes the varint of `len` into out (at least TLC_FRAME_MAX_HEADER bytes) and returns the
 * number of bytes written (1..10). */
size_t tlc_frame_header(uint8_t *out, uint64_t len);

/* Parses a varint at p[0..n). Returns the bytes it used (1..10) with the value in *v, 0 when
 * more bytes are needed, or TLC_EFRAME (more than 10 bytes, or a value above 2^64-1). */
int tlc_frame_varint(const uint8_t *p, size_t n, uint64_t *v);

typedef struct tlc_frame_dec {
  size_t max; /* cap on one payload, bytes */
  uint8_t hdr[TLC_FRAME_MAX_HEADER];
  unsigned nhdr;  /* header bytes gathered */
  int in_payload; /* header complete */
  uint64_t len;   /* payload length (valid when in_payload) */
  uint8_t *buf;   /* payload being gathered (tlc_malloc'd, exactly len bytes) */
  size_t have;    /* payload bytes gathered */
  int err;        /* sticky error */
} tlc_frame_dec_t;

/* Initialises a decoder whose payloads may be at most `max` bytes. Returns 0. */
int tlc_frame_dec_init(tlc_frame_dec_t *d, size_t max);
/* Frees the gathering buffer. Safe on zeroed memory and more than once. */
void tlc_frame_dec_fini(tlc_frame_dec_t *d);
/* Changes the cap (e.g. once a peer authenticates). Applies to frames not yet started. */
void tlc_frame_dec_set_max(tlc_frame_dec_t *d, size_t max);

/* Feeds p[0..n). Sets *used to the bytes consumed. Returns:
 *   1  a frame is complete: *frame and *flen give its payload, valid until the next call (it may
 *      point into p when the whole frame was inside it: no copy);
 *   0  all of p consumed, no complete frame yet;
 *   TLC_ELIMIT  the announced length is above the cap (nothing was allocated);
 *   TLC_EFRAME  a bad varint or a zero-length frame;
 *   TLC_ENOMEM  no memory for the payload.
 * Errors are sticky. Call again with the rest of p (p + *used) after a frame. */
int tlc_frame_dec_feed(tlc_frame_dec_t *d, const uint8_t *p, size_t n, size_t *used,
                       const uint8_t **frame, size_t *flen);

/* Bytes held by the decoder (a partial payload), for accounting. */
size_t tlc_frame_dec_pending(const tlc_frame_dec_t *d);

#endif
