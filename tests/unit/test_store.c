/* test_store.c - storage: bytes on disk == bytes sent (bin10, bin11, evlog, tiny rotation
 * sizes), manifests and index, time-range reads, zstd, the writer queue's cap, disk full,
 * EINTR/short-write storms, fsync failure, retention with an injected clock, sealing off the
 * append path (a stuck seal, the max_sealing bound). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "store/policy/export.h"
#include "test_store_util.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static uv_loop_t loop;
static char *tmp;

static int setup(void **state) {
  (void)state;
  tmp = mk_tmpdir();
  uv_loop_init(&loop);
  faults_install();
  return 0;
}
static int teardown(void **state) {
  (void)state;
  f_hold_sync(0); /* a test failed while fdatasync was held: the sealer must not wait on */
  faults_remove();
  assert_int_equal(uv_loop_close(&loop), 0);
  if (!getenv("TLC_TEST_KEEP"))
    rm_rf(tmp);
  free(tmp);
  return 0;
}

/* a store with the default options in tmp and one target open in it */
static tlc_store_t *store_one(const char *name, tlc_format_t f, tlc_store_target_t **t) {
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  assert_int_equal(tlc_store_target_open(s, name, f, t), 0);
  return s;
}

static void tdir(char *out, size_t n, const char *target) {
  snprintf(out, n, "%s/%s", tmp, target);
}

/* the target's segments hold exactly `want` */
static void assert_stored(const char *target, const buf_t *want) {
  char d[1200];
  tdir(d, sizeof d, target);
  buf_t got = { 0 };
  read_all(d, &got, NULL);
  assert_int_equal(got.len, want->len);
  assert_memory_equal(got.p, want->p, want->len);
  buf_free(&got);
}

/* the manifest the writer built from the records' descriptors (the decoder's lengths, times and
 * item counts) equals one rebuilt by scanning the sealed data file */
static void manifests_match_scan(const char *dir, tlc_format_t f, uint32_t interval) {
  seglist_t l;
  list_segments(dir, &l, 0);
  assert_true(l.n > 0);
  for (size_t i = 0; i < l.n; i++) {
    char p[1200], mp[1300];
    tlc_segname_t sn;
    tlc__segname_parse(l.name[i], &sn);
    snprintf(p, sizeof p, "%s/%s", dir, l.name[i]);
    snprintf(mp, sizeof mp, "%s/%s.manifest", dir, sn.base);
    tlc_manifest_t got, scan;
    tlc__manifest_init(&got);
    tlc__manifest_init(&scan);
    assert_int_equal(tlc__manifest_load(mp, &got, NULL, 0), 0);
    uint64_t whole, flen;
    assert_int_equal(tlc__manifest_build_file(p, 0, f, interval, 0, &scan, &whole, &flen), 0);
    assert_int_equal(whole, flen);
    assert_int_equal(got.bytes, scan.bytes);
    assert_int_equal(got.records, scan.records);
    assert_int_equal(got.items, scan.items);
    assert_int_equal(got.sum, scan.sum);
    if (scan.records > 0) {
      assert_int_equal(got.first_time, scan.first_time);
      assert_int_equal(got.last_time, scan.last_time);
      assert_int_equal(got.min_time, scan.min_time);
      assert_int_equal(got.max_time, scan.max_time);
    }
    assert_int_equal(got.nidx, scan.nidx);
    for (size_t k = 0; k < scan.nidx; k++) {
      assert_int_equal(got.idx[k].record, scan.idx[k].record);
      assert_int_equal(got.idx[k].offset, scan.idx[k].offset);
      assert_int_equal(got.idx[k].time, scan.idx[k].time);
      assert_int_equal(got.idx[k].maxb, scan.idx[k].maxb);
      assert_int_equal(got.idx[k].mina, scan.idx[k].mina);
    }
    tlc__manifest_fini(&got);
    tlc__manifest_fini(&scan);
  }
}

/* bytes on disk == bytes sent; every segment <= max; manifests verify; no .part left */
static void roundtrip_bin(tlc_format_t f) {
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 10 + 5;
  o.index_interval = 4;
  o.export_cb = tlc_stpol_main_export;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "probe1", f, &t), 0);
  buf_t want = { 0 };
  size_t n = 1003;
  tlc_event_t *ev = gen_bin(f, n, 7, &want);
  for (size_t i = 0; i < n; i += 37)
    assert_int_equal(tlc_store_write(t, ev + i, n - i < 37 ? n - i : 37), 0);
  barrier(s, &loop);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.records_in, n);
  assert_int_equal(c.records_written, n);
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "probe1");
  buf_t got = { 0 };
  size_t nseg;
  read_all(d, &got, &nseg);
  assert_int_equal(nseg, (n + 9) / 10);
  assert_int_equal(got.len, want.len);
  assert_memory_equal(got.p, want.p, want.len);
  assert_int_equal(count_kind(d, TLC_SK_PART), 0);
  assert_int_equal(count_kind(d, TLC_SK_MANIFEST), nseg);
  manifests_match_scan(d, f, 4);
  /* each segment stands alone: a main export with that segment's statistics beside it */
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), nseg);
  seglist_t l;
  list_segments(d, &l, 0);
  tlc_segname_t sn;
  tlc__segname_parse(l.name[0], &sn);
  char xp[1300];
  snprintf(xp, sizeof xp, "%s/%s.txt", d, sn.base);
  FILE *fp = fopen(xp, "r");
  assert_non_null(fp);
  char line[256];
  int stats = 0;
  while (fgets(line, sizeof line, fp))
    if (strstr(line, "STATISTICS("))
      stats = 1;
  fclose(fp);
  assert_true(stats);
  buf_free(&got);
  buf_free(&want);
  free(ev);
}

static void test_roundtrip_bin11(void **state) {
  (void)state;
  roundtrip_bin(TLC_FMT_BIN11);
}
static void test_roundtrip_bin10(void **state) {
  (void)state;
  roundtrip_bin(TLC_FMT_BIN10);
}

static void test_roundtrip_evlog(void **state) {
  (void)state;
  evgen_t g;
  evgen_init(&g, EVGEN_STALE_PAD);
  evgen_random(&g, 11, 3000, 17);
  evgen_t g2;
  evgen_init(&g2, EVGEN_MAGIC_BE | EVGEN_STALE_PAD);
  evgen_random(&g2, 12, 500, 5);
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 8192;
  o.index_interval = 3;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t, *t2;
  assert_int_equal(tlc_store_target_open(s, "efl", TLC_FMT_EVLOG, &t), 0);
  assert_int_equal(tlc_store_target_open(s, "efl-be", TLC_FMT_EVLOG, &t2), 0);
  feed_stream(t, TLC_FMT_EVLOG, g.buf, g.len, 1000);
  feed_stream(t2, TLC_FMT_EVLOG, g2.buf, g2.len, 333);
  barrier(s, &loop);
  tlc_store_target_counters_t tc;
  tlc_store_target_counters(t2, &tc);
  if (getenv("TLC_TEST_VERBOSE"))
    fprintf(stderr, "in %llu/%llu written %llu/%llu dropped %llu gen blocks %llu\n",
            (unsigned long long)tc.records_in, (unsigned long long)tc.bytes_in,
            (unsigned long long)tc.records_written, (unsigned long long)tc.bytes_written,
            (unsigned long long)tc.dropped_records, (unsigned long long)g2.blocks);
  close_store(s, &loop);
  char d[1200];
  buf_t got = { 0 };
  size_t nseg;
  tdir(d, sizeof d, "efl");
  read_all(d, &got, &nseg);
  assert_true(nseg > 3);
  assert_int_equal(got.len, g.len);
  assert_memory_equal(got.p, g.buf, g.len);
  manifests_match_scan(d, TLC_FMT_EVLOG, 3);
  buf_free(&got);
  tdir(d, sizeof d, "efl-be");
  read_all(d, &got, &nseg);
  assert_int_equal(got.len, g2.len);
  assert_memory_equal(got.p, g2.buf, g2.len);
  manifests_match_scan(d, TLC_FMT_EVLOG, 3);
  buf_free(&got);
  evgen_free(&g);
  evgen_free(&g2);
}

/* One batch as tlc_target_feed makes it: a tlc_dec_push of chunk[0..len) (stream offset d->pos),
 * its events to the store with the chunk they came from. Returns the bytes the decoder took. */
static size_t push_batch(tlc_store_target_t *t, tlc_dec_t *d, const uint8_t *chunk, size_t len) {
  tlc_event_t ev[256];
  size_t used = 0;
  uint64_t at = d->pos;
  int m = tlc_dec_push(d, chunk, len, &used, ev, 256);
  assert_true(m >= 0);
  if (m > 0)
    assert_int_equal(tlc_store_write_chunk(t, ev, (size_t)m, chunk, used, at), 0);
  return used;
}

/* records copied as received (tlc_store_write_chunk): a bin11 stream whose records carry bits
 * tlc_bin1x_encode would not write back (flags bits above the core, which the decoder accepts)
 * is pushed through a strict decoder in chunks of odd sizes, each batch handed to the store with
 * its chunk: the segments hold exactly the bytes sent, records straddling two chunks included
 * (those are encoded from their fields, which keeps the received flags word) */
static void test_write_chunk_as_received(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 500;
  o.index_interval = 5;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "raw", TLC_FMT_BIN11, &t), 0);
  buf_t want = { 0 };
  size_t n = 3001;
  tlc_event_t *gen = gen_bin(TLC_FMT_BIN11, n, 21, &want);
  for (size_t i = 0; i < n; i += 7)
    want.p[i * 24 + 6] |= 0x10; /* flags bit 20: kept by the decoder, as received */
  tlc_dec_t d;
  tlc_event_t ev[256];
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, NULL), 0);
  size_t off = 0, k = 0;
  static const size_t sizes[] = { 1, 23, 24, 25, 100, 4096, 7, 48 };
  while (off < want.len) {
    size_t c = sizes[k++ % 8];
    if (c > want.len - off)
      c = want.len - off;
    for (size_t pos = 0; pos < c;)
      pos += push_batch(t, &d, want.p + off + pos, c - pos);
    off += c;
  }
  int m;
  while ((m = tlc_dec_finish(&d, ev, 256)) > 0)
    assert_int_equal(tlc_store_write_chunk(t, ev, (size_t)m, NULL, 0, 0), 0);
  assert_int_equal(m, 0);
  tlc_dec_fini(&d);
  close_store(s, &loop);
  char dir[1200];
  tdir(dir, sizeof dir, "raw");
  buf_t got = { 0 };
  read_all(dir, &got, NULL);
  assert_int_equal(got.len, want.len);
  assert_memory_equal(got.p, want.p, want.len);
  manifests_match_scan(dir, TLC_FMT_BIN11, 5);
  buf_free(&got);
  buf_free(&want);
  free(gen);
}

/* A chunk whose events are not all one run of records (the run check in
 * tlc_store_write_chunk): a record the decoder refused (no event), a synthesised event (which
 * has no record: TLC_EVF_SYNTH) and events in an order that is not the stream's. The segments
 * hold the records of the events, byte for byte, in the events' order; the synthesised event
 * is neither stored nor counted, and its queue room is given back. */
