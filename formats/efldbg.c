/* efldbg.c - EFL debug protocol framing and payloads (layout in efldbg.h, the conversation in
 * docs/efl.md).
 *
 * The reader is a small state machine over the byte stream:
 *
 *   header (12 bytes, kept in hbuf across pushes)
 *     -> size < 12 or > max_packet: error (sticky: the stream has no resync point)
 *     -> payload <= max_ctl and opcode != stream_op: copy into ctl, return CTL when complete
 *     -> otherwise: collect `prefix` payload bytes in hbuf, return BEGIN, then DATA slices that
 *        point into the caller's input (never copied), then END
 *
 * Invariants: hlen <= 12 + prefix; clen <= max_ctl; left <= size - 12. A push returns at most
 * one message, so the caller handles it before the reader moves on (a CTL payload stays valid
 * until the next push). Cost: O(bytes); no allocation after init.
 *
 * Not done here: what the opcodes mean (the source keeps the name -> id table), and checking
 * that a payload makes sense for its opcode beyond the three parsers below.
 */
#include "formats/efldbg.h"

#include "base/alloc.h"
#include "base/err.h"

#include <stdio.h>
#include <string.h>

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

int tlc_efldbg_rd_init(tlc_efldbg_rd_t *rd, uint32_t max_packet, uint32_t max_ctl,
                       uint32_t prefix) {
  memset(rd, 0, sizeof(*rd));
  if (max_packet == 0)
    max_packet = TLC_EFLDBG_MAX_PACKET;
  if (max_packet < TLC_EFLDBG_HDR || max_packet > TLC_EFLDBG_MAX_PACKET ||
      max_ctl > max_packet - TLC_EFLDBG_HDR || prefix > TLC_EFLDBG_PREFIX_MAX)
    return TLC_EINVAL;
  rd->max_packet = max_packet;
  rd->max_ctl = max_ctl;
  rd->prefix = prefix;
  rd->stream_op = -1;
  rd->ctl = tlc_malloc(max_ctl > 0 ? max_ctl : 1);
  if (rd->ctl == NULL)
    return TLC_ENOMEM;
  return 0;
}

void tlc_efldbg_rd_fini(tlc_efldbg_rd_t *rd) {
  tlc_free(rd->ctl);
  rd->ctl = NULL;
}

void tlc_efldbg_rd_reset(tlc_efldbg_rd_t *rd) {
  rd->hlen = rd->clen = 0;
  rd->left = 0;
  rd->phase = 0;
  rd->at = 0;
  rd->pkt_offset = 0;
  rd->packets = 0;
  rd->err_offset = 0;
  rd->err_reason[0] = '\0';
}

static int fail(tlc_efldbg_rd_t *rd, const char *why, uint32_t size) {
  rd->phase = 5;
  rd->err_offset = rd->pkt_offset;
  snprintf(rd->err_reason, sizeof(rd->err_reason), "packet size %u is %s", size, why);
  return TLC_EFRAME;
}

int tlc_efldbg_rd_push(tlc_efldbg_rd_t *rd, const uint8_t *in, size_t len, size_t *used,
                       tlc_efldbg_msg_t *m) {
  size_t u = 0;
  memset(m, 0, sizeof(*m));
  *used = 0;
  if (rd->phase == 5)
    return TLC_EFRAME;
  for (;;) {
    switch (rd->phase) {
    case 0: { /* header */
      size_t want = TLC_EFLDBG_HDR - rd->hlen;
      size_t take = len - u < want ? len - u : want;
      uint32_t payload;
      if (rd->hlen == 0)
        rd->pkt_offset = rd->at;
      if (take > 0) /* in may be NULL when len is 0 */
        memcpy(rd->hbuf + rd->hlen, in + u, take);
      rd->hlen += take;
      u += take;
      rd->at += take;
      if (rd->hlen < TLC_EFLDBG_HDR)
        goto need;
      rd->hdr.size = rd32(rd->hbuf);
      rd->hdr.cid = (int32_t)rd32(rd->hbuf + 4);
      rd->hdr.opcode = (int32_t)rd32(rd->hbuf + 8);
      if (rd->hdr.size < TLC_EFLDBG_HDR) {
        *used = u;
        return fail(rd, "below the 12-byte header", rd->hdr.size);
      }
      if (rd->hdr.size > rd->max_packet) {
        *used = u;
        return fail(rd, "above the limit", rd->hdr.size);
      }
      payload = rd->hdr.size - TLC_EFLDBG_HDR;
      if (payload <= rd->max_ctl && rd->hdr.opcode != rd->stream_op) {
        rd->clen = 0;
        rd->left = payload;
        rd->phase = 1;
      } else {
        rd->left = payload;
        rd->phase = 2;
      }
      continue;
    }
    case 1: { /* whole payload into ctl */
      size_t take = len - u < rd->left ? len - u : rd->left;
      if (take > 0) /* in may be NULL when len is 0 */
        memcpy(rd->ctl + rd->clen, in + u, take);
      rd->clen += take;
      rd->left -= (uint32_t)take;
      u += take;
      rd->at += take;
      if (rd->left > 0)
        goto need;
      rd->phase = 0;
      rd->hlen = 0;
      rd->packets++;
      m->kind = TLC_EFLDBG_CTL;
      m->hdr = rd->hdr;
      m->data = rd->ctl;
      m->len = rd->clen;
      *used = u;
      return m->kind;
    }
    case 2: { /* a streamed packet's prefix */
      uint32_t payload = rd->hdr.size - TLC_EFLDBG_HDR;
      size_t want = (payload < rd->prefix ? payload : rd->prefix) - (rd->hlen - TLC_EFLDBG_HDR);
      size_t take = len - u < want ? len - u : want;
      if (take > 0) /* in may be NULL when len is 0 */
        memcpy(rd->hbuf + rd->hlen, in + u, take);
      rd->hlen += take;
      rd->left -= (uint32_t)take;
      u += take;
      rd->at += take;
      if (take < want)
        goto need;
      rd->phase = rd->left > 0 ? 3 : 4;
      m->kind = TLC_EFLDBG_BEGIN;
      m->hdr = rd->hdr;
      m->data = rd->hbuf + TLC_EFLDBG_HDR;
      m->len = rd->hlen - TLC_EFLDBG_HDR;
      *used = u;
      return m->kind;
    }
    case 3: { /* streamed payload */
      size_t take = len - u < rd->left ? len - u : rd->left;
      if (take == 0)
        goto need;
      rd->left -= (uint32_t)take;
      rd->at += take;
      if (rd->left == 0)
        rd->phase = 4;
      m->kind = TLC_EFLDBG_DATA;
      m->hdr = rd->hdr;
      m->data = in + u;
      m->len = take;
      *used = u + take;
      return m->kind;
    }
    case 4: /* end of a streamed packet (returned on its own, even with no input left) */
      rd->phase = 0;
      rd->hlen = 0;
      rd->packets++;
      m->kind = TLC_EFLDBG_END;
      m->hdr = rd->hdr;
      *used = u;
      return m->kind;
    default:
      return TLC_EFRAME;
    }
  }
need:
  *used = u;
  m->kind = TLC_EFLDBG_NEED;
  return m->kind;
}

