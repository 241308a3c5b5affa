/* recovery.c - recovery of the state directory at start (calling thread, before the writer starts)
 * (see the design note in store.c).
 */
#include "store/store.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log_level.h"
#include "formats/bin1x.h"
#include "formats/dec.h"
#include "formats/evlog.h"
#include "store/seg/iofault.h"
#include "store/seg/segread.h"
#include "store/store-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

/* ---- recovery (calling thread, before the writer starts) ---- */

typedef struct rent {
  char name[TLC_SEG_NAME_MAX];
  tlc_segname_t sn;
  int gone;
} rent_t;

static void quarantine(tlc_store_t *s, const char *target, const char *dir, const char *name,
                       const char *why, tlc_store_recovery_t *sum) {
  char qdir[1200], from[1200], to[1400];
  snprintf(qdir, sizeof qdir, "%s/%s", s->state_dir, TLC_QUARANTINE_DIR);
  tlc__store_ensure_dir(qdir);
  snprintf(qdir, sizeof qdir, "%s/%s/%s", s->state_dir, TLC_QUARANTINE_DIR, target);
  tlc__store_ensure_dirs(qdir, strlen(s->state_dir) + 1 + strlen(TLC_QUARANTINE_DIR));
  snprintf(from, sizeof from, "%s/%s", dir, name);
  snprintf(to, sizeof to, "%s/%s", qdir, name);
  struct stat st;
  for (int i = 1; i < 1000 && lstat(to, &st) == 0; i++)
    snprintf(to, sizeof to, "%s/%s.%d", qdir, name, i);
  int rc = tlc_io->rename(from, to);
  if (rc < 0) {
    tlc__store_log_direct(s, TLC_LOG_ERR, "%s: cannot quarantine %s (%s): %s; left in place",
                          target, from, why, tlc_strerror(rc));
    return;
  }
  sum->quarantined++;
  LOCKED(s, s->c.quarantined++);
  tlc__store_log_direct(s, TLC_LOG_WARN, "%s: quarantined %s -> %s: %s", target, from, to, why);
  if (s->o.event_cb) {
    tlc_store_event_t ev = { TLC_SEV_QUARANTINED, target, to, 0, 0 };
    s->o.event_cb(s->o.event_ud, &ev);
  }
}

static rent_t *find_ent(rent_t *v, size_t n, const char *base, int kind) {
  for (size_t i = 0; i < n; i++)
    if (!v[i].gone && v[i].sn.kind == kind && strcmp(v[i].sn.base, base) == 0)
      return &v[i];
  return NULL;
}

static void catalog_sealed(tlc_store_t *s, const char *target, const char *dir,
                           const tlc_segname_t *sn, const tlc_manifest_t *m, int compressed) {
  tlc_catent_t e;
  memset(&e, 0, sizeof e);
  snprintf(e.target, sizeof e.target, "%s", target);
  snprintf(e.base, sizeof e.base, "%s", sn->base);
  tlc__segname_data(e.data, sizeof e.data, sn->base, sn->evlog ? TLC_FMT_EVLOG : TLC_FMT_BIN11,
                    sn->xml);
  e.seq = sn->seq;
  e.opened_wall_ns = m->opened_wall_ns;
  e.closed_wall_ns = m->closed_wall_ns;
  e.compressed = compressed;
  e.bytes = tlc__segment_disk_bytes(dir, e.base, e.data);
  tlc__catalog_add(&s->cat, &e);
}

/* recovery: a sealed bin1x segment without its main export. Kept for the writer until a target
 * of its name is configured (at most max_deferred_exports), or written now without settings. */
static void rx_add(tlc_store_t *s, const char *target, const tlc_segname_t *sn, tlc_format_t f,
                   int recovered, tlc_store_recovery_t *sum) {
  char data[TLC_SEG_NAME_MAX];
  tlc__segname_data(data, sizeof data, sn->base, f, sn->xml);
  pend_t *p = tlc__store_pend_new(target, sn->base, data, f, sn->xml, sn->seq, recovered);
  if (!p)
    return; /* the next start tries again */
  tlc__store_pend_want_export(s, p);
  if (s->w.nrx < s->o.max_deferred_exports) {
    TAILQ_INSERT_TAIL(&s->w.rx, p, link);
    s->w.nrx++;
    sum->exports_deferred++;
    return;
  }
  sum->exports_unset++;
  if (tlc__store_pend_try(s, p))
    tlc__store_pend_free(s, p);
  else
    tlc__store_pend_keep(s, p); /* the file system is full: written when space returns */
}