static void test_write_chunk_runs(void **state) {
  (void)state;
  tlc_store_target_t *t;
  tlc_store_t *s = store_one("runs", TLC_FMT_BIN11, &t);
  buf_t chunk = { 0 };
  size_t n = 40;
  tlc_event_t *gen = gen_bin(TLC_FMT_BIN11, n, 41, &chunk);
  for (size_t i = 0; i < n; i++)
    gen[i].offset = 1000 + i * 24; /* the chunk starts at stream offset 1000 */
  /* events: 0..9, (10 refused), 11..19, a synthesised copy of 20, 20..29, then 35, 30..34 */
  tlc_event_t ev[64];
  size_t k = 0, order[64];
  for (size_t i = 0; i < 30; i++) {
    if (i == 10)
      continue;
    if (i == 20) {
      ev[k] = gen[20];
      ev[k++].flags |= TLC_EVF_SYNTH;
    }
    order[k] = i;
    ev[k++] = gen[i];
  }
  order[k] = 35;
  ev[k++] = gen[35];
  for (size_t i = 30; i < 35; i++) {
    order[k] = i;
    ev[k++] = gen[i];
  }
  assert_int_equal(tlc_store_write_chunk(t, ev, k, chunk.p, chunk.len, 1000), 0);
  barrier(s, &loop);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.records_in, k - 1);
  assert_int_equal(c.records_written, k - 1);
  assert_int_equal(c.queue_bytes, 0);
  close_store(s, &loop);
  buf_t want = { 0 };
  for (size_t i = 0; i < k; i++)
    if (!(ev[i].flags & TLC_EVF_SYNTH))
      buf_add(&want, chunk.p + order[i] * 24, 24);
  assert_stored("runs", &want);
  buf_free(&want);
  buf_free(&chunk);
  free(gen);
}

/* Zero-copy reads (tlc_store_read_buffer), as a TCP source does them: reads of odd sizes land
 * in the place the store lends (so records straddle reads and gather buffers), each pushed
 * through a strict decoder in batches and handed to the store with that chunk. At random
 * between batches, a command of the target is queued while the buffer is lent (a gap: the
 * writer gets a copy of the records, the rest of the read is still decoded from the lent
 * buffer), and between reads the loop turn ends (the gathered records go to the writer).
 * `stall`: the disk stalls for the first half, so the queue fills and records are dropped while
 * reads are lent (the records after a drop are moved down within the buffer). The segments
 * hold the records sent, in order, byte for byte: all of them, or without stall - with the
 * dropped ones counted - an ordered subsequence; and their manifests match a scan. */
static void lent_case(int stall) {
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 5000;
  o.index_interval = 7;
  o.queue_bytes = stall ? 128u << 10 : 1u << 20; /* gather buffers of 32 KiB / 192 KiB */
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t, *other[GPOOL_MAX + 2];
  assert_int_equal(tlc_store_target_open(s, "lent", TLC_FMT_BIN11, &t), 0);
  /* other targets' gather buffers come back from the writer at once: the pool of buffers is
   * full, so the writer frees the next one it is done with - which must never be a buffer a
   * read is still being decoded from (run under ASan) */
  tlc_event_t *few = gen_bin(TLC_FMT_BIN11, 10, 35, NULL);
  for (size_t i = 0; i < GPOOL_MAX + 2; i++) {
    char name[16];
    snprintf(name, sizeof name, "other%zu", i);
    assert_int_equal(tlc_store_target_open(s, name, TLC_FMT_BIN11, &other[i]), 0);
    assert_int_equal(tlc_store_write(other[i], few, 10), 0);
  }
  free(few);
  barrier(s, &loop);
  buf_t want = { 0 };
  size_t n = 40000;
  tlc_event_t *gen = gen_bin(TLC_FMT_BIN11, n, 33, &want);
  tlc_dec_t d;
  tlc_event_t ev[256];
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, NULL), 0);
  static const size_t sizes[] = { 1, 23, 24, 25, 100, 4096, 16384, 65536, 7, 48, 30000, 65536 };
  rng_t r;
  rng_seed(&r, 34 + (uint64_t)stall);
  size_t off = 0, k = 0, lent = 0, gaps = 0;
  if (stall)
    atomic_store(&f_gate, 1);
  while (off < want.len) {
    if (stall && off >= want.len / 2)
      atomic_store(&f_gate, 0);
    size_t w = sizes[k++ % (sizeof sizes / sizeof *sizes)], c;
    uint8_t *b;
    size_t bl;
    const uint8_t *chunk;
    if (tlc_store_read_buffer(t, tlc_dec_pending(&d), w, &b, &bl)) {
      assert_true(bl >= 1 && bl <= w);
      c = bl < want.len - off ? bl : want.len - off;
      memcpy(b, want.p + off, c); /* the read */
      chunk = b;
      lent++;
    } else {
      c = w < want.len - off ? w : want.len - off;
      chunk = want.p + off;
    }
    for (size_t pos = 0; pos < c;) {
      pos += push_batch(t, &d, chunk + pos, c - pos);
      if (rng_below(&r, 6) == 0 && tlc_store_gap(t, "lent_gap", 1) == 0)
        gaps++;
    }
    off += c;
    if (rng_below(&r, 3) == 0)
      uv_run(&loop, UV_RUN_NOWAIT); /* the loop turn ends */
  }
  atomic_store(&f_gate, 0);
  int m;
  while ((m = tlc_dec_finish(&d, ev, 256)) > 0)
    assert_int_equal(tlc_store_write_chunk(t, ev, (size_t)m, NULL, 0, 0), 0);
  assert_int_equal(m, 0);
  tlc_dec_fini(&d);
  barrier(s, &loop);
  tlc_store_target_counters_t tc;
  tlc_store_target_counters(t, &tc);
  close_store(s, &loop);
  assert_true(lent > k / 2); /* most reads were lent (the 1-byte ones too) */
  assert_true(gaps > 10);
  char dir[1200];
  tdir(dir, sizeof dir, "lent");
  buf_t got = { 0 };
  read_all(dir, &got, NULL);
  assert_int_equal(got.len % 24, 0);
  assert_int_equal(got.len / 24 + tc.dropped_records, n);
  if (!stall) {
    assert_int_equal(tc.dropped_records, 0);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.p, want.p, want.len);
  } else {
    assert_true(tc.dropped_records > 0);
    size_t j = 0; /* every record kept is the next one sent that matches: in order, whole */
    for (size_t i = 0; i < got.len; i += 24) {
      while (j < n && memcmp(want.p + j * 24, got.p + i, 24) != 0)
        j++;
      assert_true(j < n);
      j++;
    }
  }
  manifests_match_scan(dir, TLC_FMT_BIN11, 7);
  buf_free(&got);
  buf_free(&want);
  free(gen);
}

static void test_read_buffer_lent(void **state) {
  (void)state;
  lent_case(0);
}

static void test_read_buffer_lent_drops(void **state) {
  (void)state;
  lent_case(1);
}

/* A lent place never runs past its gather buffer: when records gathered from reads that were
 * not lent fill the buffer while the decoder holds the start of the next record, the next lend
 * sends them to the writer and lends a fresh buffer, after the held bytes. The gather buffer is
 * the smallest that lends (684 records, 16,416 bytes). */
static void test_read_buffer_full(void **state) {
  (void)state;
  const size_t g = 684, held = 10;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.queue_bytes = g * 4 * 24;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "full", TLC_FMT_BIN11, &t), 0);
  buf_t want = { 0 };
  tlc_event_t *gen = gen_bin(TLC_FMT_BIN11, g + 1, 36, &want);
  tlc_dec_t d;
  tlc_event_t ev[256];
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, NULL), 0);
  size_t first = g * 24 + held, off = 0; /* read into the source's own buffer */
  while (off < first)
    off += push_batch(t, &d, want.p + off, first - off);
  assert_int_equal(tlc_dec_pending(&d), held);
  uint8_t *b;
  size_t bl, used = 0;
  assert_int_equal(tlc_store_read_buffer(t, held, 65536, &b, &bl), 1);
  assert_true(bl >= 1 && bl <= g * 24 - held); /* within a fresh buffer, after the held bytes */
  memcpy(b, want.p + first, 24 - held);
  uint64_t at = d.pos;
  assert_int_equal(tlc_dec_push(&d, b, 24 - held, &used, ev, 256), 1);
  assert_int_equal(tlc_store_write_chunk(t, ev, 1, b, used, at), 0);
  tlc_dec_fini(&d);
  close_store(s, &loop);
  char dir[1200];
  tdir(dir, sizeof dir, "full");
  stored_equals(dir, want.p, want.len);
  buf_free(&want);
  free(gen);
}

/* evlog blocks copied as received (tlc_store_write_chunk): a stream pushed through a strict
 * decoder in chunks of odd sizes and batches of few events, each batch handed to the store with
 * its chunk, so that some blocks lie whole in their chunk (copied as received) and others begin
 * in an earlier chunk or come in several batches (re-assembled from their items), interleaved:
 * the segments hold exactly the bytes sent, in order, and their manifests match a scan */
static void test_write_chunk_evlog_as_received(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 16384;
  o.index_interval = 4;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "rawev", TLC_FMT_EVLOG, &t), 0);
  evgen_t g;
  evgen_init(&g, EVGEN_STALE_PAD);
  evgen_random(&g, 31, 4000, 13);
  tlc_dec_t d;
  tlc_event_t ev[256];
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_EVLOG, NULL), 0);
  size_t off = 0, k = 0;
  static const size_t sizes[] = { 1, 700, 13, 4096, 65536, 37, 12000, 2 };
  static const size_t batch[] = { 256, 5, 256, 1, 256, 17, 256, 3 };
  while (off < g.len) {
    size_t c = sizes[k % 8], max = batch[k % 8];
    k++;
    if (c > g.len - off)
      c = g.len - off;
    size_t pos = 0;
    while (pos < c) {
      size_t used = 0;
      uint64_t at = d.pos;
      int m = tlc_dec_push(&d, g.buf + off + pos, c - pos, &used, ev, max);
      assert_true(m >= 0);
      if (m > 0)
        assert_int_equal(tlc_store_write_chunk(t, ev, (size_t)m, g.buf + off + pos, used, at), 0);
      pos += used;
    }
    off += c;
  }
  int m;
  while ((m = tlc_dec_finish(&d, ev, 256)) > 0)
    assert_int_equal(tlc_store_write_chunk(t, ev, (size_t)m, NULL, 0, 0), 0);
  assert_int_equal(m, 0);
  tlc_dec_fini(&d);
  barrier(s, &loop);
  tlc_store_target_counters_t tc;
  tlc_store_target_counters(t, &tc);
  assert_int_equal(tc.records_in, g.blocks);
  assert_int_equal(tc.bytes_in, g.len);
  close_store(s, &loop);
  char dir[1200];
  tdir(dir, sizeof dir, "rawev");
  buf_t got = { 0 };
  size_t nseg;
  read_all(dir, &got, &nseg);
  assert_true(nseg > 3);
  assert_int_equal(got.len, g.len);
  assert_memory_equal(got.p, g.buf, g.len);
  manifests_match_scan(dir, TLC_FMT_EVLOG, 4);
  buf_free(&got);
  evgen_free(&g);
}

/* a range read through the index == a full read filtered by time */
static void filter_full(tlc_format_t f, const buf_t *all, int64_t from, int64_t to, buf_t *out) {
  size_t pos = 0;
  while (pos < all->len) {
    tlc_rec_t r;
    size_t need;
    assert_int_equal(tlc_scan_record(f, all->p + pos, all->len - pos, 0, &r, &need), 1);
    if (r.items > 0 && r.tmax >= from && r.tmin <= to)
      buf_add(out, all->p + pos, r.len);
    pos += r.len;
  }
}

static void range_check(const char *dir, tlc_format_t f, int64_t lo, int64_t hi, uint64_t seed) {
  seglist_t l;
  list_segments(dir, &l, 0);
  rng_t r;
  rng_seed(&r, seed);
  for (int k = 0; k < 40; k++) {
    int64_t a = rng_range(&r, lo - 1000, hi + 1000);
    int64_t b = rng_range(&r, a, hi + 1000);
    if (k == 0) {
      a = INT64_MIN;
      b = INT64_MAX;
    }
    for (size_t i = 0; i < l.n; i++) {
      char p[1200];
      snprintf(p, sizeof p, "%s/%s", dir, l.name[i]);
      buf_t all = { 0 }, want = { 0 }, got = { 0 };
      read_segment(p, INT64_MIN, INT64_MAX, &all, NULL);
      filter_full(f, &all, a, b, &want);
      read_segment(p, a, b, &got, NULL);
      assert_int_equal(got.len, want.len);
      if (want.len)
        assert_memory_equal(got.p, want.p, want.len);
      buf_free(&all);
      buf_free(&want);
      buf_free(&got);
    }
  }
}

