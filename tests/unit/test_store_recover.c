/* test_store_recover.c - crash recovery and startup: torn tails at every offset of the last
 * three records/blocks (T03), idempotent recovery, bit flips in manifests and data (T04,
 * sampled), a poisoned state directory (T05). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_store_util.h"
#include "testalloc.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

static uv_loop_t loop;

static void write_file(const char *path, const void *p, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, p, n), (ssize_t)n);
  close(fd);
}
static void read_file(const char *path, buf_t *out) {
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  uint8_t tmp[65536];
  ssize_t n;
  while ((n = read(fd, tmp, sizeof tmp)) > 0)
    buf_add(out, tmp, (size_t)n);
  close(fd);
}
static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static void recover_once(const char *dir, tlc_store_recovery_t *sum) {
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = dir;
  o.index_interval = 2;
  assert_int_equal(uv_loop_init(&loop), 0);
  tlc_store_t *s = open_store(&loop, &o, sum);
  close_store(s, &loop);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* record boundaries of a stream */
static size_t boundaries(tlc_format_t f, const buf_t *b, size_t *off, size_t max) {
  size_t n = 0, pos = 0;
  while (pos < b->len && n < max) {
    tlc_rec_t r;
    size_t need;
    assert_int_equal(tlc_scan_record(f, b->p + pos, b->len - pos, 0, &r, &need), 1);
    off[n++] = pos;
    pos += r.len;
  }
  off[n] = pos;
  return n;
}

static void torn_case(tlc_format_t f, const buf_t *stream, size_t cut, size_t whole, int twice) {
  char *st = mk_tmpdir();
  char dir[1200], part[1300], data[1300], torn[1300];
  const char *ext = f == TLC_FMT_EVLOG ? "log" : "txt.BIN";
  snprintf(dir, sizeof dir, "%s/t", st);
  mkdir(dir, 0755);
  snprintf(part, sizeof part, "%s/20260101T000000Z-00000001.%s.part", dir, ext);
  snprintf(data, sizeof data, "%s/20260101T000000Z-00000001.%s", dir, ext);
  snprintf(torn, sizeof torn, "%s.torn", data);
  write_file(part, stream->p, cut);
  tlc_store_recovery_t sum;
  recover_once(st, &sum);
  if (whole == 0) {
    /* no whole record: no segment at all (not a 0-record one) */
    char mf[1300];
    snprintf(mf, sizeof mf, "%s/20260101T000000Z-00000001.manifest", dir);
    assert_int_equal(sum.recovered, 0);
    assert_int_equal(sum.quarantined, 0);
    assert_false(exists(part));
    assert_false(exists(data));
    assert_false(exists(torn));
    assert_false(exists(mf));
    rm_rf(st);
    free(st);
    return;
  }
  assert_int_equal(sum.recovered, 1);
  assert_int_equal(sum.torn_bytes, cut - whole);
  assert_false(exists(part));
  buf_t got = { 0 };
  read_file(data, &got);
  assert_int_equal(got.len, whole);
  if (whole)
    assert_memory_equal(got.p, stream->p, whole);
  buf_free(&got);
  if (cut > whole) {
    read_file(torn, &got);
    assert_int_equal(got.len, cut - whole);
    assert_memory_equal(got.p, stream->p + whole, cut - whole);
    buf_free(&got);
  } else {
    assert_false(exists(torn));
  }
  buf_t seg = { 0 };
  tlc_seginfo_t inf;
  read_segment(data, INT64_MIN, INT64_MAX, &seg, &inf);
  assert_false(inf.rebuilt);
  assert_int_equal(inf.recovered, 1);
  buf_free(&seg);
  if (twice) {
    /* a second start changes nothing */
    recover_once(st, &sum);
    assert_int_equal(sum.recovered, 0);
    assert_int_equal(sum.quarantined, 0);
    assert_int_equal(sum.segments, 1);
    read_file(data, &got);
    assert_int_equal(got.len, whole);
    buf_free(&got);
    /* a crash in the middle of recovery (torn written, .part not yet cut): same result */
    if (cut > whole) {
      char mf[1300];
      snprintf(mf, sizeof mf, "%s/20260101T000000Z-00000001.manifest", dir);
      unlink(data);
      unlink(mf);
      write_file(part, stream->p, cut);
      recover_once(st, &sum);
      assert_int_equal(sum.recovered, 1);
      read_file(data, &got);
      assert_int_equal(got.len, whole);
      buf_free(&got);
      read_file(torn, &got);
      assert_int_equal(got.len, cut - whole);
      buf_free(&got);
    }
  }
  rm_rf(st);
  free(st);
}