int tlc_efldbg_added_next(const uint8_t *p, size_t len, size_t *off, tlc_efldbg_client_t *c) {
  size_t o = *off, nl;
  const uint8_t *nul;
  if (o >= len)
    return 0;
  if (len - o < 9) /* cid, pid and at least the name's NUL */
    return TLC_EFRAME;
  c->cid = (int32_t)rd32(p + o);
  c->pid = (int32_t)rd32(p + o + 4);
  o += 8;
  nul = memchr(p + o, 0, len - o);
  if (nul == NULL)
    return TLC_EFRAME;
  nl = (size_t)(nul - (p + o));
  c->name_cut = nl > TLC_EFLDBG_NAME_MAX;
  if (nl > TLC_EFLDBG_NAME_MAX)
    nl = TLC_EFLDBG_NAME_MAX;
  memcpy(c->name, p + o, nl);
  c->name[nl] = '\0';
  *off = (size_t)(nul - p) + 1;
  return 1;
}

int tlc_efldbg_deleted_next(const uint8_t *p, size_t len, size_t *off, int32_t *cid) {
  if (*off >= len)
    return 0;
  if (len - *off < 4)
    return TLC_EFRAME;
  *cid = (int32_t)rd32(p + *off);
  *off += 4;
  return 1;
}

int tlc_efldbg_register_reply(const uint8_t *p, size_t len, uint64_t *cookie, int32_t *ids,
                              size_t max, size_t *n) {
  size_t k;
  *n = 0;
  if (len < 8 || (len - 8) % 4 != 0 || (len - 8) / 4 > max)
    return TLC_EFRAME;
  *cookie = (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
  k = (len - 8) / 4;
  for (size_t i = 0; i < k; i++) {
    int32_t id = (int32_t)rd32(p + 8 + 4 * i);
    if (id < 0 || id >= TLC_EFLDBG_MAX_OPCODE)
      return TLC_EFRAME;
    ids[i] = id;
  }
  *n = k;
  return 0;
}

void tlc_efldbg_put_hdr(uint8_t out[TLC_EFLDBG_HDR], uint32_t size, int32_t cid, int32_t opcode) {
  wr32(out, size);
  wr32(out + 4, (uint32_t)cid);
  wr32(out + 8, (uint32_t)opcode);
}

int tlc_efldbg_build_hello(uint8_t *out, size_t cap, int32_t version, int32_t pid,
                           const char *name) {
  size_t nl = strlen(name) + 1, size = TLC_EFLDBG_HDR + 8 + nl;
  if (size > cap || size > TLC_EFLDBG_MAX_PACKET)
    return TLC_ERANGE;
  tlc_efldbg_put_hdr(out, (uint32_t)size, 0, TLC_EFLDBG_OP_HELLO);
  wr32(out + 12, (uint32_t)version);
  wr32(out + 16, (uint32_t)pid);
  memcpy(out + 20, name, nl);
  return (int)size;
}

int tlc_efldbg_build_register(uint8_t *out, size_t cap, uint64_t cookie, const char *const *names,
                              size_t n) {
  size_t size = TLC_EFLDBG_HDR + 8, at;
  for (size_t i = 0; i < n; i++) {
    size += strlen(names[i]) + 1;
    if (size > cap || size > TLC_EFLDBG_MAX_PACKET)
      return TLC_ERANGE;
  }
  if (size > cap)
    return TLC_ERANGE;
  tlc_efldbg_put_hdr(out, (uint32_t)size, 0, TLC_EFLDBG_OP_REGISTER);
  wr32(out + 12, (uint32_t)cookie);
  wr32(out + 16, (uint32_t)(cookie >> 32));
  at = 20;
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(names[i]) + 1;
    memcpy(out + at, names[i], l);
    at += l;
  }
  return (int)size;
}

void tlc_efldbg_evlog_header(uint8_t out[12], uint32_t items_len, const uint8_t ovf[4]) {
  wr32(out, 0x0ffee211u);
  wr32(out + 4, items_len);
  wr32(out + 8, rd32(ovf));
}