static void range_and_zstd(int compress) {
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 300;
  o.index_interval = 7;
  o.compress = compress;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t, *te;
  assert_int_equal(tlc_store_target_open(s, "b", TLC_FMT_BIN11, &t), 0);
  assert_int_equal(tlc_store_target_open(s, "e", TLC_FMT_EVLOG, &te), 0);
  buf_t want = { 0 };
  size_t n = 1000;
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, n, 3, &want);
  assert_int_equal(tlc_store_write(t, ev, n), 0);
  evgen_t g;
  evgen_init(&g, 0);
  evgen_random(&g, 5, 1500, 9);
  feed_stream(te, TLC_FMT_EVLOG, g.buf, g.len, 4096);
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "b");
  if (compress) {
    assert_int_equal(count_kind(d, TLC_SK_DATA), 0);
    assert_true(count_kind(d, TLC_SK_ZST) >= 4);
  }
  stored_equals(d, want.p, want.len);
  range_check(d, TLC_FMT_BIN11, ev[0].time_ns, ev[n - 1].time_ns, 9);
  tdir(d, sizeof d, "e");
  stored_equals(d, g.buf, g.len);
  range_check(d, TLC_FMT_EVLOG, 0, 100000000000ll, 10);
  buf_free(&want);
  evgen_free(&g);
  free(ev);
}
static void test_range_read(void **state) {
  (void)state;
  range_and_zstd(0);
}
static void test_zstd(void **state) {
  (void)state;
  range_and_zstd(1);
}

/* segments sealed before a restart are compressed after it */
static void test_zstd_after_restart(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 100;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "z", TLC_FMT_BIN11, &t), 0);
  buf_t want = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 450, 3, &want);
  assert_int_equal(tlc_store_write(t, ev, 450), 0);
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "z");
  assert_int_equal(count_kind(d, TLC_SK_DATA), 5);
  o.compress = 1;
  s = open_store(&loop, &o, NULL);
  close_store(s, &loop);
  assert_int_equal(count_kind(d, TLC_SK_DATA), 0);
  assert_int_equal(count_kind(d, TLC_SK_ZST), 5);
  stored_equals(d, want.p, want.len);
  buf_free(&want);
  free(ev);
}

/* T10: EINTR, EAGAIN and short writes give the same bytes */
static void test_eintr_storm(void **state) {
  (void)state;
  atomic_store(&f_short, 1);
  atomic_store(&f_eintr, 1);
  atomic_store(&f_eagain, 1);
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 50;
  o.sync_mode = TLC_SYNC_PERIODIC;
  o.sync_bytes = 500;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "x", TLC_FMT_BIN11, &t), 0);
  buf_t want = { 0 };
  size_t n = 2000;
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, n, 21, &want);
  for (size_t i = 0; i < n; i += 100)
    assert_int_equal(tlc_store_write(t, ev + i, 100), 0);
  close_store(s, &loop);
  atomic_store(&f_short, 0);
  atomic_store(&f_eintr, 0);
  atomic_store(&f_eagain, 0);
  char d[1200];
  tdir(d, sizeof d, "x");
  stored_equals(d, want.p, want.len);
  buf_free(&want);
  free(ev);
}

/* T07 logic: ENOSPC pauses writing (records counted), retention keeps running, and writing
 * resumes by itself; sent == written + dropped; the file holds whole records only (R6). */
static void on_event(void *ud, const tlc_store_event_t *ev) {
  if (ev->kind == TLC_SEV_RESUMED)
    *(int *)ud = 1;
}

static void test_disk_full(void **state) {
  (void)state;
  int resumed = 0;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 40;
  o.probe_interval_ms = 1;
  o.resume_free_bytes = 1;
  o.event_cb = on_event;
  o.event_ud = &resumed;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "full", TLC_FMT_BIN11, &t), 0);
  size_t n = 600;
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, n, 5, NULL);
  assert_int_equal(tlc_store_write(t, ev, 100), 0);
  barrier(s, &loop);
  atomic_store(&f_full, 1);
  assert_int_equal(tlc_store_write(t, ev + 100, 100), 0);
  assert_int_equal(tlc_store_write(t, ev + 200, 100), 0);
  barrier(s, &loop);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.disk_full, 1);
  assert_true(c.dropped_disk_full_records > 0);
  assert_int_equal(c.records_in, c.records_written + c.dropped_disk_full_records);
  atomic_store(&f_full, 0);
  /* the writer's probe (every 1 ms here) resumes by itself: await its RESUMED event */
  run_until(&loop, &resumed);
  tlc_store_counters(s, &c);
  assert_int_equal(c.disk_full, 0);
  assert_int_equal(tlc_store_write(t, ev + 300, 300), 0);
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "full");
  buf_t got = { 0 };
  read_all(d, &got, NULL);
  /* conservation and whole records */
  assert_int_equal(got.len % 24, 0);
  assert_int_equal(got.len / 24 + c.dropped_disk_full_records, n);
  /* a disk_full gap with the count is in some manifest */
  seglist_t l;
  list_segments(d, &l, 0);
  uint64_t gapped = 0;
  for (size_t i = 0; i < l.n; i++) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", d, l.name[i]);
    tlc_segread_t *r;
    assert_int_equal(tlc_segread_open(p, TLC_FMT_NONE, 0, &r, NULL, 0), 0);
    tlc_seginfo_t inf;
    tlc_segread_info(r, &inf);
    for (size_t k = 0; k < inf.ngaps; k++) {
      const char *why;
      uint64_t cnt, off;
      tlc_segread_gap(r, k, &why, &cnt, &off);
      if (strcmp(why, "disk_full") == 0)
        gapped += cnt;
    }
    tlc_segread_close(r);
  }
  assert_int_equal(gapped, c.dropped_disk_full_records);
  buf_free(&got);
  free(ev);
}

/* R5: a failed fdatasync is never retried: the segment is sealed as suspect, io_errors rises,
 * the durable watermark does not advance, and writing goes on in a new segment */
static void test_fsync_eio(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.sync_mode = TLC_SYNC_PERIODIC;
  o.sync_bytes = 24;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "io", TLC_FMT_BIN11, &t), 0);
  buf_t want = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 30, 1, &want);
  assert_int_equal(tlc_store_write(t, ev, 10), 0);
  barrier(s, &loop);
  tlc_store_target_counters_t tc;
  tlc_store_target_counters(t, &tc);
  assert_int_equal(tc.durable_bytes, 240);
  atomic_store(&f_fsync_eio, 1);
  assert_int_equal(tlc_store_write(t, ev + 10, 10), 0);
  barrier(s, &loop);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.fsync_errors, 1);
  assert_int_equal(c.segments_sealed, 1);
  atomic_store(&f_fsync_eio, 0);
  assert_int_equal(tlc_store_write(t, ev + 20, 10), 0);
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "io");
  seglist_t l;
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 2);
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", d, l.name[0]);
  buf_t got = { 0 };
  tlc_seginfo_t inf;
  read_segment(p, INT64_MIN, INT64_MAX, &got, &inf);
  assert_int_equal(inf.suspect, 1);
  snprintf(p, sizeof p, "%s/%s", d, l.name[1]);
  read_segment(p, INT64_MIN, INT64_MAX, &got, &inf);
  assert_int_equal(inf.suspect, 0);
  assert_memory_equal(got.p, want.p, want.len);
  buf_free(&got);
  buf_free(&want);
  free(ev);
}

/* R6 + R5 on write: a failed write is cut back to the last whole record, the file is sealed
 * as suspect, the lost records are counted and recorded as an io_error gap, writing goes on */
static void test_write_eio(void **state) {
  (void)state;
  tlc_store_target_t *t;
  tlc_store_t *s = store_one("eio", TLC_FMT_BIN11, &t);
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 300, 9, NULL);
  assert_int_equal(tlc_store_write(t, ev, 100), 0);
  barrier(s, &loop);
  atomic_store(&f_eio, 1);
  assert_int_equal(tlc_store_write(t, ev + 100, 100), 0);
  barrier(s, &loop);
  atomic_store(&f_eio, 0);
  assert_int_equal(tlc_store_write(t, ev + 200, 100), 0);
  barrier(s, &loop);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_true(c.io_errors >= 1);
  assert_true(c.dropped_io_error_records > 0);
  assert_int_equal(c.records_in, c.records_written + c.dropped_io_error_records);
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "eio");
  seglist_t l;
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 2);
  buf_t got = { 0 };
  tlc_seginfo_t inf;
  char p[1300];
  snprintf(p, sizeof p, "%s/%s", d, l.name[0]);
  read_segment(p, INT64_MIN, INT64_MAX, &got, &inf);
  /* suspect in its manifest, or (the manifest write failed too) no manifest: rebuilt */
  assert_true(inf.suspect == 1 || inf.rebuilt == 1);
  assert_int_equal(inf.file_bytes % 24, 0);
  snprintf(p, sizeof p, "%s/%s", d, l.name[1]);
  read_segment(p, INT64_MIN, INT64_MAX, &got, &inf);
  assert_int_equal(got.len / 24 + c.dropped_io_error_records, 300);
  buf_free(&got);
  free(ev);
}

/* the writer queue is capped: when the disk stalls, records are dropped and counted
 * (buffer_full), a gap is recorded, and ingest never blocks */
static void test_buffer_full(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.queue_bytes = 24 * 100;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "slow", TLC_FMT_BIN11, &t), 0);
  size_t n = 1000;
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, n, 2, NULL);
  atomic_store(&f_gate, 1);
  for (size_t i = 0; i < n; i += 50)
    assert_int_equal(tlc_store_write(t, ev + i, 50), 0);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_true(c.dropped_buffer_full_records > 0);
  atomic_store(&f_gate, 0);
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "slow");
  buf_t got = { 0 };
  read_all(d, &got, NULL);
  assert_int_equal(got.len / 24 + c.dropped_buffer_full_records, n);
  buf_free(&got);
  free(ev);
}

/* Retention deletes only a target's lowest sequence: one being compressed (busy) or written late
 * (pinned) holds its target's later segments back (over budget for a moment) rather than being
 * skipped, which would leave the kept stream with a hole; across targets the oldest deletable
 * lowest sequence goes. Straight on the catalog, so the held flags are set exactly. */
typedef struct {
  char got[64][40];
  int n;
} gone_t;

static void on_gone(void *ud, const tlc_catent_t *e) {
  gone_t *g = ud;
  if (g->n < 64)
    snprintf(g->got[g->n++], sizeof g->got[0], "%s%llu", e->target, (unsigned long long)e->seq);
}

static void cat_put(tlc_catalog_t *c, const char *target, uint64_t seq, int64_t opened_s) {
  tlc_catent_t e;
  memset(&e, 0, sizeof e);
  snprintf(e.target, sizeof e.target, "%s", target);
  snprintf(e.base, sizeof e.base, "%s-%06llu", target, (unsigned long long)seq);
  snprintf(e.data, sizeof e.data, "%s.BIN", e.base);
  e.seq = seq;
  e.bytes = 100;
  e.opened_wall_ns = opened_s * 1000000000ll;
  e.closed_wall_ns = e.opened_wall_ns + 1000000000ll;
  assert_int_equal(tlc__catalog_add(c, &e), 0);
}

/* the catalogued sequences of `target`, as "1 2 3" */
static const char *cat_seqs(const tlc_catalog_t *c, const char *target) {
  static char out[256];
  size_t n = 0;
  out[0] = 0;
  for (size_t i = 0; i < c->n; i++)
    if (strcmp(c->v[i].target, target) == 0)
      n += (size_t)snprintf(out + n, sizeof out - n, "%s%llu", n ? " " : "",
                            (unsigned long long)c->v[i].seq);
  return out;
}

static tlc_catent_t *cat_at(tlc_catalog_t *c, const char *target, uint64_t seq) {
  tlc_catent_t *e = tlc__store_cat_find(c, target, seq);
  assert_non_null(e);
  return e;
}

