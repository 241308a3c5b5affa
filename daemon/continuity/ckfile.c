/* ckfile.c - a target's checkpoint file (layout in ckfile.h).
 *
 * Encoding copies the target's counters and hands the rest to the engine's and the evlog
 * mapping's own savers; cost is theirs (about one memcpy per row). The reader checks the whole
 * file (length, magic, version, byte order, checksum) before it reads a field, then every
 * field as it goes (strings bounded, counts against the bytes left, enums against their
 * ranges); restoring goes through tlc_engine_load / tlc_evmap_load, which check every index.
 * A restore that fails leaves the target as it was created.
 *
 * Does not: touch files (continuity.c), or keep the mapping file's content (the target reloads
 * its mapping_path when it is created; a mapping loaded at run time by `tlcap mapping` is not
 * kept).
 */
#include "continuity/ckfile.h"

#include "base/alloc.h"
#include "base/err.h"
#include "engine/engine.h"
#include "formats/evmap.h"

#include <stdio.h>
#include <string.h>

#define TGT_MAGIC 0x32544754u /* "TGT2": the settings carry the packing, RTOS file, threshold */
static const char file_magic[8] = { 'T', 'L', 'C', 'C', 'K', 'P', 'T', '\n' };

static void put_conf(tlc_ckw_t *w, const tlc_target_conf_t *c) {
  unsigned i;
  tlc_ckw_u32(w, (uint32_t)c->resync);
  tlc_ckw_u8(w, c->has_context_area);
  tlc_ckw_u32(w, c->context_area);
  tlc_ckw_str(w, c->mapping_path);
  tlc_ckw_u32(w, c->nwindows);
  for (i = 0; i < c->nwindows && i < TLC_MAX_WINDOWS; i++)
    tlc_ckw_i64(w, c->window_ns[i]);
  tlc_ckw_u64(w, c->max_areas);
  tlc_ckw_u64(w, c->max_contexts);
  tlc_ckw_u64(w, c->max_depth);
  tlc_ckw_u64(w, c->max_names);
  tlc_ckw_u32(w, c->max_block);
  tlc_ckw_u8(w, c->histograms);
  /* the packed task variable (its contexts are keyed by what its values mean), the context
   * names' RTOS description, the clock restart threshold */
  tlc_ckw_u64(w, c->pack.id_mask);
  tlc_ckw_u64(w, c->pack.state_mask);
  tlc_ckw_u8(w, c->pack.stop_all);
  tlc_ckw_u8(w, c->pack.nrun);
  for (i = 0; i < c->pack.nrun && i < TLC_CTXPACK_MAX; i++)
    tlc_ckw_u64(w, c->pack.run[i]);
  tlc_ckw_u8(w, c->pack.nstop);
  for (i = 0; i < c->pack.nstop && i < TLC_CTXPACK_MAX; i++)
    tlc_ckw_u64(w, c->pack.stop[i]);
  tlc_ckw_str(w, c->rtos_path);
  tlc_ckw_i64(w, c->clock_reset_ns);
}

int tlc_ckpt_encode_begin(tlc_target_t *t, tlc_engine_saver_t *sv, tlc_ckw_t *w) {
  unsigned i;
  tlc_ckw_room(w, TLC_CKPT_HEADER); /* filled by tlc_ckpt_finish */
  tlc_ckw_u32(w, TGT_MAGIC);
  tlc_ckw_str(w, t->name);
  tlc_ckw_u32(w, (uint32_t)t->format);
  tlc_ckw_u32(w, (uint32_t)t->src_kind);
  put_conf(w, &t->conf);
  tlc_ckw_u8(w, (uint8_t)(t->connected != 0));
  tlc_ckw_u64(w, t->connections);
  tlc_ckw_u64(w, t->reconnects);
  tlc_ckw_u64(w, t->gaps);
  tlc_ckw_u64(w, t->decode_errors);
  tlc_ckw_u64(w, t->truncated_tails);
  tlc_ckw_u64(w, t->deadline_closes);
  tlc_ckw_u64(w, t->dropped_reported);
  tlc_ckw_u64(w, t->resyncs_reported);
  tlc_ckw_i64(w, t->last_connect_unix_ms);
  tlc_ckw_i64(w, t->last_disconnect_unix_ms);
  tlc_ckw_u64(w, t->ngaplog);
  for (i = 0; i < TLC_TARGET_GAPLOG; i++) {
    tlc_ckw_i64(w, t->gaplog[i].disconnect_unix_ms);
    tlc_ckw_i64(w, t->gaplog[i].reconnect_unix_ms);
  }
  tlc_ckw_bytes(w, &t->pipe.dec.c, sizeof(t->pipe.dec.c));
  if (w->err == 0)
    tlc_engine_save_begin(t->pipe.engine, sv, w);
  return w->err;
}