/* recovery: the main export a sealed bin1x segment with records needs (export_cb set): when it
 * is missing, rx_add; when it is there but the manifest `m` (the segment's, valid) does not name
 * it (a crash after the export was written late, before the manifest), the manifest names it */
static void export_check(tlc_store_t *s, const char *target, const char *dir,
                         const tlc_segname_t *sn, tlc_format_t f, tlc_manifest_t *m,
                         tlc_store_recovery_t *sum) {
  char xname[TLC_SEG_NAME_MAX], p[1300];
  struct stat st;
  if (!s->o.export_cb || f == TLC_FMT_EVLOG || m->records == 0)
    return;
  snprintf(xname, sizeof xname, "%s%s", sn->base, sn->xml ? ".xml" : ".txt");
  snprintf(p, sizeof p, "%s/%s", dir, xname);
  if (lstat(p, &st) != 0) {
    rx_add(s, target, sn, f, m->recovered, sum);
    return;
  }
  if (strcmp(m->exportf, xname) != 0) {
    snprintf(m->exportf, sizeof m->exportf, "%s", xname);
    snprintf(p, sizeof p, "%s/%s.manifest", dir, sn->base);
    tlc__manifest_store(p, m);
  }
}

/* One target directory being recovered: its entries (rent_t, marked gone once handled), the
 * summary, and a manifest for scratch. The steps below run in this order, each over the entries
 * the steps before it left. */
typedef struct rdir {
  tlc_store_t *s;
  const char *target;
  char dir[1100];
  tlc_store_recovery_t *sum;
  rent_t *v;
  size_t n;
  tlc_manifest_t m;
  tlc_format_t fmt; /* the directory's bin1x flavour (rdir_format) */
} rdir_t;

static void rdir_quarantine(rdir_t *r, const char *name, const char *why) {
  quarantine(r->s, r->target, r->dir, name, why, r->sum);
}

/* marks the entry of `base` of that kind handled, if there is one; returns it */
static rent_t *rdir_take(rdir_t *r, const char *base, int kind) {
  rent_t *x = find_ent(r->v, r->n, base, kind);
  if (x)
    x->gone = 1;
  return x;
}

/* Lists the directory's entries of ours (others are counted as foreign, never touched).
 * 0, or -1 when the directory cannot be read (logged). */
static int rdir_list(rdir_t *r) {
  DIR *d = opendir(r->dir);
  size_t cap = 0;
  struct dirent *de;
  if (!d) {
    tlc__store_log_direct(r->s, TLC_LOG_ERR, "%s: cannot read %s: %s", r->target, r->dir,
                          strerror(errno));
    return -1;
  }
  while ((de = readdir(d)) != NULL && r->n < 1000000) {
    tlc_segname_t sn;
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (tlc__segname_parse(de->d_name, &sn) == TLC_SK_NONE) {
      r->sum->foreign++;
      continue; /* not ours: never touched */
    }
    if (r->n == cap) {
      rent_t *nv = tlc_grow(r->v, &cap, r->n + 1, sizeof *nv, 64);
      if (!nv)
        break;
      r->v = nv;
    }
    tlc__path(r->v[r->n].name, sizeof r->v[r->n].name, "%s", de->d_name);
    r->v[r->n].sn = sn;
    r->v[r->n].gone = 0;
    r->n++;
  }
  closedir(d);
  return 0;
}

/* Step A: what is not a regular file of ours is quarantined; leftovers of interrupted writes
 * (.tmp, .zst.part) are removed. */
static void rdir_sweep(rdir_t *r) {
  char p[1300];
  uid_t me = geteuid();
  for (size_t i = 0; i < r->n; i++) {
    rent_t *e = &r->v[i];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", r->dir, e->name);
    if (lstat(p, &st) < 0) {
      e->gone = 1;
      continue;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != me) {
      rdir_quarantine(r, e->name,
                      S_ISLNK(st.st_mode)    ? "a symlink with a capture name"
                      : S_ISDIR(st.st_mode)  ? "a directory with a capture name"
                      : !S_ISREG(st.st_mode) ? "not a regular file"
                                             : "owned by another user");
      e->gone = 1;
    } else if (e->sn.kind == TLC_SK_TMP || e->sn.kind == TLC_SK_ZSTPART) {
      tlc_io->unlink(p);
      e->gone = 1;
    }
  }
}

/* The target's bin1x flavour (bin10 or bin11 cannot be told apart from the bytes with
 * certainty): taken from its newest valid manifest, for files that have none. */