static void test_retention_held_oldest(void **state) {
  (void)state;
  tlc_catalog_t c;
  gone_t g;
  tlc_retention_t r;
  assert_int_equal(tlc__catalog_init(&c), 0);
  memset(&r, 0, sizeof r);
  r.state_dir = tmp;
  r.deleted = on_gone;
  r.ud = &g;
  /* count: A1 pinned holds A at 6 over a budget of 3; B goes down to 3 */
  for (uint64_t q = 1; q <= 6; q++)
    cat_put(&c, "A", q, (int64_t)q * 10);
  for (uint64_t q = 1; q <= 5; q++)
    cat_put(&c, "B", q, (int64_t)q * 10 + 5);
  cat_at(&c, "A", 1)->pinned = 1;
  r.max_segments = 3;
  memset(&g, 0, sizeof g);
  assert_int_equal(tlc__retention_run(&c, &r), 2);
  assert_string_equal(cat_seqs(&c, "A"), "1 2 3 4 5 6");
  assert_string_equal(cat_seqs(&c, "B"), "3 4 5");
  /* unpinned: the next pass catches up, in order */
  cat_at(&c, "A", 1)->pinned = 0;
  memset(&g, 0, sizeof g);
  assert_int_equal(tlc__retention_run(&c, &r), 3);
  assert_string_equal(g.got[0], "A1");
  assert_string_equal(g.got[1], "A2");
  assert_string_equal(g.got[2], "A3");
  assert_string_equal(cat_seqs(&c, "A"), "4 5 6");
  /* a busy one behind the head: the head goes, then the target waits at the busy one */
  cat_put(&c, "A", 7, 70);
  cat_put(&c, "A", 8, 80);
  cat_at(&c, "A", 5)->busy = 1;
  assert_int_equal(tlc__retention_run(&c, &r), 1);
  assert_string_equal(cat_seqs(&c, "A"), "5 6 7 8");
  cat_at(&c, "A", 5)->busy = 0;
  assert_int_equal(tlc__retention_run(&c, &r), 1);
  assert_string_equal(cat_seqs(&c, "A"), "6 7 8");
  /* total bytes, across targets: A6 (opened first) pinned, so B's go, and then nothing: A7, the
   * oldest of the rest, is not deleted past A6 (over budget until A6 is unpinned) */
  r.max_segments = 0;
  r.max_total_bytes = 200; /* 6 entries of 100 bytes: 4 to go */
  cat_at(&c, "A", 6)->pinned = 1;
  memset(&g, 0, sizeof g);
  assert_int_equal(tlc__retention_run(&c, &r), 3);
  assert_string_equal(cat_seqs(&c, "A"), "6 7 8");
  assert_string_equal(cat_seqs(&c, "B"), "");
  /* age: everything has expired; held A6 keeps A's tail, C goes entirely */
  r.max_total_bytes = 0;
  cat_put(&c, "C", 1, 20);
  cat_put(&c, "C", 2, 30);
  r.max_age_ms = 1000;
  r.now_wall_ns = 1000 * 1000000000ll;
  assert_int_equal(tlc__retention_run(&c, &r), 2);
  assert_string_equal(cat_seqs(&c, "A"), "6 7 8");
  assert_string_equal(cat_seqs(&c, "C"), "");
  cat_at(&c, "A", 6)->pinned = 0;
  assert_int_equal(tlc__retention_run(&c, &r), 3);
  assert_int_equal(c.n, 0);
  tlc__catalog_fini(&c);
}

/* T13: retention by count, bytes and age with an injected clock, oldest by sequence, the open
 * segment never, foreign files never */
static _Atomic int64_t fake_wall;
static int64_t wall_fn(void *ud) {
  (void)ud;
  return atomic_load(&fake_wall);
}

static void test_retention(void **state) {
  (void)state;
  atomic_store(&fake_wall, 1700000000ll * 1000000000ll);
  char d[1200], foreign[1300];
  tdir(d, sizeof d, "r");
  mkdir(d, 0755);
  snprintf(foreign, sizeof foreign, "%s/notes.txt", d);
  FILE *fp = fopen(foreign, "w");
  fputs("mine\n", fp);
  fclose(fp);
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segments = 3;
  o.now_wall_ns = wall_fn;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "r", TLC_FMT_BIN11, &t), 0);
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 100, 2, NULL);
  for (int i = 0; i < 10; i++) {
    atomic_fetch_add(&fake_wall, 60ll * 1000000000ll);
    assert_int_equal(tlc_store_write(t, ev + i * 10, 10), 0);
    assert_int_equal(tlc_store_rotate(t, TLC_ROT_COMMAND), 0);
  }
  assert_int_equal(tlc_store_write(t, ev + 90, 10), 0); /* open segment */
  barrier(s, &loop);
  seglist_t l;
  list_segments(d, &l, 1);
  assert_int_equal(l.n, 4); /* 3 sealed + the open one */
  assert_int_equal(l.seq[0], 8);
  assert_int_equal(l.seq[3], 11);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.deletions, 7);
  /* age: a backward clock step deletes nothing; forward past max_age deletes the old ones */
  tlc_store_opts_t o2 = o;
  o2.max_segments = 0;
  o2.max_age_ms = 90 * 1000;
  atomic_fetch_sub(&fake_wall, 3600ll * 1000000000ll);
  tlc_store_reconfigure(s, &o2);
  barrier(s, &loop);
  list_segments(d, &l, 1);
  assert_int_equal(l.n, 4);
  atomic_fetch_add(&fake_wall, 3600ll * 1000000000ll + 120ll * 1000000000ll);
  tlc_store_retention_now(s);
  barrier(s, &loop);
  list_segments(d, &l, 1);
  assert_int_equal(l.n, 1); /* seq 10 closed at +600 s, now +720 s: gone; the open one stays */
  assert_int_equal(l.seq[0], 11);
  /* bytes */
  o2.max_age_ms = 0;
  o2.max_total_bytes = 1;
  tlc_store_reconfigure(s, &o2);
  assert_int_equal(tlc_store_rotate(t, TLC_ROT_COMMAND), 0);
  barrier(s, &loop);
  list_segments(d, &l, 1);
  assert_int_equal(l.n, 0);
  struct stat st;
  assert_int_equal(lstat(foreign, &st), 0);
  close_store(s, &loop);
  /* retention runs at start too */
  tlc_store_opts_t o3 = o;
  o3.max_segments = 0;
  tlc_store_recovery_t sum;
  s = open_store(&loop, &o3, &sum);
  close_store(s, &loop);
  assert_int_equal(lstat(foreign, &st), 0);
  free(ev);
}

/* age rotation by the injected monotonic clock; the open segment is readable as a .part */
static _Atomic int64_t fake_mono;
static int64_t mono_fn(void *ud) {
  (void)ud;
  return atomic_load(&fake_mono);
}
static void on_sealed_age(void *ud, const tlc_store_event_t *ev) {
  if (ev->kind == TLC_SEV_SEALED && ev->reason == TLC_ROT_AGE)
    *(int *)ud = 1;
}

static void test_age_rotation(void **state) {
  (void)state;
  int sealed = 0;
  atomic_store(&fake_mono, 1000000000ll);
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_age_ms = 60000;
  o.now_mono_ns = mono_fn;
  o.event_cb = on_sealed_age;
  o.event_ud = &sealed;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "age", TLC_FMT_BIN11, &t), 0);
  buf_t want = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 20, 3, &want);
  assert_int_equal(tlc_store_write(t, ev, 10), 0);
  barrier(s, &loop);
  /* the open segment reads as a .part (manifest rebuilt in memory) */
  char d[1200];
  tdir(d, sizeof d, "age");
  seglist_t l;
  list_segments(d, &l, 1);
  assert_int_equal(l.n, 1);
  char p[1300];
  snprintf(p, sizeof p, "%s/%s", d, l.name[0]);
  tlc_segread_t *r;
  assert_int_equal(tlc_segread_open(p, TLC_FMT_BIN11, 0, &r, NULL, 0), 0);
  tlc_seginfo_t inf;
  tlc_segread_info(r, &inf);
  assert_int_equal(inf.records, 10);
  assert_int_equal(inf.rebuilt, 1);
  tlc_segread_close(r);
  atomic_fetch_add(&fake_mono, 61ll * 1000000000ll);
  run_until(&loop, &sealed); /* the writer's tick seals it */
  assert_int_equal(tlc_store_write(t, ev + 10, 10), 0);
  close_store(s, &loop);
  buf_t got = { 0 };
  size_t nseg;
  read_all(d, &got, &nseg);
  assert_int_equal(nseg, 2);
  assert_int_equal(got.len, want.len);
  assert_memory_equal(got.p, want.p, want.len);
  buf_free(&got);
  buf_free(&want);
  free(ev);
}

/* ---- sealing off the append path ---- */

static tlc_store_t *poll_store;
static uint64_t (*poll_get)(const tlc_store_counters_t *);
static uint64_t poll_want;
static int poll_done;
static void on_poll(uv_timer_t *tm) {
  tlc_store_counters_t c;
  tlc_store_counters(poll_store, &c);
  if (poll_get(&c) >= poll_want) {
    poll_done = 1;
    uv_timer_stop(tm);
    uv_stop(tm->loop); /* else this turn may go on to wait for I/O until the deadline */
  }
}
/* runs the loop until a store counter reaches `want` (read every ms; run_until's deadline) */
/* runs the loop with `tick` called every ms until *done (run_until's deadline) */
static void poll_until(uv_timer_cb tick, int *done) {
  uv_timer_t tm;
  uv_timer_init(&loop, &tm);
  uv_timer_start(&tm, tick, 0, 1);
  run_until(&loop, done);
  uv_close((uv_handle_t *)&tm, NULL);
  uv_run(&loop, UV_RUN_NOWAIT);
}
static void await_counter(tlc_store_t *s, uint64_t (*get)(const tlc_store_counters_t *),
                          uint64_t want) {
  poll_store = s;
  poll_get = get;
  poll_want = want;
  poll_done = 0;
  poll_until(on_poll, &poll_done);
}
static uint64_t c_written(const tlc_store_counters_t *c) {
  return c->records_written;
}
static uint64_t c_waits(const tlc_store_counters_t *c) {
  return c->seal_waits;
}

/* While a seal is stuck in fdatasync, the writer goes on appending to the next segment; at
 * most max_sealing segments are in flight, then the writer waits (counted) before closing
 * another; once the disk answers, everything is sealed, in sequence order, byte for byte. */
static void test_seal_off_append_path(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 100;
  o.max_sealing = 2;
  o.export_cb = tlc_stpol_main_export;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "seal", TLC_FMT_BIN11, &t), 0);
  buf_t want = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 500, 21, &want);
  char d[1200];
  tdir(d, sizeof d, "seal");
  f_hold_sync(1);
  /* record 101 closes segment 1, whose seal then hangs in fdatasync */
  assert_int_equal(tlc_store_write(t, ev, 200), 0);
  await_counter(s, c_written, 200);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.seal_queue, 1);
  assert_int_equal(c.segments_sealed, 0);
  assert_int_equal(count_kind(d, TLC_SK_PART), 2); /* the one being sealed and the open one */
  assert_int_equal(count_kind(d, TLC_SK_DATA), 0);
  /* segment 2 joins it (2 in flight); closing segment 3 must wait for room */
  assert_int_equal(tlc_store_write(t, ev + 200, 200), 0);
  await_counter(s, c_waits, 1);
  tlc_store_counters(s, &c);
  assert_int_equal(c.records_written, 300); /* segment 3 is full; segment 4 not opened */
  assert_int_equal(c.seal_queue, 2);
  assert_int_equal(count_kind(d, TLC_SK_PART), 3);
  assert_int_equal(count_kind(d, TLC_SK_DATA), 0);
  assert_true(f_await_held(1)); /* the sealer is in segment 1's fdatasync */
  f_hold_sync(0);
  barrier(s, &loop);
  tlc_store_counters(s, &c);
  assert_int_equal(c.records_written, 400);
  assert_int_equal(c.seal_queue, 0);
  assert_int_equal(c.segments_sealed, 3);
  assert_int_equal(count_kind(d, TLC_SK_DATA), 3); /* the barrier covered their seals */
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 3);
  assert_int_equal(tlc_store_write(t, ev + 400, 100), 0);
  close_store(s, &loop);
  buf_t got = { 0 };
  size_t nseg;
  read_all(d, &got, &nseg);
  assert_int_equal(nseg, 5);
  assert_int_equal(got.len, want.len);
  assert_memory_equal(got.p, want.p, want.len);
  assert_int_equal(count_kind(d, TLC_SK_PART), 0);
  assert_int_equal(count_kind(d, TLC_SK_MANIFEST), 5);
  seglist_t l;
  list_segments(d, &l, 0);
  for (size_t i = 0; i < l.n; i++)
    assert_int_equal(l.seq[i], i + 1);
  buf_free(&got);
  buf_free(&want);
  free(ev);
}