static void torn_sweep(tlc_format_t f, const buf_t *stream) {
  size_t off[4096];
  size_t n = boundaries(f, stream, off, 4000);
  assert_true(n >= 4);
  size_t hdr = f == TLC_FMT_EVLOG ? 12 : 24;
  /* cuts: 0, header-1, and every offset of the last 3 records */
  size_t cuts[8192], nc = 0;
  cuts[nc++] = 0;
  cuts[nc++] = hdr - 1;
  for (size_t c = off[n - 3]; c <= stream->len && nc < 8192; c++)
    cuts[nc++] = c;
  for (size_t i = 0; i < nc; i++) {
    size_t cut = cuts[i], whole = 0;
    for (size_t k = 0; k <= n; k++)
      if (off[k] <= cut)
        whole = off[k];
    torn_case(f, stream, cut, whole, i % 9 == 0 || cut == stream->len);
  }
}

static void test_torn_bin11(void **state) {
  (void)state;
  buf_t b = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 20, 4, &b);
  torn_sweep(TLC_FMT_BIN11, &b);
  free(ev);
  buf_free(&b);
}

static void test_torn_evlog(void **state) {
  (void)state;
  evgen_t g;
  evgen_init(&g, 0);
  evgen_random(&g, 4, 24, 2);
  buf_t b = { 0 };
  buf_add(&b, g.buf, g.len);
  torn_sweep(TLC_FMT_EVLOG, &b);
  evgen_free(&g);
  buf_free(&b);
}

/* T06: zero-filled records after the last synced ones (delayed allocation) are not data */
static void test_zero_tail(void **state) {
  (void)state;
  buf_t b = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 10, 4, &b);
  size_t whole = b.len;
  uint8_t z[24 * 3 + 5];
  memset(z, 0, sizeof z);
  buf_add(&b, z, sizeof z);
  torn_case(TLC_FMT_BIN11, &b, b.len, whole, 1);
  free(ev);
  buf_free(&b);
}

/* the segment `data` reads back as `want`, with its manifest as written (not rebuilt) */
static void read_back_whole(const char *data, const buf_t *want) {
  buf_t got = { 0 };
  tlc_seginfo_t inf;
  read_segment(data, INT64_MIN, INT64_MAX, &got, &inf);
  assert_false(inf.rebuilt);
  assert_int_equal(got.len, want->len);
  assert_memory_equal(got.p, want->p, want->len);
  buf_free(&got);
}
/* a sealed bin11 segment made by the store */
static void make_sealed(const char *st, char *data, size_t dl, char *mf, size_t ml) {
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = st;
  o.index_interval = 4;
  assert_int_equal(uv_loop_init(&loop), 0);
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "bf", TLC_FMT_BIN11, &t), 0);
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 40, 8, NULL);
  assert_int_equal(tlc_store_write(t, ev, 40), 0);
  close_store(s, &loop);
  assert_int_equal(uv_loop_close(&loop), 0);
  free(ev);
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/bf", st);
  seglist_t l;
  list_segments(dir, &l, 0);
  assert_int_equal(l.n, 1);
  snprintf(data, dl, "%s/%s", dir, l.name[0]);
  tlc_segname_t sn;
  tlc__segname_parse(l.name[0], &sn);
  snprintf(mf, ml, "%s/%s.manifest", dir, sn.base);
}

