/* fuzz_frame.c - libFuzzer harness for the frame decoder and the protobuf decoding of both
 * envelopes: bytes -> frames (fed in chunks whose sizes come from the input) -> ClientMessage
 * and ServerMessage unpack -> (snapshots) tlc_pb_snapshot_apply. Must never crash, leak or
 * allocate beyond the cap announced in a header. */
#include "base/alloc.h"
#include "proto/convert.h"
#include "proto/frame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_frame_dec_t d;
  size_t off = 1, step;
  if (size < 1)
    return 0;
  step = (size_t)(data[0] % 17) + 1; /* chunk size from the first byte */
  tlc_frame_dec_init(&d, 1u << 16);
  while (off < size) {
    size_t n = size - off < step ? size - off : step;
    const uint8_t *p = data + off;
    off += n;
    while (n > 0) {
      const uint8_t *f;
      size_t used, flen;
      int r = tlc_frame_dec_feed(&d, p, n, &used, &f, &flen);
      if (r < 0)
        goto done;
      p += used;
      n -= used;
      if (r == 1) {
        Tlcap__ClientMessage *cm = tlcap__client_message__unpack(&tlc_pb_allocator, flen, f);
        Tlcap__ServerMessage *sm = tlcap__server_message__unpack(&tlc_pb_allocator, flen, f);
        if (cm != NULL)
          tlcap__client_message__free_unpacked(cm, &tlc_pb_allocator);
        if (sm != NULL) {
          const Tlcap__Snapshot *s = NULL;
          if (sm->msg_case == TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT)
            s = sm->snapshot;
          else if (sm->msg_case == TLCAP__SERVER_MESSAGE__MSG_STATS)
            s = sm->stats->snapshot;
          if (s != NULL) {
            tlc_table_t t;
            tlc_table_init(&t);
            t.maxrows = 100000;
            (void)tlc_pb_snapshot_apply(&t, s);
            tlc_table_fini(&t);
          }
          tlcap__server_message__free_unpacked(sm, &tlc_pb_allocator);
        }
      }
    }
  }
done:
  tlc_frame_dec_fini(&d);
  return 0;
}