static long rss_kib(void) {
  long pages = 0, res = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%ld %ld", &pages, &res), 2);
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The gather buffers for a quarter of the queue are taken before the records come
 * (docs/storage.md, "What the writer receives"): when the store opens with gather_at_start (a
 * bin1x source is configured), else when its first bin1x target opens. A burst the writer
 * cannot take yet (its writes held) fills them and the process does not grow; a store that
 * allocated them as the burst came would grow by 12 MiB. Once the writes go on, every record is
 * stored. With gather_at_start the growth is counted from before the target opens. */
static void gather_pool_case(int at_start) {
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.gather_at_start = at_start;
  size_t n = 48 * 8192; /* 48 gather buffers of records: 9 MiB, and 3 MiB of times */
  buf_t want = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, n, 5, &want);
  tlc_store_t *s = open_store(&loop, &o, NULL);
  long base = rss_kib();
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "pool", TLC_FMT_BIN11, &t), 0);
  if (!at_start)
    base = rss_kib();
  atomic_store(&f_gate, 1);
  assert_int_equal(tlc_store_write(t, ev, n), 0);
  long grown = rss_kib() - base;
  atomic_store(&f_gate, 0);
  close_store(s, &loop);
  if (grown >= 4096)
    fail_msg("the process grew by %ld KiB while 12 MiB of records were queued", grown);
  assert_stored("pool", &want);
  buf_free(&want);
  free(ev);
}
static void test_gather_pool(void **state) {
  (void)state;
  gather_pool_case(0);
}
static void test_gather_pool_at_start(void **state) {
  (void)state;
  gather_pool_case(1);
}

/* The loop wakes the writer for data only while it is idle, or once 1 MiB waits; a busy writer
 * looks for data itself every 5 ms (docs/storage.md, "Threads and queues"). Either way a few
 * records reach the file at once, not at the writer's 250 ms tick: right after the writer
 * wrote (busy) and after it had time to go idle, the fastest of three rounds is under 150 ms. */
static void test_writer_wakes(void **state) {
  (void)state;
  tlc_store_target_t *t;
  tlc_store_t *s = store_one("wake", TLC_FMT_BIN11, &t);
  const size_t per = 10, rounds = 6;
  buf_t want = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, per * (rounds + 1), 9, &want);
  assert_int_equal(tlc_store_write(t, ev, per), 0);
  await_counter(s, c_written, per);
  uint64_t best[2] = { UINT64_MAX, UINT64_MAX };
  for (size_t r = 0; r < rounds; r++) {
    int idle = (int)(r % 2);
    if (idle)
      usleep(50 * 1000); /* ten of the busy writer's looks find nothing: it is idle */
    uint64_t t0 = uv_hrtime();
    assert_int_equal(tlc_store_write(t, ev + per * (r + 1), per), 0);
    await_counter(s, c_written, per * (r + 2));
    uint64_t dt = uv_hrtime() - t0;
    if (dt < best[idle])
      best[idle] = dt;
  }
  close_store(s, &loop);
  if (best[0] >= 150000000u || best[1] >= 150000000u)
    fail_msg("records reached the file after %.1f ms (writer busy) and %.1f ms (idle)",
             best[0] / 1e6, best[1] / 1e6);
  assert_stored("wake", &want);
  buf_free(&want);
  free(ev);
}

/* ---- the target's settings in its segments' exports ---- */

static void parse_mapping(tlc_mapping_t *m, const char *text) {
  tlc_parse_err_t pe;
  tlc_mapping_init(m);
  assert_int_equal(tlc_mapping_parse(m, text, strlen(text), &pe), 0);
  tlc_mapping_finish(m);
}

/* reads <dir>/<base of segment i>.txt into out (NUL-terminated) */
static void read_export(const char *dir, const seglist_t *l, size_t i, char *out, size_t cap) {
  tlc_segname_t sn;
  char p[1300];
  assert_int_not_equal(tlc__segname_parse(l->name[i], &sn), TLC_SK_NONE);
  snprintf(p, sizeof p, "%s/%s.txt", dir, sn.base);
  FILE *fp = fopen(p, "r");
  assert_non_null(fp);
  size_t n = fread(out, 1, cap - 1, fp);
  out[n] = 0;
  fclose(fp);
}

/* An RTOS-style bin11 stream: task switches by writes to context area 0x30000005 (values 1 and
 * 2) around calls of functions 0 and 1 on core 0, 10 events per round. */
static tlc_event_t *gen_rtos(size_t n) {
  tlc_event_t *ev = calloc(n, sizeof *ev);
  static const struct {
    uint32_t h;
    uint8_t type;
    uint64_t v;
  } round[10] = { { 0x30000005, 4, 1 }, { 0, 3, 0 }, { 1, 3, 0 }, { 1, 0, 0 }, { 0, 0, 0 },
                  { 0x30000005, 4, 2 }, { 0, 3, 0 }, { 0, 0, 0 }, { 1, 3, 0 }, { 1, 0, 0 } };
  for (size_t i = 0; i < n; i++) {
    ev[i].handle = round[i % 10].h;
    ev[i].type = round[i % 10].type;
    ev[i].data = round[i % 10].v;
    ev[i].core = 0;
    ev[i].raw = ev[i].type; /* core 0 */
    ev[i].time_ns = 1000 + 100 * (int64_t)i;
  }
  return ev;
}

/* Each segment's export carries the names (mapping) and contexts (context_area) the target had
 * when the segment was closed: the caller's mapping may be freed at once (it is copied); a
 * mapping replaced while an older segment is still being sealed leaves that one its names. */
static void test_export_settings(void **state) {
  (void)state;
  static const char *m1 = "* CONTEXTS %NAME%,%HANDLE%\ntaskA,1\ntaskB,2\n\n"
                          "* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n"
                          "00000000,main,\n00000001,worker,\n";
  static const char *m2 = "* CONTEXTS %NAME%,%HANDLE%\ntaskA2,1\ntaskB2,2\n\n"
                          "* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n"
                          "00000000,main2,\n00000001,worker2,\n";
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 50;
  o.max_sealing = 2;
  o.export_cb = tlc_stpol_main_export;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "rtos", TLC_FMT_BIN11, &t), 0);
  tlc_store_tconf_t tc = { 1, 0x30000005, TLC_MAIN_TEXT1, { 0 } };
  assert_int_equal(tlc_store_target_configure(t, &tc), 0);
  tlc_mapping_t m;
  parse_mapping(&m, m1);
  assert_int_equal(tlc_store_target_set_mapping(t, &m), 0);
  tlc_mapping_fini(&m); /* copied */
  tlc_event_t *ev = gen_rtos(160);
  f_hold_sync(1); /* segment 1's seal hangs until the mapping has been replaced */
  assert_int_equal(tlc_store_write(t, ev, 100), 0); /* closes segment 1 (closed under m1) */
  parse_mapping(&m, m2);
  assert_int_equal(tlc_store_target_set_mapping(t, &m), 0);
  tlc_mapping_fini(&m);
  assert_int_equal(tlc_store_rotate(t, TLC_ROT_COMMAND), 0); /* segment 2, under m2 */
  assert_int_equal(tlc_store_write(t, ev + 100, 60), 0);     /* segment 3 waits for room */
  await_counter(s, c_waits, 1); /* so the writer has dropped its own reference to m1 */
  f_hold_sync(0);
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "rtos");
  seglist_t l;
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 4);
  static char x[65536];
  read_export(d, &l, 0, x, sizeof x);
  assert_non_null(strstr(x, "\n00000000,main,\n"));
  assert_non_null(strstr(x, "\n00000001,worker,\n"));
  assert_non_null(strstr(x, "\ntaskA,"));
  assert_non_null(strstr(x, "\ntaskB,"));
  assert_null(strstr(x, "main2"));
  assert_null(strstr(x, "core0")); /* every event ran in a task (the first is its switch) */
  /* by hand: 5 rounds; in task 1, f0 runs E..X = 300 ns and f1 100 ns; in task 2 each 100 ns */
  assert_non_null(strstr(x, "CONTEXT(taskA) %HANDLE%,%VALUE%,%COUNT%,%T.NET%\n"
                            "00000000,,5,1500\n00000001,,5,500\n"));
  assert_non_null(strstr(x, "CONTEXT(taskB) %HANDLE%,%VALUE%,%COUNT%,%T.NET%\n"
                            "00000000,,5,500\n00000001,,5,500\n"));
  for (size_t i = 1; i < 4; i++) {
    read_export(d, &l, i, x, sizeof x);
    assert_non_null(strstr(x, "\n00000000,main2,\n"));
    assert_non_null(strstr(x, "\ntaskA2,"));
    assert_null(strstr(x, "\n00000000,main,\n"));
  }
  free(ev);
}

/* reads a whole file into out (NUL-terminated); returns its length */
static size_t slurp(const char *path, char *out, size_t cap) {
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  size_t n = fread(out, 1, cap - 1, fp);
  out[n] = 0;
  fclose(fp);
  return n;
}

/* main_export = XML: segments are <base>.xml.BIN beside <base>.xml (winIDEA's TimelineBinary
 * naming), the XML names its .BIN and counts its events; a switch applies from the next
 * segment opened; a crashed .xml.BIN.part is recovered with an XML export; retention deletes
 * the .xml with its segment. */
static void test_xml_main_export(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 40;
  o.export_cb = tlc_stpol_main_export;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "x", TLC_FMT_BIN10, &t), 0);
  buf_t want = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN10, 200, 31, &want);
  assert_int_equal(tlc_store_write(t, ev, 60), 0); /* segment 1 (40), segment 2 opened */
  tlc_store_tconf_t tc = { 0, 0, TLC_MAIN_XML, { 0 } };
  assert_int_equal(tlc_store_target_configure(t, &tc), 0);
  assert_int_equal(tlc_store_write(t, ev + 60, 140), 0); /* segment 2 still .txt; 3.. XML */
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "x");
  seglist_t l;
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 5);
  static char x[1 << 20];
  for (size_t i = 0; i < l.n; i++) {
    tlc_segname_t sn;
    char p[1300];
    assert_int_equal(tlc__segname_parse(l.name[i], &sn), TLC_SK_DATA);
    assert_int_equal(sn.xml, i >= 2);
    snprintf(p, sizeof p, "%s/%s.%s", d, sn.base, i >= 2 ? "xml" : "txt");
    slurp(p, x, sizeof x);
    if (i < 2) {
      assert_non_null(strstr(x, "* STATISTICS("));
      continue;
    }
    char want_tl[300];
    snprintf(want_tl, sizeof want_tl,
             "<Timeline binary=\"%s\" binaryVersion=\"1.0\" events=\"40\"/>", l.name[i]);
    assert_non_null(strstr(x, want_tl));
    assert_non_null(strstr(x, "<ProfilerExport"));
    assert_non_null(strstr(x, "records=\"40\""));
    assert_null(strstr(x, "p50=")); /* no quantiles, no windows in a segment's export */
    assert_null(strstr(x, "<Window"));
    snprintf(p, sizeof p, "%s/%s.manifest", d, sn.base);
    slurp(p, x, sizeof x);
    char want_m[200];
    snprintf(want_m, sizeof want_m, "\nexport %s.xml\n", sn.base);
    assert_non_null(strstr(x, want_m));
  }
  stored_equals(d, want.p, want.len);
  /* a crash: an XML segment left as a .part with a torn last record */
  char part[1300];
  snprintf(part, sizeof part, "%s/20260101T000000Z-00000009.xml.BIN.part", d);
  FILE *fp = fopen(part, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(want.p, 1, 24 * 7 + 5, fp), 24 * 7 + 5);
  fclose(fp);
  tlc_store_recovery_t sum;
  o.max_segments = 2;
  s = open_store(&loop, &o, &sum);
  assert_int_equal(sum.recovered, 1);
  assert_int_equal(sum.torn_bytes, 5);
  close_store(s, &loop);
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 2); /* retention at start: the newest 2 */
  assert_string_equal(l.name[1], "20260101T000000Z-00000009.xml.BIN");
  snprintf(part, sizeof part, "%s/20260101T000000Z-00000009.xml", d);
  slurp(part, x, sizeof x);
  assert_non_null(strstr(x, "events=\"7\""));
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 2); /* the deleted ones' exports went too */
  assert_int_equal(count_kind(d, TLC_SK_MANIFEST), 2);
  assert_int_equal(count_kind(d, TLC_SK_TORN), 1);
  buf_free(&want);
  free(ev);
}

