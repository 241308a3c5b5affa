/* fuzz_efldbg.c - libFuzzer harness for the EFL debug protocol reader (formats/efldbg.c): what
 * efl_debugd (or anything listening on its port) sends to tlcapd's efl source.
 *
 * Input: 4 setting bytes (chunk size, max_ctl, prefix, streamed opcode), then the byte stream.
 * Checks: the reader returns only known kinds, always makes progress, never reads or points
 * outside the input (ASan); a CTL payload is exactly size - 12 bytes and within max_ctl; a
 * streamed packet delivers BEGIN (min(prefix, payload) bytes), DATA slices adding up to the
 * rest, then END; an error is sticky; and the whole transcript (kinds, headers, payload bytes)
 * is the same for the chosen chunking as for a single push. Every CTL payload also goes
 * through the three payload parsers, which must stay within it and terminate.
 */
#include "base/err.h"
#include "formats/efldbg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct transcript {
  uint8_t *buf;
  size_t len, cap;
} transcript_t;

static void put(transcript_t *t, const void *p, size_t n) {
  if (t->len + n > t->cap) {
    size_t nc = (t->len + n) * 2 + 64;
    uint8_t *nb = realloc(t->buf, nc);
    if (nb == NULL)
      abort();
    t->buf = nb;
    t->cap = nc;
  }
  memcpy(t->buf + t->len, p, n);
  t->len += n;
}

static void parse_payloads(const uint8_t *p, size_t len) {
  size_t off = 0, n, guard = 0;
  tlc_efldbg_client_t c;
  int32_t cid, ids[8];
  uint64_t cookie;
  int r;
  while ((r = tlc_efldbg_added_next(p, len, &off, &c)) > 0) {
    if (off > len || strlen(c.name) > TLC_EFLDBG_NAME_MAX || ++guard > len)
      abort();
  }
  if (r != 0 && r != TLC_EFRAME)
    abort();
  off = 0;
  guard = 0;
  while ((r = tlc_efldbg_deleted_next(p, len, &off, &cid)) > 0)
    if (off > len || ++guard > len)
      abort();
  if (r != 0 && r != TLC_EFRAME)
    abort();
  r = tlc_efldbg_register_reply(p, len, &cookie, ids, 8, &n);
  if (r == 0 && (n > 8 || len != 8 + 4 * n))
    abort();
  for (size_t i = 0; r == 0 && i < n; i++)
    if (ids[i] < 0 || ids[i] >= TLC_EFLDBG_MAX_OPCODE)
      abort();
}

/* Reads all of in[0..len) in chunks of `chunk` bytes (0: one push), recording the transcript.
 * Returns 1 when the stream ended in an error. */
static int run(const uint8_t *in, size_t len, size_t chunk, uint32_t max_ctl, uint32_t prefix,
               int32_t sop, transcript_t *t) {
  tlc_efldbg_rd_t rd;
  size_t at = 0;
  uint32_t remaining = 0;
  int streaming = 0, failed = 0;
  if (tlc_efldbg_rd_init(&rd, 0, max_ctl, prefix) != 0)
    abort();
  rd.stream_op = sop;
  while (at < len || rd.phase == 4) {
    size_t n = chunk == 0 || len - at < chunk ? len - at : chunk;
    const uint8_t *p = in + at;
    while (n > 0 || rd.phase == 4) {
      tlc_efldbg_msg_t m;
      size_t used;
      int k = tlc_efldbg_rd_push(&rd, p, n, &used, &m);
      if (used > n)
        abort();
      if (k < 0) {
        uint8_t e = 0xEE;
        if (k != TLC_EFRAME || tlc_efldbg_rd_push(&rd, p, n, &used, &m) != TLC_EFRAME)
          abort(); /* sticky */
        put(t, &e, 1);
        failed = 1;
        goto done;
      }
      if (k == TLC_EFLDBG_NEED) {
        if (used != n)
          abort();
        at += n;
        n = 0;
        break;
      }
      if (used == 0 && k != TLC_EFLDBG_END && k != TLC_EFLDBG_BEGIN && k != TLC_EFLDBG_CTL)
        abort();
      if (m.data != NULL && m.len > 0 && k == TLC_EFLDBG_DATA &&
          (m.data < p || m.data + m.len > p + used))
        abort(); /* DATA points into this push's input */
      switch (k) {
      case TLC_EFLDBG_CTL:
        if (streaming || m.hdr.size < TLC_EFLDBG_HDR || m.len != m.hdr.size - TLC_EFLDBG_HDR ||
            m.len > max_ctl || m.hdr.opcode == sop)
          abort();
        parse_payloads(m.data, m.len);
        put(t, "C", 1);
        put(t, &m.hdr, sizeof(m.hdr));
        put(t, m.data, m.len);
        break;
      case TLC_EFLDBG_BEGIN: {
        uint32_t payload = m.hdr.size - TLC_EFLDBG_HDR;
        if (streaming || m.hdr.size < TLC_EFLDBG_HDR ||
            m.len != (payload < prefix ? payload : prefix))
          abort();
        streaming = 1;
        remaining = payload - (uint32_t)m.len;
        put(t, "B", 1);
        put(t, &m.hdr, sizeof(m.hdr));
        put(t, m.data, m.len);
        break;
      }
      case TLC_EFLDBG_DATA:
        if (!streaming || m.len == 0 || m.len > remaining)
          abort();
        remaining -= (uint32_t)m.len;
        put(t, m.data, m.len); /* slices of one packet concatenate: chunking-independent */
        break;
      case TLC_EFLDBG_END:
        if (!streaming || remaining != 0)
          abort();
        streaming = 0;
        put(t, "E", 1);
        break;
      default:
        abort();
      }
      p += used;
      n -= used;
      at += used;
    }
  }
done:
  tlc_efldbg_rd_fini(&rd);
  return failed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  transcript_t a = { 0 }, b = { 0 };
  size_t chunk;
  uint32_t max_ctl, prefix;
  int32_t sop;
  uint8_t pkt[600];
  const char *names[3] = { "EvLog/get", "Daemon/Client/added", "" };
  if (size < 4)
    return 0;
  chunk = data[0] % 17; /* 0: one push; else 1..16 bytes at a time */
  max_ctl = (uint32_t)data[1] * 4;
  prefix = data[2] % (TLC_EFLDBG_PREFIX_MAX + 1);
  sop = data[3] < 200 ? (int32_t)data[3] : -1;
  data += 4;
  size -= 4;
  if (run(data, size, chunk, max_ctl, prefix, sop, &a) !=
          run(data, size, 0, max_ctl, prefix, sop, &b) ||
      a.len != b.len || (a.len > 0 && memcmp(a.buf, b.buf, a.len) != 0))
    abort();
  free(a.buf);
  free(b.buf);
  /* the builders round-trip through the reader's header parse */
  if (tlc_efldbg_build_register(pkt, sizeof(pkt), 0x1122334455667788ull, names, 3) < 0 ||
      tlc_efldbg_build_hello(pkt, sizeof(pkt), 1, 42, "tlcapd") != 12 + 8 + 7)
    abort();
  return 0;
}