int tlc_ckpt_encode_step(tlc_target_t *t, tlc_engine_saver_t *sv, tlc_ckw_t *w, size_t units) {
  int rc = tlc_engine_save_step(t->pipe.engine, sv, w, units);
  if (rc == 1 && t->pipe.evmap != NULL && tlc_evmap_save(t->pipe.evmap, w) != 0)
    rc = w->err;
  return rc;
}

int tlc_ckpt_encode(tlc_target_t *t, tlc_ckw_t *w) {
  tlc_engine_saver_t sv;
  int rc = tlc_ckpt_encode_begin(t, &sv, w);
  while (rc == 0)
    rc = tlc_ckpt_encode_step(t, &sv, w, SIZE_MAX);
  return rc < 0 ? rc : 0;
}

void tlc_ckpt_header(uint8_t h[TLC_CKPT_HEADER], const tlc_ckpt_pos_t *pos, int64_t wall_ns,
                     uint64_t payload) {
  uint32_t v;
  uint64_t q;
  memcpy(h, file_magic, 8);
  v = TLC_CKPT_VERSION;
  memcpy(h + 8, &v, 4);
  v = 0x01020304u;
  memcpy(h + 12, &v, 4);
  v = pos != NULL && pos->valid;
  memcpy(h + 16, &v, 4);
  v = 0;
  memcpy(h + 20, &v, 4);
  q = pos != NULL && pos->valid ? pos->seq : 0;
  memcpy(h + 24, &q, 8);
  q = pos != NULL && pos->valid ? pos->bytes : 0;
  memcpy(h + 32, &q, 8);
  q = pos != NULL && pos->valid ? pos->disconnects : 0;
  memcpy(h + 40, &q, 8);
  q = 0;
  memcpy(h + 48, &q, 8);
  memcpy(h + 56, &wall_ns, 8);
  memcpy(h + 64, &payload, 8);
}

int tlc_ckpt_finish(tlc_ckw_t *w, const tlc_ckpt_pos_t *pos, int64_t wall_ns) {
  uint64_t q;
  if (w->err != 0)
    return w->err;
  if (w->len < TLC_CKPT_HEADER)
    return TLC_EINVAL;
  tlc_ckpt_header(w->p, pos, wall_ns, w->len - TLC_CKPT_HEADER);
  q = tlc_ck_fnv(w->p, w->len);
  tlc_ckw_u64(w, q);
  return w->err;
}

static void why_set(char *why, size_t wl, const char *msg, size_t off) {
  if (why != NULL && wl > 0)
    snprintf(why, wl, "%s (byte %zu)", msg, off);
}

static int get_conf(tlc_ckr_t *r, tlc_ckpt_info_t *in) {
  tlc_target_conf_t *c = &in->conf;
  unsigned i;
  memset(c, 0, sizeof(*c));
  c->format = in->format;
  c->resync = (int)tlc_ckr_u32(r);
  c->has_context_area = tlc_ckr_u8(r);
  c->context_area = tlc_ckr_u32(r);
  tlc_ckr_str(r, in->mapping_path, sizeof(in->mapping_path));
  c->mapping_path = in->mapping_path[0] != '\0' ? in->mapping_path : NULL;
  c->nwindows = tlc_ckr_u32(r);
  if (c->nwindows > TLC_MAX_WINDOWS) {
    r->err = TLC_EFRAME;
    return TLC_EFRAME;
  }
  for (i = 0; i < c->nwindows; i++)
    c->window_ns[i] = tlc_ckr_i64(r);
  c->max_areas = (size_t)tlc_ckr_u64(r);
  c->max_contexts = (size_t)tlc_ckr_u64(r);
  c->max_depth = (size_t)tlc_ckr_u64(r);
  c->max_names = (size_t)tlc_ckr_u64(r);
  c->max_block = tlc_ckr_u32(r);
  c->histograms = tlc_ckr_u8(r);
  c->pack.id_mask = tlc_ckr_u64(r);
  c->pack.state_mask = tlc_ckr_u64(r);
  c->pack.stop_all = tlc_ckr_u8(r);
  c->pack.nrun = tlc_ckr_u8(r);
  if (c->pack.nrun > TLC_CTXPACK_MAX) {
    r->err = TLC_EFRAME;
    return TLC_EFRAME;
  }
  for (i = 0; i < c->pack.nrun; i++)
    c->pack.run[i] = tlc_ckr_u64(r);
  c->pack.nstop = tlc_ckr_u8(r);
  if (c->pack.nstop > TLC_CTXPACK_MAX) {
    r->err = TLC_EFRAME;
    return TLC_EFRAME;
  }
  for (i = 0; i < c->pack.nstop; i++)
    c->pack.stop[i] = tlc_ckr_u64(r);
  if ((c->pack.id_mask == 0) != (c->pack.state_mask == 0) || c->pack.stop_all > 1)
    r->err = TLC_EFRAME;
  tlc_ctxpack_finish(&c->pack);
  tlc_ckr_str(r, in->rtos_path, sizeof(in->rtos_path));
  c->rtos_path = in->rtos_path[0] != '\0' ? in->rtos_path : NULL;
  c->clock_reset_ns = tlc_ckr_i64(r);
  if (c->resync < 0 || c->resync > 1 || c->has_context_area > 1 || c->histograms > 1)
    r->err = TLC_EFRAME;
  return r->err;
}