/* ---- keep_skipped ---- */

/* clean bin11 records (data < 2^32, times from 1 s up) for resync tests */
static void clean_records(buf_t *b, size_t n, uint64_t seed, int64_t *t) {
  rng_t r;
  rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) {
    tlc_event_t e;
    uint8_t rec[24];
    memset(&e, 0, sizeof e);
    e.handle = (uint32_t)rng_below(&r, 6) << 28 | (uint32_t)rng_below(&r, 8);
    e.type = (uint8_t)rng_below(&r, 5);
    e.core = (uint8_t)rng_below(&r, 4);
    e.raw = (uint32_t)e.core << 4 | e.type;
    e.data = rng_below(&r, 1u << 30);
    *t += 1 + (int64_t)rng_below(&r, 5000);
    e.time_ns = *t;
    tlc_bin1x_encode(TLC_FMT_BIN11, &e, rec);
    buf_add(b, rec, 24);
  }
}

static void skipped_to_store(void *ud, uint64_t off, const uint8_t *buf, size_t len) {
  tlc_store_skipped(ud, off, buf, len);
}

/* decodes `in` in resync mode as a serial target would, 100 bytes at a time, giving the store
 * the bytes the decoder tells in no record (tlc_store_skipped) and every event, then ends the
 * stream; returns bytes_skipped */
static uint64_t feed_resync(tlc_store_target_t *t, tlc_format_t f, const buf_t *in) {
  tlc_dec_t d;
  tlc_dec_opts_t dopt = { 1, 0, 0, 0, skipped_to_store, t };
  tlc_event_t ev[256];
  assert_int_equal(tlc_dec_init(&d, f, &dopt), 0);
  for (size_t off = 0; off < in->len;) {
    size_t k = in->len - off < 100 ? in->len - off : 100, used = 0;
    int n = tlc_dec_push(&d, in->p + off, k, &used, ev, 256);
    assert_true(n >= 0);
    if (n > 0)
      assert_int_equal(tlc_store_write(t, ev, (size_t)n), 0);
    off += used;
  }
  int n;
  while ((n = tlc_dec_finish(&d, ev, 256)) > 0)
    assert_int_equal(tlc_store_write(t, ev, (size_t)n), 0);
  tlc_store_stream_end(t);
  uint64_t skipped = d.c.bytes_skipped;
  tlc_dec_fini(&d);
  return skipped;
}

/* SPEC 3: with keep_skipped, the bytes a resync skipped (and a stream's cut-off tail) are kept
 * in <data>.skipped beside the segment, byte for byte, at most keep_skipped per segment; the
 * rest is counted (gap skipped_unkept, counters); the segment holds exactly the records. */
static void skipped_case(uint64_t keep) {
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.keep_skipped = keep;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "ser", TLC_FMT_BIN11, &t), 0);
  buf_t in = { 0 }, records = { 0 }, noise = { 0 };
  int64_t tm = 1000000000;
  uint8_t junk[101];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (uint8_t)(0xF0 + (i * 7) % 16); /* type and area nibbles all 0xF: implausible */
  clean_records(&records, 50, 1, &tm);
  buf_add(&in, records.p, records.len);
  buf_add(&in, junk, 101);
  buf_add(&noise, junk, 101);
  size_t mark = records.len;
  clean_records(&records, 50, 2, &tm);
  buf_add(&in, records.p + mark, records.len - mark);
  buf_add(&in, junk + 3, 77);
  buf_add(&noise, junk + 3, 77);
  mark = records.len;
  clean_records(&records, 50, 3, &tm);
  buf_add(&in, records.p + mark, records.len - mark);
  buf_add(&in, records.p, 10); /* a cut-off record at the end */
  buf_add(&noise, records.p, 10);
  /* the decoder skipped exactly the noise */
  assert_int_equal(feed_resync(t, TLC_FMT_BIN11, &in), 101 + 77);
  size_t want = noise.len < keep ? noise.len : (size_t)keep;
  barrier(s, &loop);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.skipped_kept_bytes, want);
  assert_int_equal(c.skipped_unkept_bytes, noise.len - want);
  close_store(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "ser");
  buf_t got = { 0 };
  size_t nseg;
  read_all(d, &got, &nseg);
  assert_int_equal(nseg, 1);
  assert_int_equal(got.len, records.len);
  assert_memory_equal(got.p, records.p, records.len);
  seglist_t l;
  list_segments(d, &l, 0);
  char p[1300];
  snprintf(p, sizeof p, "%s/%s.skipped", d, l.name[0]);
  static char x[4096];
  size_t kept = slurp(p, x, sizeof x);
  assert_int_equal(kept, want);
  assert_memory_equal(x, noise.p, want);
  tlc_segread_t *r;
  snprintf(p, sizeof p, "%s/%s", d, l.name[0]);
  assert_int_equal(tlc_segread_open(p, TLC_FMT_NONE, 0, &r, NULL, 0), 0);
  tlc_seginfo_t inf;
  tlc_segread_info(r, &inf);
  uint64_t unkept = 0;
  for (size_t k = 0; k < inf.ngaps; k++) {
    const char *why;
    uint64_t cnt, off;
    tlc_segread_gap(r, k, &why, &cnt, &off);
    if (strcmp(why, "skipped_unkept") == 0)
      unkept += cnt;
  }
  tlc_segread_close(r);
  assert_int_equal(unkept, noise.len - want);
  buf_free(&got);
  buf_free(&in);
  buf_free(&records);
  buf_free(&noise);
}
static void test_skipped(void **state) {
  (void)state;
  skipped_case(1000); /* all of it: 101 + 77 skipped, 10 cut off */
}
static void test_skipped_cap(void **state) {
  (void)state;
  skipped_case(120); /* the first 120 kept, 68 counted */
}

/* evlog: noise between blocks is skipped by the block-magic resync and kept aside the same */
static void test_skipped_evlog(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.keep_skipped = 4096;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "efl", TLC_FMT_EVLOG, &t), 0);
  evgen_t g;
  evgen_init(&g, 0);
  buf_t blocks = { 0 }, noise = { 0 }, in = { 0 };
  uint8_t junk[300];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (uint8_t)(0x30 + i % 40); /* printable: no block magic in it */
  for (int k = 0; k < 3; k++) {
    g.len = 0;
    evgen_random(&g, 50 + (uint64_t)k, 40, 6);
    buf_add(&blocks, g.buf, g.len);
    buf_add(&in, g.buf, g.len);
    if (k < 2) {
      buf_add(&in, junk, 150 + 50 * (size_t)k);
      buf_add(&noise, junk, 150 + 50 * (size_t)k);
    }
  }
  assert_int_equal(feed_resync(t, TLC_FMT_EVLOG, &in), noise.len);
  close_store(s, &loop);
  char d[1200], p[1300];
  tdir(d, sizeof d, "efl");
  buf_t got = { 0 };
  read_all(d, &got, NULL);
  assert_int_equal(got.len, blocks.len);
  assert_memory_equal(got.p, blocks.p, blocks.len);
  seglist_t l;
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 1);
  snprintf(p, sizeof p, "%s/%s.skipped", d, l.name[0]);
  static char x[4096];
  assert_int_equal(slurp(p, x, sizeof x), noise.len);
  assert_memory_equal(x, noise.p, noise.len);
  buf_free(&got);
  buf_free(&blocks);
  buf_free(&noise);
  buf_free(&in);
  evgen_free(&g);
}

/* A segment sealed while the file system is full gets no manifest (ENOSPC): the sealer keeps it
 * and writes it once it can (here: at the last try when the store closes), so the segment
 * verifies with its own manifest, not one rebuilt from the data. */
/* More gaps than a manifest keeps entries for (TLC_GAP_MAX): the extra ones go into the latest
 * entry of their own reason, so each reason's total stays exact (sent = written + counted by
 * reason) - a disconnect after 300 buffer_full gaps is still one disconnect - and the text form
 * reads back with the same totals. */
static uint64_t gap_total(const tlc_manifest_t *m, const char *reason) {
  uint64_t n = 0;
  for (size_t i = 0; i < m->ngaps; i++)
    if (strcmp(m->gaps[i].reason, reason) == 0)
      n += m->gaps[i].count;
  return n;
}

static void test_manifest_gap_cap(void **state) {
  (void)state;
  tlc_manifest_t m, r;
  uint64_t bf = 0;
  char why[128];
  size_t len;
  tlc__manifest_init(&m);
  tlc__manifest_init(&r);
  m.format = TLC_FMT_BIN11;
  snprintf(m.data, sizeof m.data, "x.BIN");
  m.index_interval = 1024;
  for (unsigned i = 0; i < 300; i++) {
    assert_int_equal(tlc__manifest_add_gap(&m, "buffer_full", 100 + i), 0);
    bf += 100 + i;
    m.records++; /* a record between two gaps: each its own place */
    m.bytes += 24;
  }
  assert_int_equal(m.ngaps, TLC_GAP_MAX);
  assert_int_equal(tlc__manifest_add_gap(&m, "disconnect", 1), 0);
  assert_int_equal(tlc__manifest_add_gap(&m, "buffer_full", 7), 0);
  bf += 7;
  assert_int_equal(gap_total(&m, "buffer_full"), bf);
  assert_int_equal(gap_total(&m, "disconnect"), 1);
  assert_int_equal(m.ngaps, TLC_GAP_MAX + 1);
  char *txt = tlc__manifest_format(&m, &len);
  assert_non_null(txt);
  assert_int_equal(tlc__manifest_parse(&r, txt, len, why, sizeof why), 0);
  assert_int_equal(r.ngaps, m.ngaps);
  assert_int_equal(gap_total(&r, "buffer_full"), bf);
  assert_int_equal(gap_total(&r, "disconnect"), 1);
  tlc_free(txt);
  tlc__manifest_fini(&m);
  tlc__manifest_fini(&r);
}

static void test_manifest_retry(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 40;
  o.export_cb = tlc_stpol_main_export;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "mr", TLC_FMT_BIN11, &t), 0);
  buf_t want = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 50, 44, &want);
  f_hold_sync(1); /* segment 1's seal waits in fdatasync ... */
  assert_int_equal(tlc_store_write(t, ev, 50), 0);
  await_counter(s, c_written, 50);
  atomic_store(&f_full, 1); /* ... until the disk is full */
  f_hold_sync(0);
  barrier(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "mr");
  assert_int_equal(count_kind(d, TLC_SK_DATA), 1);     /* sealed, */
  assert_int_equal(count_kind(d, TLC_SK_MANIFEST), 0); /* its manifest could not be written */
  atomic_store(&f_full, 0);
  close_store(s, &loop);
  assert_int_equal(count_kind(d, TLC_SK_MANIFEST), 2);
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 2); /* segment 1's too, at the last try */
  buf_t got = { 0 };
  size_t nseg;
  read_all(d, &got, &nseg); /* asserts that no manifest was rebuilt */
  assert_int_equal(nseg, 2);
  assert_int_equal(got.len, want.len);
  assert_memory_equal(got.p, want.p, want.len);
  buf_free(&got);
  buf_free(&want);
  free(ev);
}