static void rdir_format(rdir_t *r) {
  char p[1300];
  uint64_t best = 0;
  r->fmt = TLC_FMT_NONE;
  for (size_t i = 0; i < r->n; i++) {
    rent_t *e = &r->v[i];
    if (e->gone || e->sn.kind != TLC_SK_MANIFEST || (r->fmt && e->sn.seq < best))
      continue;
    snprintf(p, sizeof p, "%s/%s", r->dir, e->name);
    if (tlc__manifest_load(p, &r->m, NULL, 0) == 0 && r->m.format != TLC_FMT_EVLOG) {
      r->fmt = r->m.format;
      best = e->sn.seq;
    }
  }
}

/* The format of a .part: evlog by its name; bin1x from its own manifest, else the directory's
 * flavour, else what the reader finds in its bytes (bin11 when it cannot tell). */
static tlc_format_t part_format(rdir_t *r, const rent_t *e) {
  char p[1300], why[300];
  tlc_manifest_t mm;
  tlc_format_t f;
  if (e->sn.evlog)
    return TLC_FMT_EVLOG;
  tlc__manifest_init(&mm);
  snprintf(p, sizeof p, "%s/%s.manifest", r->dir, e->sn.base);
  if (tlc__manifest_load(p, &mm, NULL, 0) == 0 && mm.format != TLC_FMT_EVLOG)
    f = mm.format;
  else if (r->fmt != TLC_FMT_NONE)
    f = r->fmt;
  else {
    tlc_segread_t *rd;
    snprintf(p, sizeof p, "%s/%s", r->dir, e->name);
    f = TLC_FMT_BIN11;
    if (tlc_segread_open(p, TLC_FMT_NONE, 0, &rd, why, sizeof why) == 0) {
      tlc_seginfo_t inf;
      tlc_segread_info(rd, &inf);
      f = inf.format;
      tlc_segread_close(rd);
    }
  }
  tlc__manifest_fini(&mm);
  return f;
}

/* One .part: sealed with its whole-record prefix (torn tail aside), or removed when it held no
 * whole record, or quarantined when it cannot be recovered. */
static void rdir_part(rdir_t *r, rent_t *e, int last) {
  tlc_store_t *s = r->s;
  const tlc_segname_t *sn = &e->sn;
  char why[300];
  if (find_ent(r->v, r->n, sn->base, TLC_SK_DATA) || find_ent(r->v, r->n, sn->base, TLC_SK_ZST)) {
    rdir_quarantine(r, e->name, "a .part beside a sealed file of the same name");
    e->gone = 1;
    return;
  }
  tlc_format_t f = part_format(r, e);
  uint64_t torn = 0;
  int rc = tlc__segment_recover_part(r->dir, r->target, sn, f, s->o.index_interval, s->o.max_block,
                                     last, &r->m, &torn);
  e->gone = 1;
  if (rc < 0) {
    snprintf(why, sizeof why, "recovery failed: %s", tlc_strerror(rc));
    rdir_quarantine(r, e->name, why);
    return;
  }
  /* its manifest, export and torn tail are accounted for (removed with it when rc == 1) */
  rdir_take(r, sn->base, TLC_SK_MANIFEST);
  rdir_take(r, sn->base, TLC_SK_EXPORT);
  rdir_take(r, sn->base, TLC_SK_TORN);
  if (rc == 1) {
    tlc__store_log_direct(s, 5, "%s: %s/%s held no whole record (%" PRIu64 " bytes): removed",
                          r->target, r->dir, e->name, torn);
    return;
  }
  rdir_take(r, sn->base, TLC_SK_SKIPPED);
  rdir_take(r, sn->base, TLC_SK_WIDX);
  r->sum->recovered++;
  r->sum->torn_bytes += torn;
  LOCKED(s, s->c.segments_recovered++; s->c.torn_bytes += torn);
  tlc__store_log_direct(s, TLC_LOG_NOTICE,
                        "%s: recovered %s/%s: %" PRIu64 " records kept, %" PRIu64
                        " torn bytes moved aside",
                        r->target, r->dir, e->name, r->m.records, torn);
  catalog_sealed(s, r->target, r->dir, sn, &r->m, 0);
  export_check(s, r->target, r->dir, sn, f, &r->m, r->sum);
  r->sum->segments++;
}

/* Step B: the .part files, newest first: the newest one kept is the target's last segment
 * before the crash (a newer one that held no whole record is removed), whose end is a gap. */