/* The target section up to the counters (reader positioned after the header). */
static int get_head(tlc_ckr_t *r, tlc_ckpt_info_t *in) {
  uint32_t fmt, kind;
  if (tlc_ckr_u32(r) != TGT_MAGIC)
    return TLC_EFRAME;
  tlc_ckr_str(r, in->name, sizeof(in->name));
  fmt = tlc_ckr_u32(r);
  kind = tlc_ckr_u32(r);
  if (r->err != 0 || in->name[0] == '\0' ||
      tlc_target_name_check(in->name, TLC_TARGET_NAME_MAX) != 0 ||
      (fmt != TLC_FMT_BIN10 && fmt != TLC_FMT_BIN11 && fmt != TLC_FMT_EVLOG) ||
      kind < TLC_SRC_LISTEN || kind > TLC_SRC_SERIAL)
    return TLC_EFRAME;
  in->format = (tlc_format_t)fmt;
  in->src_kind = (int)kind;
  if (get_conf(r, in) != 0)
    return TLC_EFRAME;
  in->connected = tlc_ckr_u8(r);
  if (r->err != 0 || in->connected > 1)
    return TLC_EFRAME;
  return 0;
}

int tlc_ckpt_check(const uint8_t *buf, size_t len, tlc_ckpt_info_t *info, char *why, size_t wl) {
  uint32_t v, valid;
  uint64_t plen, sum;
  tlc_ckr_t r;
  memset(info, 0, sizeof(*info));
  if (len < TLC_CKPT_HEADER + 8) {
    why_set(why, wl, len == 0 ? "empty file" : "shorter than a header", len);
    return TLC_EFRAME;
  }
  if (memcmp(buf, file_magic, 8) != 0) {
    why_set(why, wl, "not a checkpoint (magic)", 0);
    return TLC_EFRAME;
  }
  memcpy(&v, buf + 8, 4);
  if (v < TLC_CKPT_VERSION_MIN || v > TLC_CKPT_VERSION) {
    if (why != NULL && wl > 0)
      snprintf(why, wl, "version %u, this build reads %u to %u", v, TLC_CKPT_VERSION_MIN,
               TLC_CKPT_VERSION);
    return TLC_EVERSION;
  }
  memcpy(&v, buf + 12, 4);
  if (v != 0x01020304u) {
    why_set(why, wl, "written on a host of the other byte order", 12);
    return TLC_EVERSION;
  }
  memcpy(&plen, buf + 64, 8);
  if (plen != len - TLC_CKPT_HEADER - 8) {
    why_set(why, wl, "length does not match the header (truncated?)", 64);
    return TLC_EFRAME;
  }
  memcpy(&sum, buf + len - 8, 8);
  if (sum != tlc_ck_fnv(buf, len - 8)) {
    why_set(why, wl, "checksum mismatch", len - 8);
    return TLC_EFRAME;
  }
  memcpy(&valid, buf + 16, 4);
  if (valid > 1) {
    why_set(why, wl, "bad position flag", 16);
    return TLC_EFRAME;
  }
  info->pos.valid = (int)valid;
  memcpy(&info->pos.seq, buf + 24, 8);
  memcpy(&info->pos.bytes, buf + 32, 8);
  memcpy(&info->pos.disconnects, buf + 40, 8);
  memcpy(&info->wall_ns, buf + 56, 8);
  tlc_ckr_init(&r, buf + TLC_CKPT_HEADER, (size_t)plen);
  if (get_head(&r, info) != 0) {
    why_set(why, wl, "bad target section", TLC_CKPT_HEADER + r.off);
    return TLC_EFRAME;
  }
  return 0;
}