/* ---- main exports written late ---- */

static const char *map_rtos = "* CONTEXTS %NAME%,%HANDLE%\ntaskA,1\ntaskB,2\n\n"
                              "* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n"
                              "00000000,main,\n00000001,worker,\n";

/* Default options in the test's state directory, with tlcapd's main export hook. */
static void export_opts(tlc_store_opts_t *o) {
  tlc_store_opts_default(o);
  o->state_dir = tmp;
  o->export_cb = tlc_stpol_main_export;
}

/* Gives target t the names of map_rtos (parsed into m, which the caller finishes). */
static void set_rtos_mapping(tlc_store_target_t *t, tlc_mapping_t *m) {
  parse_mapping(m, map_rtos);
  assert_int_equal(tlc_store_target_set_mapping(t, m), 0);
}

/* The export beside segment `data` (a file name in dir) equals the one written from scratch for
 * that segment, with the given names and context area (mapping may be NULL), as a seal writes
 * it; returns its text in out. */
static void check_export(const char *dir, const char *data, const tlc_mapping_t *mapping,
                         uint32_t context_area, char *out, size_t cap) {
  tlc_segname_t sn;
  char path[1300], scratch[1300], want_p[1400];
  int k = tlc__segname_parse(data, &sn);
  assert_true(k == TLC_SK_DATA || k == TLC_SK_ZST);
  snprintf(path, sizeof path, "%s/%s", dir, data);
  snprintf(scratch, sizeof scratch, "%s/.scratch", tmp);
  mkdir(scratch, 0755);
  tlc_exset_t ex = { mapping, context_area != 0, context_area, { 0 } };
  assert_int_equal(tlc__segment_write_export(scratch, sn.base, "x", TLC_FMT_BIN11, sn.xml, sn.seq,
                                             path, 0, &ex, tlc_stpol_main_export, NULL),
                   0);
  static char want[1 << 16];
  snprintf(want_p, sizeof want_p, "%s/%s.%s", scratch, sn.base, sn.xml ? "xml" : "txt");
  size_t wn = slurp(want_p, want, sizeof want);
  unlink(want_p);
  rmdir(scratch);
  snprintf(path, sizeof path, "%s/%s.%s", dir, sn.base, sn.xml ? "xml" : "txt");
  size_t n = slurp(path, out, cap);
  assert_int_equal(n, wn);
  assert_string_equal(out, want);
  /* the manifest names it */
  static char m[1 << 16];
  char want_m[200];
  snprintf(path, sizeof path, "%s/%s.manifest", dir, sn.base);
  slurp(path, m, sizeof m);
  snprintf(want_m, sizeof want_m, "\nexport %s.%s\n", sn.base, sn.xml ? "xml" : "txt");
  assert_non_null(strstr(m, want_m));
}

/* ---- the exporter: main exports after the seal, one at a time ---- */

static uv_sem_t x_release;
static atomic_int x_hold, x_entered, x_in, x_max, x_calls, x_other_thread;
static atomic_long x_tid;

typedef struct {
  const tlc_timeline_t *tl;
  int held;
} x_tl_t;

/* the timeline of an export; the first export to read, its first chunk read, waits for the
 * test (an exporter in the middle of a long export) */
static int x_next(void *ud, const tlc_event_t **evs) {
  x_tl_t *w = ud;
  int n = w->tl->next(w->tl->ud, evs);
  if (!w->held && atomic_exchange(&x_hold, 0)) {
    w->held = 1;
    atomic_store(&x_entered, 1);
    uv_sem_wait(&x_release);
  }
  return n;
}
static int x_rewind(void *ud) {
  x_tl_t *w = ud;
  return w->tl->rewind(w->tl->ud);
}

/* tlcapd's main export through x_next, noting the thread that writes it and how many are
 * written at once */
static int x_export(void *ud, const tlc_store_export_t *x) {
  long tid = (long)syscall(SYS_gettid), none = 0;
  if (!atomic_compare_exchange_strong(&x_tid, &none, tid) && none != tid)
    atomic_store(&x_other_thread, 1);
  atomic_fetch_add(&x_calls, 1);
  int in = atomic_fetch_add(&x_in, 1) + 1;
  if (in > atomic_load(&x_max))
    atomic_store(&x_max, in);
  x_tl_t w = { x->timeline, 0 };
  tlc_timeline_t tl = { x_next, x_rewind, &w };
  tlc_store_export_t y = *x;
  y.timeline = &tl;
  int rc = tlc_stpol_main_export(ud, &y);
  atomic_fetch_sub(&x_in, 1);
  return rc;
}

static uint64_t c_sealed(const tlc_store_counters_t *c) {
  return c->segments_sealed;
}

/* the loop runs until *flag (polled each ms; the deadline fails the test) */
static atomic_int *x_poll_flag;
static int x_seen;
static void on_x_poll(uv_timer_t *tm) {
  if (atomic_load(x_poll_flag)) {
    x_seen = 1;
    uv_timer_stop(tm);
    uv_stop(tm->loop);
  }
}
static void await_flag(atomic_int *flag) {
  x_poll_flag = flag;
  x_seen = 0;
  poll_until(on_x_poll, &x_seen);
}

/* A sealed segment's main export is written after the seal by the exporter thread, one at a
 * time, and the manifest rewritten to name it; the segment is compressed only after it. While
 * the exporter is busy, segments are sealed without waiting for their exports, up to
 * EXPORT_QUEUE_MAX (4) waiting; then the sealer waits for room. A barrier covers every export
 * before it. Each export equals the one written from the segment's own bytes. */
static void test_export_background(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 100;
  o.export_cb = x_export;
  o.compress = 1;
  assert_int_equal(uv_sem_init(&x_release, 0), 0);
  atomic_store(&x_hold, 1);
  atomic_store(&x_entered, 0);
  atomic_store(&x_in, 0);
  atomic_store(&x_max, 0);
  atomic_store(&x_calls, 0);
  atomic_store(&x_other_thread, 0);
  atomic_store(&x_tid, 0);
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "bg", TLC_FMT_BIN11, &t), 0);
  buf_t want = { 0 };
  tlc_event_t *ev = gen_bin(TLC_FMT_BIN11, 700, 5, &want);
  char d[1200];
  tdir(d, sizeof d, "bg");
  /* record 101 closes segment 1: the exporter takes its export and is held in it */
  assert_int_equal(tlc_store_write(t, ev, 101), 0);
  await_counter(s, c_written, 101);
  await_flag(&x_entered);
  /* segments 2-6 are sealed without waiting for it: 2-5 wait for the exporter, and the sealer
   * waits for room to hand 6's over */
  assert_int_equal(tlc_store_write(t, ev + 101, 500), 0);
  await_counter(s, c_sealed, 6);
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.export_queue, 5); /* 4 waiting, 1 being written */
  assert_int_equal(c.exports_background, 5);
  assert_int_equal(c.seal_queue, 1); /* segment 6's job: its export not handed over yet */
  assert_int_equal(count_kind(d, TLC_SK_DATA), 6); /* sealed, plain: not compressed yet */
  assert_int_equal(count_kind(d, TLC_SK_ZST), 0);
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 0);
  assert_int_equal(atomic_load(&x_calls), 1);
  uv_sem_post(&x_release);
  barrier(s, &loop);
  tlc_store_counters(s, &c);
  assert_int_equal(c.export_queue, 0);
  assert_int_equal(c.seal_queue, 0);
  assert_int_equal(c.exports_background, 6);
  assert_int_equal(c.exports_pending, 0);
  assert_int_equal(c.exports_late, 0); /* late means late for lack of space */
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 6);
  assert_int_equal(atomic_load(&x_calls), 6);
  assert_int_equal(atomic_load(&x_max), 1);          /* never two exports at once */
  assert_int_equal(atomic_load(&x_other_thread), 0); /* all on the exporter */
  assert_int_equal(tlc_store_write(t, ev + 601, 99), 0);
  close_store(s, &loop);
  /* every sealed segment compressed after its export, which equals the one written from the
   * segment's own bytes and is named in its manifest */
  seglist_t l;
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 7);
  assert_int_equal(count_kind(d, TLC_SK_ZST), 7);
  char name[300], in_d[1400];
  static char got[1 << 16];
  for (size_t i = 0; i < 6; i++) {
    tlc_segname_t sn;
    assert_int_equal(tlc__segname_parse(l.name[i], &sn), TLC_SK_ZST);
    snprintf(name, sizeof name, "%s", l.name[i]);
    name[strlen(name) - 4] = 0; /* without .zst: a plain copy beside it, from the bytes sent */
    snprintf(in_d, sizeof in_d, "%s/%s", d, name);
    FILE *fp = fopen(in_d, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(want.p + i * 100 * 24, 1, 100 * 24, fp), 100 * 24);
    fclose(fp);
    check_export(d, name, NULL, 0, got, sizeof got);
    unlink(in_d);
  }
  assert_int_equal(atomic_load(&x_other_thread), 0);
  uv_sem_destroy(&x_release);
  buf_free(&want);
  free(ev);
}

/* A segment sealed while the file system is full gets neither its main export nor its manifest;
 * once space returns (the writer resumes by itself) both are written, the export with the
 * target's names and context area as they were when the segment was closed, equal to the export
 * a seal writes for those bytes, and named in the manifest. */
static void test_export_retry(void **state) {
  (void)state;
  int resumed = 0;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 40;
  o.probe_interval_ms = 1;
  o.resume_free_bytes = 1;
  o.event_cb = on_event;
  o.event_ud = &resumed;
  o.export_cb = tlc_stpol_main_export;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "er", TLC_FMT_BIN11, &t), 0);
  tlc_store_tconf_t tc = { 1, 0x30000005, TLC_MAIN_TEXT1, { 0 } };
  assert_int_equal(tlc_store_target_configure(t, &tc), 0);
  tlc_mapping_t m;
  set_rtos_mapping(t, &m);
  tlc_event_t *ev = gen_rtos(80);
  f_hold_sync(1); /* segment 1's seal waits in fdatasync ... */
  assert_int_equal(tlc_store_write(t, ev, 50), 0);
  await_counter(s, c_written, 50);
  atomic_store(&f_full, 1); /* ... until the disk is full, for the writer too */
  assert_int_equal(tlc_store_write(t, ev + 50, 20), 0);
  f_hold_sync(0);
  barrier(s, &loop);
  char d[1200];
  tdir(d, sizeof d, "er");
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.disk_full, 1);
  assert_int_equal(c.exports_pending, 1);
  assert_int_equal(count_kind(d, TLC_SK_DATA), 1);     /* sealed, */
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 0);   /* without its export */
  assert_int_equal(count_kind(d, TLC_SK_MANIFEST), 0); /* and its manifest */
  atomic_store(&f_full, 0);
  run_until(&loop, &resumed); /* the writer's probe: space is back (it queues a retry first) */
  barrier(s, &loop);          /* the sealer's jobs before the barrier are done */
  tlc_store_counters(s, &c);
  assert_int_equal(c.exports_pending, 0);
  assert_int_equal(c.exports_late, 1);
  seglist_t l;
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 1);
  static char x[1 << 16];
  check_export(d, l.name[0], &m, 0x30000005, x, sizeof x);
  assert_non_null(strstr(x, "\n00000000,main,\n"));
  assert_non_null(strstr(x, "CONTEXT(taskA)"));
  close_store(s, &loop);
  tlc_mapping_fini(&m);
  free(ev);
}

/* writes a segment as a crash leaves it: <dir>/<name>.part holding the events' records and a
 * torn record of 5 bytes */