static size_t count_dir(const char *dir) {
  size_t n = 0;
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

static void test_bitflips(void **state) {
  (void)state;
  char *st = mk_tmpdir();
  char data[1300], mf[1300], qdir[1300];
  make_sealed(st, data, sizeof data, mf, sizeof mf);
  snprintf(qdir, sizeof qdir, "%s/.quarantine/bf", st);
  buf_t d0 = { 0 }, m0 = { 0 };
  read_file(data, &d0);
  read_file(mf, &m0);
  rng_t r;
  rng_seed(&r, 77);
  /* manifest flips: detected, the bad manifest kept aside, a good one rebuilt, data intact */
  for (int k = 0; k < 64; k++) {
    size_t bit = (size_t)rng_below(&r, m0.len * 8);
    buf_t m = { 0 };
    buf_add(&m, m0.p, m0.len);
    m.p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    write_file(mf, m.p, m.len);
    write_file(data, d0.p, d0.len);
    size_t q0 = count_dir(qdir);
    tlc_store_recovery_t sum;
    recover_once(st, &sum);
    assert_int_equal(sum.quarantined, 1);
    assert_int_equal(sum.rebuilt_manifests, 1);
    assert_int_equal(count_dir(qdir), q0 + 1);
    read_back_whole(data, &d0);
    buf_free(&m);
  }
  /* data flips: detected against the manifest; data and manifest quarantined, never deleted */
  for (int k = 0; k < 32; k++) {
    size_t bit = (size_t)rng_below(&r, d0.len * 8);
    buf_t d = { 0 };
    buf_add(&d, d0.p, d0.len);
    d.p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    write_file(data, d.p, d.len);
    write_file(mf, m0.p, m0.len);
    size_t q0 = count_dir(qdir);
    tlc_store_recovery_t sum;
    recover_once(st, &sum);
    assert_int_equal(sum.quarantined, 2);
    assert_false(exists(data));
    assert_int_equal(count_dir(qdir), q0 + 2);
    buf_free(&d);
  }
  buf_free(&d0);
  buf_free(&m0);
  rm_rf(st);
  free(st);
}

/* Manifests name their checksum kind: new ones `xxh3` (XXH3-64 of the data, here computed by
 * libxxhash in one call against the writer's streaming one), older ones the FNV-1a kinds
 * `fnv1a64w` (over 8-byte words) and `fnv1a64` (byte-wise). Each verifies at start-up (full
 * re-read) without a rebuild, keeps its kind, and catches a data flip. */
static void test_checksum_kinds(void **state) {
  (void)state;
  static const struct {
    int kind;
    const char *line;
  } kinds[] = { { TLC_CSUM_XXH3, "\nxxh3 " },
                { TLC_CSUM_FNV1A64W, "\nfnv1a64w " },
                { TLC_CSUM_FNV1A64, "\nfnv1a64 " } };
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    char *st = mk_tmpdir();
    char data[1300], mf[1300];
    make_sealed(st, data, sizeof data, mf, sizeof mf);
    buf_t d0 = { 0 }, m0 = { 0 };
    read_file(data, &d0);
    read_file(mf, &m0);
    buf_add(&m0, "", 1); /* NUL-terminated for strstr */
    tlc_manifest_t m;
    tlc__manifest_init(&m);
    assert_int_equal(tlc__manifest_load(mf, &m, NULL, 0), 0);
    assert_int_equal(m.csum, TLC_CSUM_XXH3);
    assert_true(strstr((const char *)m0.p, "\nxxh3 ") != NULL);
    assert_true(m.sum == XXH3_64bits(d0.p, d0.len));
    /* the same manifest as an older version wrote it (bin11 records are 24 bytes: per-record
     * word hashing = word hashing of the whole file) */
    m.csum = kinds[k].kind;
    if (kinds[k].kind == TLC_CSUM_FNV1A64W)
      m.sum = tlc__fnv1a_w(TLC_FNV_INIT, d0.p, d0.len);
    else if (kinds[k].kind == TLC_CSUM_FNV1A64)
      m.sum = tlc__fnv1a(TLC_FNV_INIT, d0.p, d0.len);
    assert_int_equal(tlc__manifest_store(mf, &m), 0);
    buf_t m1 = { 0 };
    read_file(mf, &m1);
    buf_add(&m1, "", 1);
    assert_true(strstr((const char *)m1.p, kinds[k].line) != NULL);
    tlc_store_recovery_t sum;
    recover_once(st, &sum);
    assert_int_equal(sum.quarantined, 0);
    assert_int_equal(sum.rebuilt_manifests, 0);
    tlc_manifest_t back;
    tlc__manifest_init(&back);
    assert_int_equal(tlc__manifest_load(mf, &back, NULL, 0), 0);
    assert_int_equal(back.csum, kinds[k].kind);
    assert_true(back.sum == m.sum);
    read_back_whole(data, &d0);
    /* a data flip under this kind: detected, data and manifest quarantined */
    d0.p[d0.len / 2] ^= 0x10;
    write_file(data, d0.p, d0.len);
    recover_once(st, &sum);
    assert_int_equal(sum.quarantined, 2);
    assert_false(exists(data));
    tlc__manifest_fini(&back);
    tlc__manifest_fini(&m);
    buf_free(&d0);
    buf_free(&m0);
    buf_free(&m1);
    rm_rf(st);
    free(st);
  }
}