static void rdir_parts(rdir_t *r) {
  int last = 1;
  for (;;) {
    rent_t *top = NULL;
    for (size_t i = 0; i < r->n; i++)
      if (!r->v[i].gone && r->v[i].sn.kind == TLC_SK_PART && (!top || r->v[i].sn.seq > top->sn.seq))
        top = &r->v[i];
    if (!top)
      return;
    /* a sealed segment newer than it: that one ended the stream (a .part left behind by an
     * earlier crash is older) */
    for (size_t i = 0; i < r->n && last; i++)
      if (!r->v[i].gone && r->v[i].sn.seq > top->sn.seq &&
          (r->v[i].sn.kind == TLC_SK_DATA || r->v[i].sn.kind == TLC_SK_ZST))
        last = 0;
    uint64_t before = r->sum->recovered;
    rdir_part(r, top, last);
    if (r->sum->recovered != before)
      last = 0;
  }
}

/* A sealed segment whose manifest is unusable: the manifest is quarantined and rebuilt from the
 * data (`p`, zst: compressed), the segment catalogued. 0 or a negative error. */
static int sealed_rebuild(rdir_t *r, const rent_t *e, const char *p, int zst, tlc_format_t f,
                          const char *bad, rent_t *mf, const rent_t *ex) {
  tlc_store_t *s = r->s;
  const tlc_segname_t *sn = &e->sn;
  char wbuf[200], mp[1300];
  uint64_t whole, flen;
  tlc__path(wbuf, sizeof wbuf, "manifest unusable (%s): rebuilt from the data", bad);
  if (mf) {
    rdir_quarantine(r, mf->name, wbuf);
    mf->gone = 1;
  }
  int rc = tlc__manifest_build_file(p, zst, f, s->o.index_interval, s->o.max_block, &r->m, &whole,
                                    &flen);
  if (rc != 0)
    return rc;
  r->m.rebuilt = 1;
  r->m.seq = sn->seq;
  r->m.reason = TLC_ROT_RECOVERED;
  r->m.closed_wall_ns = tlc__store_wall(s);
  snprintf(r->m.target, sizeof r->m.target, "%s", r->target);
  tlc__segname_data(r->m.data, sizeof r->m.data, sn->base, f, sn->xml);
  if (ex)
    snprintf(r->m.exportf, sizeof r->m.exportf, "%s", ex->name);
  snprintf(mp, sizeof mp, "%s/%s.manifest", r->dir, sn->base);
  tlc__manifest_store(mp, &r->m);
  r->sum->rebuilt_manifests++;
  tlc__store_log_direct(s, TLC_LOG_WARN, "%s: %s: %s", r->target, p, wbuf);
  catalog_sealed(s, r->target, r->dir, sn, &r->m, zst);
  export_check(s, r->target, r->dir, sn, f, &r->m, r->sum);
  r->sum->segments++;
  return 0;
}

/* A sealed segment that does not pass: it is quarantined with its manifest, export and skipped
 * bytes. */
static void sealed_quarantine(rdir_t *r, const rent_t *e, const char *why, rent_t *mf, rent_t *ex) {
  rdir_quarantine(r, e->name, why);
  if (mf && !mf->gone) {
    rdir_quarantine(r, mf->name, "manifest of a quarantined segment");
    mf->gone = 1;
  }
  if (ex) {
    rdir_quarantine(r, ex->name, "export of a quarantined segment");
    ex->gone = 1;
  }
  rent_t *sk = find_ent(r->v, r->n, e->sn.base, TLC_SK_SKIPPED);
  if (sk) {
    rdir_quarantine(r, sk->name, "skipped bytes of a quarantined segment");
    sk->gone = 1;
  }
}

/* One sealed data file (plain or .zst): checked against its manifest (every byte unless
 * quick_start) and catalogued, its manifest rebuilt when unusable, or quarantined. */