static void write_part(const char *target, const char *name, const tlc_event_t *ev, size_t n) {
  char p[1300];
  snprintf(p, sizeof p, "%s/%s", tmp, target);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/%s/%s.part", tmp, target, name);
  FILE *fp = fopen(p, "wb");
  assert_non_null(fp);
  uint8_t rec[24];
  for (size_t i = 0; i < n; i++) {
    tlc_bin1x_encode(TLC_FMT_BIN11, &ev[i], rec);
    assert_int_equal(fwrite(rec, 1, 24, fp), 24);
  }
  assert_int_equal(fwrite(rec, 1, 5, fp), 5);
  fclose(fp);
}

/* A segment sealed by crash recovery is exported with its target's settings: its export waits
 * until a target of that name is opened and configured (context area and mapping), then equals
 * the export a seal writes with them. A recovered segment whose target is never opened is
 * exported at close, without settings. */
static void test_export_recovered(void **state) {
  (void)state;
  tlc_event_t *ev = gen_rtos(60);
  write_part("rtos", "20260101T000000Z-00000003.txt.BIN", ev, 60);
  write_part("gone", "20260101T000000Z-00000001.txt.BIN", ev, 30);
  tlc_store_opts_t o;
  export_opts(&o);
  tlc_store_recovery_t sum;
  tlc_store_t *s = open_store(&loop, &o, &sum);
  assert_int_equal(sum.recovered, 2);
  assert_int_equal(sum.exports_deferred, 2);
  assert_int_equal(sum.exports_unset, 0);
  char d[1200], g[1200];
  tdir(d, sizeof d, "rtos");
  tdir(g, sizeof g, "gone");
  barrier(s, &loop);
  assert_int_equal(count_kind(d, TLC_SK_DATA), 1);   /* sealed, */
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 0); /* its export waits for the target */
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.exports_pending, 2);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "rtos", TLC_FMT_BIN11, &t), 0);
  tlc_store_tconf_t tc = { 1, 0x30000005, TLC_MAIN_TEXT1, { 0 } };
  assert_int_equal(tlc_store_target_configure(t, &tc), 0);
  tlc_mapping_t m;
  set_rtos_mapping(t, &m);
  barrier(s, &loop);
  tlc_store_counters(s, &c);
  assert_int_equal(c.exports_pending, 1); /* "gone"'s still waits */
  assert_int_equal(c.exports_late, 1);
  static char x[1 << 16];
  check_export(d, "20260101T000000Z-00000003.txt.BIN", &m, 0x30000005, x, sizeof x);
  assert_non_null(strstr(x, "\n00000000,main,\n"));
  assert_non_null(strstr(x, "\n00000001,worker,\n"));
  assert_non_null(strstr(x, "CONTEXT(taskA) %HANDLE%,%VALUE%,%COUNT%,%T.NET%\n"));
  assert_null(strstr(x, "core0")); /* every event ran in a task */
  assert_int_equal(count_kind(g, TLC_SK_EXPORT), 0);
  close_store(s, &loop);
  check_export(g, "20260101T000000Z-00000001.txt.BIN", NULL, 0, x, sizeof x);
  assert_null(strstr(x, "main")); /* no names: handles only, each core its context */
  assert_null(strstr(x, "taskA"));
  assert_non_null(strstr(x, "* CONTEXTS %NAME%,%HANDLE%\ncore0,"));
  /* idempotent: a restart finds every export in place and named */
  s = open_store(&loop, &o, &sum);
  assert_int_equal(sum.exports_deferred, 0);
  close_store(s, &loop);
  tlc_mapping_fini(&m);
  free(ev);
}

static void on_compressed(void *ud, const tlc_store_event_t *ev) {
  if (ev->kind == TLC_SEV_COMPRESSED)
    *(int *)ud = 1;
}

/* A recovered segment compressed before its target is configured: its export is read from the
 * .zst (the same export). */
static void test_export_recovered_zst(void **state) {
  (void)state;
  tlc_event_t *ev = gen_rtos(40);
  write_part("rz", "20260101T000000Z-00000002.txt.BIN", ev, 40);
  int compressed = 0;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.compress = 1;
  o.event_cb = on_compressed;
  o.event_ud = &compressed;
  o.export_cb = tlc_stpol_main_export;
  tlc_store_recovery_t sum;
  tlc_store_t *s = open_store(&loop, &o, &sum);
  assert_int_equal(sum.exports_deferred, 1);
  run_until(&loop, &compressed);
  char d[1200];
  tdir(d, sizeof d, "rz");
  assert_int_equal(count_kind(d, TLC_SK_ZST), 1);
  assert_int_equal(count_kind(d, TLC_SK_DATA), 0);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "rz", TLC_FMT_BIN11, &t), 0);
  tlc_mapping_t m;
  set_rtos_mapping(t, &m);
  barrier(s, &loop);
  static char x[1 << 16];
  check_export(d, "20260101T000000Z-00000002.txt.BIN.zst", &m, 0, x, sizeof x);
  assert_non_null(strstr(x, "\n00000001,worker,\n"));
  close_store(s, &loop);
  tlc_mapping_fini(&m);
  free(ev);
}

/* The cap on exports waiting for their target (max_deferred_exports): those beyond it are
 * written during recovery, without the target's settings, and counted. */
static void test_export_deferred_cap(void **state) {
  (void)state;
  tlc_event_t *ev = gen_rtos(20);
  write_part("cap", "20260101T000000Z-00000001.txt.BIN", ev, 20);
  write_part("cap", "20260101T000000Z-00000002.txt.BIN", ev, 20);
  write_part("cap", "20260101T000000Z-00000003.txt.BIN", ev, 20);
  tlc_store_opts_t o;
  export_opts(&o);
  o.max_deferred_exports = 2;
  tlc_store_recovery_t sum;
  tlc_store_t *s = open_store(&loop, &o, &sum);
  assert_int_equal(sum.recovered, 3);
  assert_int_equal(sum.exports_deferred, 2);
  assert_int_equal(sum.exports_unset, 1);
  char d[1200];
  tdir(d, sizeof d, "cap");
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 1); /* written without settings */
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  assert_int_equal(c.exports_pending, 2);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "cap", TLC_FMT_BIN11, &t), 0);
  tlc_mapping_t m;
  set_rtos_mapping(t, &m);
  barrier(s, &loop);
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 3);
  seglist_t l;
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 3);
  size_t named = 0;
  static char x[1 << 16];
  for (size_t i = 0; i < l.n; i++) {
    read_export(d, &l, i, x, sizeof x);
    named += strstr(x, "\n00000001,worker,\n") != NULL;
  }
  assert_int_equal(named, 2);
  close_store(s, &loop);
  tlc_mapping_fini(&m);
  free(ev);
}

/* An export still missing when the store closes (the file system stayed full) is written at the
 * next start, once its target is configured, and the manifest (rebuilt from the data, as the
 * seal could not write it either) names it. */
static void test_export_next_start(void **state) {
  (void)state;
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = tmp;
  o.max_segment_bytes = 24 * 40;
  o.export_cb = tlc_stpol_main_export;
  tlc_store_t *s = open_store(&loop, &o, NULL);
  tlc_store_target_t *t;
  assert_int_equal(tlc_store_target_open(s, "ns", TLC_FMT_BIN11, &t), 0);
  tlc_event_t *ev = gen_rtos(50);
  f_hold_sync(1);
  assert_int_equal(tlc_store_write(t, ev, 50), 0);
  await_counter(s, c_written, 50);
  atomic_store(&f_full, 1);
  f_hold_sync(0);
  close_store(s, &loop); /* both segments sealed while full: no export, no manifest */
  atomic_store(&f_full, 0);
  char d[1200];
  tdir(d, sizeof d, "ns");
  assert_int_equal(count_kind(d, TLC_SK_DATA), 2);
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 0);
  assert_int_equal(count_kind(d, TLC_SK_MANIFEST), 0);
  tlc_store_recovery_t sum;
  s = open_store(&loop, &o, &sum);
  assert_int_equal(sum.rebuilt_manifests, 2);
  assert_int_equal(sum.exports_deferred, 2);
  assert_int_equal(tlc_store_target_open(s, "ns", TLC_FMT_BIN11, &t), 0);
  tlc_mapping_t m;
  set_rtos_mapping(t, &m);
  barrier(s, &loop);
  assert_int_equal(count_kind(d, TLC_SK_EXPORT), 2);
  seglist_t l;
  list_segments(d, &l, 0);
  assert_int_equal(l.n, 2);
  static char x[1 << 16];
  for (size_t i = 0; i < l.n; i++) {
    check_export(d, l.name[i], &m, 0, x, sizeof x);
    assert_non_null(strstr(x, "\n00000001,worker,\n"));
  }
  close_store(s, &loop);
  tlc_mapping_fini(&m);
  free(ev);
}

int main(int argc, char **argv) {
  if (argc > 1)
    cmocka_set_test_filter(argv[1]); /* e.g. "test_roundtrip_*" */
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_roundtrip_bin11, setup, teardown),
    cmocka_unit_test_setup_teardown(test_roundtrip_bin10, setup, teardown),
    cmocka_unit_test_setup_teardown(test_roundtrip_evlog, setup, teardown),
    cmocka_unit_test_setup_teardown(test_write_chunk_as_received, setup, teardown),
    cmocka_unit_test_setup_teardown(test_write_chunk_evlog_as_received, setup, teardown),
    cmocka_unit_test_setup_teardown(test_write_chunk_runs, setup, teardown),
    cmocka_unit_test_setup_teardown(test_read_buffer_lent, setup, teardown),
    cmocka_unit_test_setup_teardown(test_read_buffer_lent_drops, setup, teardown),
    cmocka_unit_test_setup_teardown(test_read_buffer_full, setup, teardown),
    cmocka_unit_test_setup_teardown(test_range_read, setup, teardown),
    cmocka_unit_test_setup_teardown(test_zstd, setup, teardown),
    cmocka_unit_test_setup_teardown(test_zstd_after_restart, setup, teardown),
    cmocka_unit_test_setup_teardown(test_eintr_storm, setup, teardown),
    cmocka_unit_test_setup_teardown(test_disk_full, setup, teardown),
    cmocka_unit_test_setup_teardown(test_fsync_eio, setup, teardown),
    cmocka_unit_test_setup_teardown(test_write_eio, setup, teardown),
    cmocka_unit_test_setup_teardown(test_buffer_full, setup, teardown),
    cmocka_unit_test_setup_teardown(test_gather_pool, setup, teardown),
    cmocka_unit_test_setup_teardown(test_gather_pool_at_start, setup, teardown),
    cmocka_unit_test_setup_teardown(test_writer_wakes, setup, teardown),
    cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
    cmocka_unit_test_setup_teardown(test_retention_held_oldest, setup, teardown),
    cmocka_unit_test_setup_teardown(test_age_rotation, setup, teardown),
    cmocka_unit_test_setup_teardown(test_seal_off_append_path, setup, teardown),
    cmocka_unit_test_setup_teardown(test_export_settings, setup, teardown),
    cmocka_unit_test_setup_teardown(test_export_background, setup, teardown),
    cmocka_unit_test_setup_teardown(test_xml_main_export, setup, teardown),
    cmocka_unit_test_setup_teardown(test_skipped, setup, teardown),
    cmocka_unit_test_setup_teardown(test_skipped_cap, setup, teardown),
    cmocka_unit_test_setup_teardown(test_skipped_evlog, setup, teardown),
    cmocka_unit_test_setup_teardown(test_manifest_retry, setup, teardown),
    cmocka_unit_test(test_manifest_gap_cap),
    cmocka_unit_test_setup_teardown(test_export_retry, setup, teardown),
    cmocka_unit_test_setup_teardown(test_export_recovered, setup, teardown),
    cmocka_unit_test_setup_teardown(test_export_recovered_zst, setup, teardown),
    cmocka_unit_test_setup_teardown(test_export_deferred_cap, setup, teardown),
    cmocka_unit_test_setup_teardown(test_export_next_start, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