int tlc_ckpt_restore(tlc_target_t *t, const uint8_t *buf, size_t len, char *why, size_t wl) {
  tlc_ckpt_info_t *in;
  tlc_ckr_t r;
  int rc;
  unsigned i;
  uint64_t cnt[8], ngaplog;
  int64_t lc, ld;
  tlc_target_gap_t gl[TLC_TARGET_GAPLOG];
  tlc_dec_counters_t dc;
  tlc_evmap_t *nm = NULL;
  in = tlc_malloc(sizeof(*in));
  if (in == NULL)
    return TLC_ENOMEM;
  rc = tlc_ckpt_check(buf, len, in, why, wl);
  if (rc != 0)
    goto out;
  if (strcmp(in->name, t->name) != 0 || in->format != t->format) {
    why_set(why, wl, "another target's checkpoint", TLC_CKPT_HEADER);
    rc = TLC_EINVAL;
    goto out;
  }
  tlc_ckr_init(&r, buf + TLC_CKPT_HEADER, len - TLC_CKPT_HEADER - 8);
  (void)get_head(&r, in);
  for (i = 0; i < 8; i++)
    cnt[i] = tlc_ckr_u64(&r);
  lc = tlc_ckr_i64(&r);
  ld = tlc_ckr_i64(&r);
  ngaplog = tlc_ckr_u64(&r);
  for (i = 0; i < TLC_TARGET_GAPLOG; i++) {
    gl[i].disconnect_unix_ms = tlc_ckr_i64(&r);
    gl[i].reconnect_unix_ms = tlc_ckr_i64(&r);
  }
  tlc_ckr_bytes(&r, &dc, sizeof(dc));
  if (r.err != 0) {
    why_set(why, wl, "bad counters", TLC_CKPT_HEADER + r.off);
    rc = TLC_EFRAME;
    goto out;
  }
  rc = tlc_engine_load(t->pipe.engine, &r);
  if (rc != 0) {
    why_set(why, wl,
            rc == TLC_EINVAL     ? "statistics settings differ from the target's (windows, "
                                   "context_area, caps or histograms changed)"
            : rc == TLC_EVERSION ? "statistics written by another build (layout)"
            : rc == TLC_ENOMEM   ? "out of memory"
                                 : "bad statistics section",
            TLC_CKPT_HEADER + r.off);
    goto out;
  }
  if (t->pipe.evmap != NULL) {
    tlc_evmap_opts_t mo;
    memset(&mo, 0, sizeof(mo));
    mo.max_names = t->conf.max_names;
    mo.max_depth = t->conf.max_depth;
    rc = tlc_evmap_new(&nm, &mo);
    if (rc == 0)
      rc = tlc_evmap_load(nm, &r);
    if (rc != 0) {
      why_set(why, wl, "bad evlog mapping section", TLC_CKPT_HEADER + r.off);
      goto undo;
    }
  }
  if (r.off != r.len) {
    why_set(why, wl, "bytes after the last section", TLC_CKPT_HEADER + r.off);
    rc = TLC_EFRAME;
    goto undo;
  }
  if (nm != NULL) {
    tlc_evmap_free(t->pipe.evmap);
    t->pipe.evmap = nm;
    nm = NULL;
  }
  t->connections = cnt[0];
  t->reconnects = cnt[1];
  t->gaps = cnt[2];
  t->decode_errors = cnt[3];
  t->truncated_tails = cnt[4];
  t->deadline_closes = cnt[5];
  t->dropped_reported = cnt[6];
  t->resyncs_reported = cnt[7];
  t->last_connect_unix_ms = lc;
  t->last_disconnect_unix_ms = ld;
  t->ngaplog = ngaplog;
  memcpy(t->gaplog, gl, sizeof(gl));
  t->pipe.dec.c = dc;
  rc = 0;
  goto out;
undo:
  tlc_evmap_free(nm);
  tlc_engine_clear(t->pipe.engine);
out:
  tlc_free(in);
  return rc;
}