static void rdir_sealed(rdir_t *r, rent_t *e) {
  tlc_store_t *s = r->s;
  const tlc_segname_t *sn = &e->sn;
  char p[1300], why[300];
  int zst = sn->kind == TLC_SK_ZST;
  snprintf(p, sizeof p, "%s/%s", r->dir, e->name);
  if (zst && find_ent(r->v, r->n, sn->base, TLC_SK_DATA)) {
    tlc_io->unlink(p); /* compression interrupted after its rename: plain is authoritative */
    e->gone = 1;
    return;
  }
  rent_t *mf = find_ent(r->v, r->n, sn->base, TLC_SK_MANIFEST);
  rent_t *ex = find_ent(r->v, r->n, sn->base, TLC_SK_EXPORT);
  tlc_segread_t *rd;
  why[0] = 0;
  int rc = tlc_segread_open(p, sn->evlog ? TLC_FMT_EVLOG : r->fmt,
                            s->o.quick_start ? 0 : TLC_SEGREAD_VERIFY, &rd, why, sizeof why);
  if (rc == 0) {
    tlc_seginfo_t inf;
    tlc_segread_info(rd, &inf);
    tlc_segread_close(rd);
    if (inf.records == 0 && inf.rebuilt) {
      rc = TLC_EFRAME;
      tlc__path(why, sizeof why, "%s: empty data file without a manifest", p);
    } else if (inf.rebuilt) {
      rc = sealed_rebuild(r, e, p, zst, inf.format, inf.why, mf, ex);
    } else {
      tlc_manifest_t mm;
      char mp[1300];
      tlc__manifest_init(&mm);
      snprintf(mp, sizeof mp, "%s/%s.manifest", r->dir, sn->base);
      tlc__manifest_load(mp, &mm, NULL, 0);
      catalog_sealed(s, r->target, r->dir, sn, &mm, zst);
      export_check(s, r->target, r->dir, sn, mm.format, &mm, r->sum);
      tlc__manifest_fini(&mm);
      r->sum->segments++;
    }
  }
  if (rc < 0)
    sealed_quarantine(r, e, why[0] ? why : tlc_strerror(rc), mf, ex);
  e->gone = 1;
  if (mf)
    mf->gone = 1;
  if (ex)
    ex->gone = 1;
  rdir_take(r, sn->base, TLC_SK_TORN);
  rdir_take(r, sn->base, TLC_SK_SKIPPED);
}

/* Step C: the sealed data files. */
static void rdir_sealed_all(rdir_t *r) {
  for (size_t i = 0; i < r->n; i++)
    if (!r->v[i].gone && (r->v[i].sn.kind == TLC_SK_DATA || r->v[i].sn.kind == TLC_SK_ZST))
      rdir_sealed(r, &r->v[i]);
}

/* Step D: manifests, exports and skipped bytes left without data are an interrupted deletion,
 * completed (a manifest that is not valid is quarantined instead). */
static void rdir_orphans(rdir_t *r) {
  char p[1300], why[300];
  for (size_t i = 0; i < r->n; i++) {
    rent_t *e = &r->v[i];
    if (!e->gone && e->sn.kind == TLC_SK_WIDX) {
      /* an open segment's arrival index left by a crash after its seal (the manifest has it),
       * or by an interrupted deletion */
      snprintf(p, sizeof p, "%s/%s", r->dir, e->name);
      tlc_io->unlink(p);
      e->gone = 1;
      continue;
    }
    if (e->gone || (e->sn.kind != TLC_SK_MANIFEST && e->sn.kind != TLC_SK_EXPORT &&
                    e->sn.kind != TLC_SK_SKIPPED))
      continue;
    snprintf(p, sizeof p, "%s/%s", r->dir, e->name);
    e->gone = 1;
    if (e->sn.kind == TLC_SK_MANIFEST && tlc__manifest_load(p, &r->m, why, sizeof why) < 0) {
      rdir_quarantine(r, e->name, "manifest without data, and not valid");
      continue;
    }
    tlc_io->unlink(p);
    r->sum->completed_deletions++;
    tlc__store_log_direct(r->s, TLC_LOG_NOTICE, "%s: completed an interrupted deletion: removed %s",
                          r->target, p);
  }
}

/* Recovers one target directory: steps A (sweep), B (.part files), C (sealed data), D (orphans),
 * then fsyncs the directory. */
static void recover_dir(tlc_store_t *s, const char *target, tlc_store_recovery_t *sum) {
  rdir_t r;
  memset(&r, 0, sizeof r);
  r.s = s;
  r.target = target;
  r.sum = sum;
  snprintf(r.dir, sizeof r.dir, "%s/%s", s->state_dir, target);
  if (rdir_list(&r) != 0)
    return;
  tlc__manifest_init(&r.m);
  rdir_sweep(&r);
  rdir_format(&r);
  rdir_parts(&r);
  rdir_sealed_all(&r);
  rdir_orphans(&r);
  tlc__manifest_fini(&r.m);
  tlc_free(r.v);
  tlc_io_fsync_dir(r.dir);
}