/* A manifest builder that gets no memory for its XXH3 state falls back to `fnv1a64w` and says
 * so: every allocation of a rebuild failed in turn; each rebuild either fails as a whole or
 * gives the manifest of one kind or the other, each with its right checksum, and the fallback
 * is reached. */
static void test_checksum_no_memory(void **state) {
  (void)state;
  char *st = mk_tmpdir();
  char data[1300], mf[1300];
  make_sealed(st, data, sizeof data, mf, sizeof mf);
  buf_t d0 = { 0 };
  read_file(data, &d0);
  int fell_back = 0, whole_xxh3 = 0;
  for (uint64_t nth = 1; nth < 64; nth++) {
    testalloc_install();
    testalloc_fail_at(nth);
    tlc_manifest_t m;
    tlc__manifest_init(&m);
    uint64_t whole = 0, flen = 0;
    int rc = tlc__manifest_build_file(data, 0, TLC_FMT_BIN11, 0, 0, &m, &whole, &flen);
    uint64_t failed = testalloc_failed();
    int csum = m.csum;
    uint64_t sum = m.sum, records = m.records;
    tlc__manifest_fini(&m);
    assert_int_equal(testalloc_live_blocks(), 0);
    testalloc_uninstall();
    if (rc < 0)
      continue;
    assert_int_equal(records, d0.len / 24);
    if (csum == TLC_CSUM_XXH3) {
      assert_true(sum == XXH3_64bits(d0.p, d0.len));
      if (failed == 0)
        whole_xxh3 = 1;
    } else {
      assert_int_equal(csum, TLC_CSUM_FNV1A64W);
      assert_true(sum == tlc__fnv1a_w(TLC_FNV_INIT, d0.p, d0.len));
      fell_back = 1;
    }
    if (failed == 0)
      break; /* nth is past every allocation of a rebuild */
  }
  assert_true(fell_back);
  assert_true(whole_xxh3);
  buf_free(&d0);
  rm_rf(st);
  free(st);
}

static void test_poisoned(void **state) {
  (void)state;
  char *st = mk_tmpdir();
  char dir[1200], p[1300];
  snprintf(dir, sizeof dir, "%s/p", st);
  mkdir(dir, 0755);
  /* zero-length sealed-looking file */
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000001.txt.BIN", dir);
  write_file(p, "", 0);
  /* header-only evlog block claiming 100 bytes */
  uint8_t hdr[12] = { 0x11, 0xe2, 0xfe, 0x0f, 100, 0, 0, 0, 0, 0, 0, 0 };
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000002.log", dir);
  write_file(p, hdr, sizeof hdr);
  /* random bytes with a capture name */
  uint8_t rnd[100];
  for (size_t i = 0; i < sizeof rnd; i++)
    rnd[i] = (uint8_t)(i * 37 + 11);
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000003.log", dir);
  write_file(p, rnd, sizeof rnd);
  /* a valid manifest whose data is missing (an interrupted deletion) */
  tlc_manifest_t m;
  tlc__manifest_init(&m);
  m.format = TLC_FMT_BIN11;
  snprintf(m.data, sizeof m.data, "20260101T000000Z-00000004.txt.BIN");
  m.index_interval = 4;
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000004.manifest", dir);
  assert_int_equal(tlc__manifest_store(p, &m), 0);
  tlc__manifest_fini(&m);
  /* symlink with a capture name, and a directory with one */
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000005.txt.BIN", dir);
  assert_int_equal(symlink("/etc/passwd", p), 0);
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000006.log", dir);
  mkdir(p, 0755);
  /* an unknown manifest version beside valid data */
  uint8_t recs[48] = { 0 };
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000007.txt.BIN", dir);
  write_file(p, recs, sizeof recs);
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000007.manifest", dir);
  write_file(p, "tlcap-manifest 9\n", 17);
  /* an interrupted compression (both plain and .zst) and leftovers of interrupted writes */
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000007.txt.BIN.zst", dir);
  write_file(p, "junk", 4);
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000007.manifest.tmp", dir);
  write_file(p, "junk", 4);
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000007.txt.BIN.zst.part", dir);
  write_file(p, "junk", 4);
  /* foreign files */
  snprintf(p, sizeof p, "%s/notes.txt", dir);
  write_file(p, "keep me\n", 8);
  snprintf(p, sizeof p, "%s/README", st);
  write_file(p, "keep me too\n", 12);
  tlc_store_recovery_t sum;
  recover_once(st, &sum);
  assert_int_equal(sum.foreign, 2);
  assert_int_equal(sum.completed_deletions, 1);
  assert_int_equal(sum.rebuilt_manifests, 1);
  /* 1 (zero-length), 2 (torn block), 3 (random), 5 (symlink), 6 (dir), 7's bad manifest */
  assert_int_equal(sum.quarantined, 6);
  snprintf(p, sizeof p, "%s/notes.txt", dir);
  assert_true(exists(p));
  snprintf(p, sizeof p, "%s/README", st);
  assert_true(exists(p));
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000007.txt.BIN.zst", dir);
  assert_false(exists(p));
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000007.manifest.tmp", dir);
  assert_false(exists(p));
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000007.txt.BIN.zst.part", dir);
  assert_false(exists(p));
  snprintf(p, sizeof p, "%s/20260101T000000Z-00000007.txt.BIN", dir);
  assert_true(exists(p));
  snprintf(p, sizeof p, "%s/.quarantine/p/20260101T000000Z-00000005.txt.BIN", st);
  struct stat sb;
  assert_int_equal(lstat(p, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode)); /* moved, never followed */
  assert_int_equal(stat("/etc/passwd", &sb), 0);
  /* the store keeps working there, with a higher sequence */
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = st;
  assert_int_equal(uv_loop_init(&loop), 0);
  tlc_store_t *s = open_store(&loop, &o, &sum);
  assert_int_equal(sum.quarantined, 0);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "p", TLC_FMT_BIN11, &t), 0);
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 5, 1, NULL);
  assert_int_equal(tlc_store_write(t, ev, 5), 0);
  close_store(s, &loop);
  assert_int_equal(uv_loop_close(&loop), 0);
  free(ev);
  seglist_t l;
  list_segments(dir, &l, 0);
  assert_int_equal(l.n, 2);
  assert_int_equal(l.seq[0], 7);
  assert_int_equal(l.seq[1], 8);
  rm_rf(st);
  free(st);
}

int main(int argc, char **argv) {
  if (argc > 1)
    cmocka_set_test_filter(argv[1]); /* e.g. "test_roundtrip_*" */
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_torn_bin11),         cmocka_unit_test(test_torn_evlog),
    cmocka_unit_test(test_zero_tail),          cmocka_unit_test(test_bitflips),
    cmocka_unit_test(test_poisoned),           cmocka_unit_test(test_checksum_kinds),
    cmocka_unit_test(test_checksum_no_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