int tlc_store_recover(tlc_store_t *s, tlc_store_recovery_t *sum) {
  tlc_store_recovery_t local;
  if (!sum)
    sum = &local;
  memset(sum, 0, sizeof *sum);
  if (s->thr_started)
    return TLC_EINVAL;
  DIR *d = opendir(s->state_dir);
  if (!d)
    return -errno;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL && n < 100000) {
    const char *nm = de->d_name;
    if (nm[0] == '.')
      continue; /* ., .., .quarantine and hidden files */
    char p[1200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", s->state_dir, nm);
    if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
      sum->foreign++;
      continue; /* files and symlinks at the top are not ours */
    }
    if (n == cap) {
      char **nn = tlc_grow(names, &cap, n + 1, sizeof *nn, 16);
      if (!nn)
        break;
      names = nn;
    }
    names[n] = tlc_strndup(nm, strlen(nm));
    if (names[n])
      n++;
  }
  closedir(d);
  /* An efl source's targets "SOURCE/APP" are directories inside the directory SOURCE (which
   * holds nothing else of ours, or the segments of a target named SOURCE): recovered as
   * targets "SOURCE/APP". Only one level: target names have at most one '/'. */
  for (size_t i = 0, top = n; i < top && n < 100000; i++) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", s->state_dir, names[i]);
    DIR *sd = opendir(p);
    if (!sd)
      continue;
    while ((de = readdir(sd)) != NULL && n < 100000) {
      char sub[1200], full[2400];
      struct stat st;
      if (de->d_name[0] == '.')
        continue;
      snprintf(sub, sizeof sub, "%s/%s", names[i], de->d_name);
      snprintf(full, sizeof full, "%s/%s", s->state_dir, sub);
      if (!tlc__store_target_name_ok(sub) || lstat(full, &st) < 0 || !S_ISDIR(st.st_mode))
        continue;
      if (n == cap) {
        size_t nc = cap * 2;
        char **nn = tlc_realloc(names, nc * sizeof *nn);
        if (!nn)
          break;
        names = nn;
        cap = nc;
      }
      names[n] = tlc_strndup(sub, strlen(sub));
      if (names[n])
        n++;
    }
    closedir(sd);
  }
  for (size_t i = 0; i < n; i++) {
    if (strlen(names[i]) <= TLC_TARGET_NAME_MAX_) {
      sum->targets++;
      recover_dir(s, names[i], sum);
    }
    tlc_free(names[i]);
  }
  tlc_free(names);
  /* first retention pass, here, before anything is written */
  tlc_retention_t r;
  tlc__store_fill_retention(s, &r); /* deletions are logged through the result queue */
  uv_mutex_lock(&s->cat.mu);
  size_t before = s->cat.n;
  uv_mutex_unlock(&s->cat.mu);
  tlc__retention_run(&s->cat, &r);
  s->retain_live = 1;
  uv_mutex_lock(&s->cat.mu);
  sum->deleted = before - s->cat.n;
  uv_mutex_unlock(&s->cat.mu);
  tlc__store_update_stored(s);
  s->rx_any = s->w.nrx > 0;
  if (sum->exports_deferred > 0)
    tlc__store_log_direct(s, TLC_LOG_INFO,
                          "%" PRIu64
                          " segment(s) found without their main export: written once a target of "
                          "their name is configured (at shutdown without its settings)",
                          sum->exports_deferred);
  if (sum->exports_unset > 0)
    tlc__store_log_direct(
        s, TLC_LOG_WARN,
        "%" PRIu64 " segment(s) found without their main export beyond the %" PRIu32
        " that wait for their target: exported now, without the target's settings",
        sum->exports_unset, s->o.max_deferred_exports);
  /* segments sealed but not compressed before a restart: compressed now, by the worker's
   * export lane (no memory for a job: at the next start) */
  if (s->o.compress) {
    char path[1200];
    uv_mutex_lock(&s->cat.mu);
    for (size_t i = 0; i < s->cat.n; i++) {
      const tlc_catent_t *e = &s->cat.v[i];
      if (e->compressed)
        continue;
      tlc__path(path, sizeof path, "%s/%s/%s", s->state_dir, e->target, e->data);
      tlc__store_queue_compress(s, e->target, e->seq, path);
    }
    uv_mutex_unlock(&s->cat.mu);
  }
  int rc = tlc__store_start_worker(s);
  if (rc < 0)
    return rc;
  rc = uv_thread_create(&s->thr, tlc__store_writer_main, s);
  if (rc < 0) {
    tlc__store_stop_worker(s);
    return rc;
  }
  s->thr_started = 1;
  return 0;
}
