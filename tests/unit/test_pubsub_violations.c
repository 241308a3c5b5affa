/* test_pubsub_violations.c - budget violations served by the subscriber server (SPEC 13,
 * docs/budgets.md "Served"): the ViolationsRequest's reply and the TE_VIOLATION target events
 * with their rate limit, on a real loop with real sockets (127.0.0.1, port 0).
 *
 * A real engine with a real watch (budget/budget.h) is fed hand-made event streams whose
 * violations are known from the stream itself (each activation's NET is written down below);
 * the watch's on_violation hands each to tlc_pubsub_violation as the daemon's fan-out does.
 * The view is a fake whose budgets hook returns that watch. The subscriber is a plain
 * non-blocking socket; waits are bounded and driven by the loop; the rate limit's refill is
 * awaited with a loop timer (the limit is about time). Every case ends with the server closed,
 * uv_loop_close() == 0 and zero live bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "budget/budget.h"
#include "proto/convert.h"
#include "proto/frame.h"
#include "pubsub/pubsub.h"
#include "testalloc.h"
#include "vserve/vserve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the fake view: one target "board-1" with an engine and a watch ---------------------- */

typedef struct fix {
  uv_loop_t loop;
  tlc_pubsub_t *ps;
  int port, closed;
  tlc_engine_t *e;
  tlc_bwatch_t *w;
  tlc_mapping_t map;
  int hook;          /* the view has a budgets hook */
  uint64_t seen;     /* violations the watch reported */
  tlc_table_t empty; /* what snapshots return */
} fix_t;

static fix_t *g; /* the watch's on_violation has no other way to the server */

static size_t f_count(void *ud) {
  (void)ud;
  return 2;
}

static const char *const names[2] = { "board-1", "board-2" };

static int f_info(void *ud, size_t i, tlc_view_target_t *out) {
  (void)ud;
  if (i >= 2)
    return TLC_ERANGE;
  memset(out, 0, sizeof(*out));
  out->name = names[i];
  out->format = TLC_FMT_BIN11;
  out->connected = 1;
  out->peer = "127.0.0.1:1";
  return 0;
}

static int f_find(void *ud, const char *name, size_t *idx) {
  size_t i;
  (void)ud;
  for (i = 0; i < 2; i++)
    if (strcmp(names[i], name) == 0) {
      *idx = i;
      return 0;
    }
  return TLC_ERANGE;
}

static int f_snapshot(void *ud, size_t i, tlc_table_t *t, const tlc_snap_opts_t *so) {
  (void)ud;
  (void)i;
  (void)so;
  tlc_table_clear(t);
  t->format = TLC_FMT_BIN11;
  return 0;
}

static const tlc_mapping_t *f_mapping(void *ud, size_t i) {
  fix_t *f = ud;
  return i == 0 ? &f->map : NULL;
}

static int f_context(void *ud, size_t i, uint32_t context, tlc_ctx_t *c) {
  fix_t *f = ud;
  if (i != 0)
    return TLC_ERANGE;
  return tlc_engine_context(f->e, context, c);
}

static const struct tlc_bwatch *f_budgets(void *ud, const char *name) {
  fix_t *f = ud;
  return strcmp(name, "board-1") == 0 ? f->w : NULL;
}

/* the watch's hooks: names as the daemon's would give them */
static const char *w_area_name(void *ud, uint32_t handle) {
  (void)ud;
  return handle == 1 ? "TaskA" : handle == 2 ? "TaskB" : NULL;
}

static const char *w_ctx_name(void *ud, uint32_t context, char *buf, size_t len) {
  fix_t *f = ud;
  tlc_ctx_t c;
  if (tlc_engine_context(f->e, context, &c) != 0)
    return NULL;
  snprintf(buf, len, "core%u", (unsigned)c.core);
  return buf;
}

static void w_on_violation(void *ud, const tlc_violation_t *v) {
  fix_t *f = ud;
  f->seen++;
  tlc_pubsub_violation(f->ps, "board-1", f->w, v, tlc_bwatch_key(f->w, v->budget), uv_now(&f->loop),
                       0);
}

static int64_t w_wall(void *ud) {
  (void)ud;
  return 1700000000000;
}

static void closed_cb(void *ud) {
  ((fix_t *)ud)->closed = 1;
}

static const char budgets[] = "[budget net_a]\narea = TaskA\nstat = net\nmax = 100ns\n"
                              "[budget b_min]\narea = TaskB\ncontext = core1\nstat = net\n"
                              "min = 500ns\n";

static void fix_start(fix_t *f, int hook) {
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t o;
  tlc_pubsub_opts_t po;
  tlc_view_t p;
  tlc_map_area_t a;
  char err[256];
  memset(f, 0, sizeof(*f));
  g = f;
  testalloc_install();
  assert_int_equal(uv_loop_init(&f->loop), 0);
  tlc_mapping_init(&f->map);
  memset(&a, 0, sizeof(a));
  a.parent = a.state_handle = 0xFFFFFFFFu;
  a.handle = 1;
  a.name = (char *)"TaskA";
  assert_int_equal(tlc_mapping_add(&f->map, &a), 0);
  a.handle = 2;
  a.name = (char *)"TaskB";
  assert_int_equal(tlc_mapping_add(&f->map, &a), 0);
  tlc_mapping_finish(&f->map);
  tlc_tbudget_set_init(&s);
  if (tlc_tbudget_parse(&s, budgets, strlen(budgets), "b.ini", err, sizeof(err)) != 0)
    fail_msg("%s", err);
  memset(&o, 0, sizeof(o));
  o.keep = 4;
  o.area_name = w_area_name;
  o.ctx_name = w_ctx_name;
  o.on_violation = w_on_violation;
  o.wall_ms = w_wall;
  o.ud = f;
  assert_int_equal(tlc_bwatch_new(&f->w, "board-1", &s, &o), 0);
  tlc_tbudget_set_fini(&s);
  assert_int_equal(tlc_engine_new(&f->e, TLC_FMT_BIN11, NULL), 0);
  tlc_bwatch_attach(f->w, f->e);
  memset(&p, 0, sizeof(p));
  p.count = f_count;
  p.info = f_info;
  p.find = f_find;
  p.snapshot = f_snapshot;
  p.mapping = f_mapping;
  p.context = f_context;
  p.ud = f;
  if (hook) {
    p.budgets = f_budgets;
    p.budgets_ud = f;
  }
  tlc_pubsub_opts_default(&po);
  po.write_on_loop = 1;
  assert_int_equal(tlc_pubsub_new(&f->loop, &po, &p, &f->ps), 0);
  assert_int_equal(tlc_pubsub_listen_tcp(f->ps, "127.0.0.1", 0, &f->port), 0);
}

static void fix_stop(fix_t *f) {
  int i;
  tlc_pubsub_close(f->ps, closed_cb, f);
  for (i = 0; i < 1000 && !f->closed; i++)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_true(f->closed);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  tlc_bwatch_free(f->w);
  tlc_engine_free(f->e);
  tlc_mapping_fini(&f->map);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
  g = NULL;
}

static void ev(tlc_event_t *e, int64_t t, uint32_t h, unsigned type, unsigned core) {
  memset(e, 0, sizeof(*e));
  e->time_ns = t;
  e->handle = h;
  e->type = (uint8_t)type;
  e->core = (uint8_t)core;
}

/* ---- a raw subscriber -------------------------------------------------------------------- */

typedef struct rc {
  int fd;
  tlc_frame_dec_t dec;
  uint8_t buf[65536];
  size_t len, off;
  int eof;
} rc_t;

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void rc_open(rc_t *c, int port) {
  struct sockaddr_in sa;
  memset(c, 0, sizeof(*c));
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(c->fd >= 0);
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  tlc_frame_dec_init(&c->dec, 256u << 20);
}

static void rc_close(rc_t *c) {
  close(c->fd);
  tlc_frame_dec_fini(&c->dec);
}

static void rc_send(rc_t *c, Tlcap__ClientMessage *m) {
  size_t payload, n = tlc_pb_frame_size(&m->base, &payload);
  uint8_t *buf = malloc(n);
  assert_non_null(buf);
  tlc_pb_frame_pack(&m->base, payload, buf);
  assert_int_equal(send(c->fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
  free(buf);
}

/* The next message, running the loop while waiting; NULL on EOF or after `ms`. */
static Tlcap__ServerMessage *rc_recv_t(rc_t *c, fix_t *f, int64_t ms) {
  int64_t deadline = mono_ms() + ms;
  for (;;) {
    ssize_t n;
    while (c->off < c->len) {
      const uint8_t *fr;
      size_t used, flen;
      int r = tlc_frame_dec_feed(&c->dec, c->buf + c->off, c->len - c->off, &used, &fr, &flen);
      assert_true(r >= 0);
      c->off += used;
      if (r == 1) {
        Tlcap__ServerMessage *m = tlcap__server_message__unpack(&tlc_pb_allocator, flen, fr);
        assert_non_null(m);
        return m;
      }
    }
    c->off = c->len = 0;
    n = recv(c->fd, c->buf, sizeof(c->buf), 0);
    if (n > 0) {
      c->len = (size_t)n;
      continue;
    }
    if (n == 0 || errno != EAGAIN) {
      c->eof = 1;
      return NULL;
    }
    if (mono_ms() > deadline)
      return NULL;
    uv_run(&f->loop, UV_RUN_NOWAIT);
    {
      struct pollfd pf[2];
      int to = uv_backend_timeout(&f->loop);
      pf[0].fd = c->fd;
      pf[0].events = POLLIN;
      pf[1].fd = uv_backend_fd(&f->loop);
      pf[1].events = POLLIN;
      poll(pf, 2, to < 0 || to > 50 ? 50 : to);
    }
  }
}

static void msg_free(Tlcap__ServerMessage *m) {
  tlcap__server_message__free_unpacked(m, &tlc_pb_allocator);
}

static Tlcap__ServerMessage *rc_expect(rc_t *c, fix_t *f, int kind) {
  int i;
  for (i = 0; i < 1000; i++) {
    Tlcap__ServerMessage *m = rc_recv_t(c, f, 5000);
    if (m == NULL)
      fail_msg("no message of kind %d (eof=%d)", kind, c->eof);
    if ((int)m->msg_case == kind)
      return m;
    msg_free(m);
  }
  fail_msg("too many messages");
  return NULL;
}

static void rc_hello(rc_t *c, fix_t *f) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__Hello hi = TLCAP__HELLO__INIT;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_HELLO;
  cm.hello = &hi;
  cm.request_id = 1;
  hi.protocol_version = 1;
  rc_send(c, &cm);
  msg_free(rc_expect(c, f, TLCAP__SERVER_MESSAGE__MSG_WELCOME));
}

static void rc_subscribe(rc_t *c, fix_t *f, const char *target) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__Subscribe s = TLCAP__SUBSCRIBE__INIT;
  char *t[1];
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_SUBSCRIBE;
  cm.subscribe = &s;
  cm.request_id = 7;
  s.subscription_id = 1;
  t[0] = (char *)target;
  s.targets = t;
  s.n_targets = 1;
  s.no_snapshots = 1;
  s.interval_ms = 1000;
  rc_send(c, &cm);
  msg_free(rc_expect(c, f, TLCAP__SERVER_MESSAGE__MSG_ACK));
}

static Tlcap__ServerMessage *rc_violations(rc_t *c, fix_t *f, const char *target,
                                           const char *budget, uint32_t max_recent) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ViolationsRequest r = TLCAP__VIOLATIONS_REQUEST__INIT;
  Tlcap__ServerMessage *m;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_VIOLATIONS;
  cm.violations = &r;
  cm.request_id = 42;
  r.target = (char *)target;
  r.budget = (char *)(budget != NULL ? budget : "");
  r.max_recent = max_recent;
  rc_send(c, &cm);
  for (;;) {
    m = rc_recv_t(c, f, 5000);
    assert_non_null(m);
    if (m->request_id == 42)
      return m;
    msg_free(m);
  }
}

/* ---- the request ------------------------------------------------------------------------- */

/* TaskA (1) on core 0: activations of NET 200, 50 and 300 ns: net_a (max 100ns) is broken by
 * the first (#1) and the third (#2, the worst: 200 over). TaskB (2) on core 1: NET 150 and
 * 700: b_min (min 500ns on core1) broken by the first (350 under). */
static void push_known(fix_t *f) {
  tlc_event_t v[16];
  size_t n = 0;
  ev(&v[n++], 1000, 1, TLC_EV_ENTRY, 0);
  ev(&v[n++], 1200, 1, TLC_EV_EXIT, 0);
  ev(&v[n++], 1300, 2, TLC_EV_ENTRY, 1);
  ev(&v[n++], 1450, 2, TLC_EV_EXIT, 1);
  ev(&v[n++], 2000, 1, TLC_EV_ENTRY, 0);
  ev(&v[n++], 2050, 1, TLC_EV_EXIT, 0);
  ev(&v[n++], 3000, 1, TLC_EV_ENTRY, 0);
  ev(&v[n++], 3300, 1, TLC_EV_EXIT, 0);
  ev(&v[n++], 4000, 2, TLC_EV_ENTRY, 1);
  ev(&v[n++], 4700, 2, TLC_EV_EXIT, 1);
  tlc_engine_push(f->e, v, n);
}

static void test_request(void **state) {
  fix_t f;
  rc_t c;
  Tlcap__ServerMessage *m;
  Tlcap__ViolationsReply *r;
  Tlcap__BudgetViolations *a, *b;
  (void)state;
  fix_start(&f, 1);
  push_known(&f);
  assert_int_equal(f.seen, 3);
  rc_open(&c, f.port);
  rc_hello(&c, &f);

  m = rc_violations(&c, &f, "board-1", NULL, 0);
  assert_int_equal(m->msg_case, TLCAP__SERVER_MESSAGE__MSG_VIOLATIONS);
  r = m->violations;
  assert_string_equal(r->target, "board-1");
  assert_int_equal(r->total, 3);
  assert_int_equal(r->dropped_keys, 0);
  assert_int_equal(r->n_budgets, 2);
  a = r->budgets[0];
  b = r->budgets[1];
  assert_string_equal(a->name, "net_a");
  assert_string_equal(a->area, "TaskA");
  assert_string_equal(a->context, "");
  assert_string_equal(a->stat, "net");
  assert_true(a->has_max);
  assert_false(a->has_min);
  assert_int_equal(a->max, 100);
  assert_int_equal(a->total, 2);
  assert_non_null(a->worst);
  assert_int_equal(a->worst->value, 300);
  assert_int_equal(a->worst->limit, 100);
  assert_int_equal(a->worst->start_ns, 3000);
  assert_int_equal(a->worst->end_ns, 3300);
  assert_int_equal(a->worst->number, 2);
  assert_true(a->worst->over);
  assert_int_equal(a->worst->wall_ms, 1700000000000);
  assert_string_equal(a->worst->budget, "net_a");
  assert_string_equal(a->worst->area, "TaskA");
  assert_string_equal(a->worst->context, "core0");
  assert_int_equal(a->worst->handle, 1);
  assert_int_equal(a->n_recent, 2);
  assert_int_equal(a->recent[0]->value, 200);
  assert_int_equal(a->recent[0]->start_ns, 1000);
  assert_int_equal(a->recent[0]->number, 1);
  assert_int_equal(a->recent[1]->value, 300);
  assert_int_equal(a->n_counts, 1);
  assert_int_equal(a->counts[0]->handle, 1);
  assert_string_equal(a->counts[0]->area, "TaskA");
  assert_string_equal(a->counts[0]->context, "core0");
  assert_int_equal(a->counts[0]->count, 2);
  assert_string_equal(b->name, "b_min");
  assert_string_equal(b->context, "core1");
  assert_true(b->has_min);
  assert_int_equal(b->min, 500);
  assert_int_equal(b->total, 1);
  assert_int_equal(b->n_recent, 1);
  assert_false(b->recent[0]->over);
  assert_int_equal(b->recent[0]->value, 150);
  assert_int_equal(b->recent[0]->limit, 500);
  assert_string_equal(b->recent[0]->area, "TaskB");
  assert_string_equal(b->recent[0]->context, "core1");
  assert_int_equal(b->n_counts, 1);
  assert_int_equal(b->counts[0]->count, 1);
  msg_free(m);

  /* one budget, the newest kept one only */
  m = rc_violations(&c, &f, "board-1", "net_a", 1);
  r = m->violations;
  assert_int_equal(r->n_budgets, 1);
  assert_string_equal(r->budgets[0]->name, "net_a");
  assert_int_equal(r->budgets[0]->total, 2);
  assert_int_equal(r->budgets[0]->n_recent, 1);
  assert_int_equal(r->budgets[0]->recent[0]->value, 300);
  msg_free(m);

  /* a known target without a watch: no budgets */
  m = rc_violations(&c, &f, "board-2", NULL, 0);
  assert_int_equal(m->msg_case, TLCAP__SERVER_MESSAGE__MSG_VIOLATIONS);
  assert_int_equal(m->violations->n_budgets, 0);
  assert_int_equal(m->violations->total, 0);
  msg_free(m);

  /* an unknown target: the usual error, the connection stays */
  m = rc_violations(&c, &f, "nope", NULL, 0);
  assert_int_equal(m->msg_case, TLCAP__SERVER_MESSAGE__MSG_ERROR);
  assert_int_equal(m->error->code, TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET);
  assert_false(m->error->fatal);
  msg_free(m);
  m = rc_violations(&c, &f, "board-1", "no_such_budget", 0);
  assert_int_equal(m->violations->n_budgets, 0);
  msg_free(m);

  rc_close(&c);
  fix_stop(&f);
}

/* Without the view's budgets hook (a daemon without budgets): an empty reply. */
static void test_request_no_hook(void **state) {
  fix_t f;
  rc_t c;
  Tlcap__ServerMessage *m;
  (void)state;
  fix_start(&f, 0);
  push_known(&f);
  rc_open(&c, f.port);
  rc_hello(&c, &f);
  m = rc_violations(&c, &f, "board-1", NULL, 0);
  assert_int_equal(m->msg_case, TLCAP__SERVER_MESSAGE__MSG_VIOLATIONS);
  assert_int_equal(m->violations->n_budgets, 0);
  msg_free(m);
  rc_close(&c);
  fix_stop(&f);
}

/* ---- the events -------------------------------------------------------------------------- */

static void test_event(void **state) {
  fix_t f;
  rc_t c, other;
  Tlcap__ServerMessage *m;
  Tlcap__TargetEvent *te;
  (void)state;
  fix_start(&f, 1);
  rc_open(&c, f.port);
  rc_hello(&c, &f);
  rc_subscribe(&c, &f, "board-*");
  rc_open(&other, f.port);
  rc_hello(&other, &f);
  rc_subscribe(&other, &f, "board-2");
  push_known(&f);
  m = rc_expect(&c, &f, TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT);
  te = m->target_event;
  assert_int_equal(te->kind, TLCAP__TARGET_EVENT_KIND__TE_VIOLATION);
  assert_string_equal(te->target, "board-1");
  assert_int_equal(te->suppressed, 0);
  assert_non_null(te->violation);
  assert_string_equal(te->violation->budget, "net_a");
  assert_string_equal(te->violation->stat, "net");
  assert_string_equal(te->violation->area, "TaskA");
  assert_string_equal(te->violation->context, "core0");
  assert_int_equal(te->violation->value, 200);
  assert_int_equal(te->violation->limit, 100);
  assert_int_equal(te->violation->start_ns, 1000);
  assert_int_equal(te->violation->end_ns, 1200);
  assert_int_equal(te->violation->number, 1);
  assert_int_equal(te->unix_ms, 1700000000000);
  msg_free(m);
  m = rc_expect(&c, &f, TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT);
  assert_string_equal(m->target_event->violation->budget, "b_min");
  assert_int_equal(m->target_event->violation->value, 150);
  assert_false(m->target_event->violation->over);
  msg_free(m);
  m = rc_expect(&c, &f, TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT);
  assert_string_equal(m->target_event->violation->budget, "net_a");
  assert_int_equal(m->target_event->violation->number, 2);
  msg_free(m);
  /* the subscriber of board-2 only gets nothing: a Ping's Pong comes first */
  {
    Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
    Tlcap__Ping pg = TLCAP__PING__INIT;
    cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_PING;
    cm.ping = &pg;
    rc_send(&other, &cm);
    m = rc_recv_t(&other, &f, 5000);
    assert_non_null(m);
    assert_int_equal(m->msg_case, TLCAP__SERVER_MESSAGE__MSG_PONG);
    msg_free(m);
  }
  rc_close(&other);
  rc_close(&c);
  fix_stop(&f);
}

static void wait_cb(uv_timer_t *t) {
  *(int *)t->data = 1;
}

static void timer_closed(uv_handle_t *h) {
  (void)h;
}

/* Every activation of TaskA over budget, 10,000 times in one push: at most TLC_VSERVE_RATE
 * events leave; after a second one more goes, carrying every one not sent. The server's
 * memory stays bounded meanwhile. */
#define STORM 10000
static void test_storm(void **state) {
  fix_t f;
  rc_t c;
  Tlcap__ServerMessage *m;
  tlc_event_t *v = calloc(2 * STORM + 2, sizeof(*v));
  uint64_t sent = 0, suppressed_sum = 0;
  size_t i, before, peak_growth;
  tlc_pubsub_stats_t st;
  uv_timer_t t;
  int done = 0;
  (void)state;
  assert_non_null(v);
  fix_start(&f, 1);
  rc_open(&c, f.port);
  rc_hello(&c, &f);
  rc_subscribe(&c, &f, "board-1");
  for (i = 0; i < STORM; i++) {
    ev(&v[2 * i], (int64_t)(10000 + 1000 * i), 1, TLC_EV_ENTRY, 0);
    ev(&v[2 * i + 1], (int64_t)(10000 + 1000 * i + 500), 1, TLC_EV_EXIT, 0); /* NET 500 */
  }
  /* the first activation alone: the engine makes its row then (its arrays are the engine's
   * cost, not the storm's) */
  tlc_engine_push(f.e, v, 2);
  before = testalloc_live_bytes();
  tlc_engine_push(f.e, v + 2, 2 * STORM - 2);
  peak_growth = testalloc_live_bytes() - before;
  assert_int_equal(f.seen, STORM);
  tlc_pubsub_get_stats(f.ps, &st);
  assert_true(st.violations_sent >= 1 && st.violations_sent <= TLC_VSERVE_RATE + 1);
  assert_int_equal(st.violations_sent + st.violations_suppressed, STORM);
  /* what the server holds after the storm: the watch's kept ones and the queued events, not
   * anything per violation */
  assert_true(peak_growth < 64 * 1024);
  for (i = 0; i < st.violations_sent; i++) {
    m = rc_expect(&c, &f, TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT);
    assert_int_equal(m->target_event->kind, TLCAP__TARGET_EVENT_KIND__TE_VIOLATION);
    suppressed_sum += m->target_event->suppressed;
    sent++;
    msg_free(m);
  }
  /* a second later the bucket holds tokens again */
  uv_timer_init(&f.loop, &t);
  t.data = &done;
  uv_timer_start(&t, wait_cb, 1100, 0);
  while (!done)
    uv_run(&f.loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, timer_closed);
  ev(&v[0], (int64_t)(10000 + 1000 * STORM), 1, TLC_EV_ENTRY, 0);
  ev(&v[1], (int64_t)(10000 + 1000 * STORM + 700), 1, TLC_EV_EXIT, 0);
  tlc_engine_push(f.e, v, 2);
  m = rc_expect(&c, &f, TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT);
  assert_int_equal(m->target_event->violation->value, 700);
  assert_int_equal(m->target_event->violation->number, STORM + 1);
  suppressed_sum += m->target_event->suppressed;
  sent++;
  msg_free(m);
  /* every violation either went or was counted in a suppressed that went */
  assert_int_equal(sent + suppressed_sum, STORM + 1);
  tlc_pubsub_get_stats(f.ps, &st);
  assert_int_equal(st.violations_sent, sent);
  free(v);
  rc_close(&c);
  fix_stop(&f);
}

/* ---- the limiter alone ------------------------------------------------------------------- */

static void test_rate(void **state) {
  tlc_vrate_t r;
  uint64_t sup, total_sup = 0, sent = 0, t;
  int i;
  char name[32];
  (void)state;
  testalloc_install();
  tlc_vrate_init(&r, 10);
  /* the burst: 10 go at once, then none within the same millisecond */
  for (i = 0; i < 100; i++)
    if (tlc_vrate_take(&r, 0, "a", "b", 1000, &sup)) {
      sent++;
      total_sup += sup;
    }
  assert_int_equal(sent, 10);
  assert_int_equal(total_sup, 0);
  /* 100 ms later one token: the next carries the 90 not sent */
  assert_int_equal(tlc_vrate_take(&r, 0, "a", "b", 1100, &sup), 1);
  assert_int_equal(sup, 90);
  assert_int_equal(tlc_vrate_take(&r, 0, "a", "b", 1100, &sup), 0);
  /* another budget of the same target has its own bucket */
  assert_int_equal(tlc_vrate_take(&r, 0, "a", "c", 1100, &sup), 1);
  assert_int_equal(sup, 0);
  /* steady: one every 100 ms always goes, for a minute */
  for (t = 1200; t < 61200; t += 100) {
    assert_int_equal(tlc_vrate_take(&r, 0, "a", "b", t, &sup), 1);
    total_sup += sup;
  }
  assert_int_equal(total_sup, 1); /* the one refused at 1100 */
  /* keys past the cap share the overflow bucket; memory stays bounded */
  for (i = 0; i < TLC_VRATE_KEYS + 500; i++) {
    snprintf(name, sizeof(name), "t%d", i);
    tlc_vrate_take(&r, 0, name, "b", 100000, &sup);
  }
  assert_int_equal(r.n, TLC_VRATE_KEYS);
  assert_true(tlc_vrate_bytes(&r) < TLC_VRATE_KEYS * 256);
  assert_true(testalloc_live_bytes() <= tlc_vrate_bytes(&r) + 1024);
  tlc_vrate_fini(&r);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

/* A caller's key finds its pair's entry without the names; every key of a pair, and the names
 * alone, share that pair's one bucket. */
static void test_rate_keys(void **state) {
  tlc_vrate_t r;
  uint64_t sup;
  int i;
  (void)state;
  tlc_vrate_init(&r, 10);
  for (i = 0; i < 10; i++)
    assert_int_equal(tlc_vrate_take(&r, 7, "probe1", "isr", 1000, &sup), 1);
  assert_int_equal(tlc_vrate_take(&r, 7, "probe1", "isr", 1000, &sup), 0);
  assert_int_equal(tlc_vrate_take(&r, 0, "probe1", "isr", 1000, &sup), 0);  /* the names */
  assert_int_equal(tlc_vrate_take(&r, 8, "probe1", "isr", 1000, &sup), 0);  /* a new key */
  assert_int_equal(tlc_vrate_take(&r, 9, "probe1", "task", 1000, &sup), 1); /* its own */
  assert_int_equal(sup, 0);
  assert_int_equal(tlc_vrate_take(&r, 8, "probe1", "isr", 1100, &sup), 1);
  assert_int_equal(sup, 3);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.suppressed, 3);
  tlc_vrate_fini(&r);
}

/* A caller that holds back the violations its limiter's answer says would not go (budgetd's
 * gates: *next_ms, held) gets what it would have got calling for each one: the same ones sent
 * with the same suppressed counts, the same totals, on a random stream of two budgets. */
static void test_rate_gate(void **state) {
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t o;
  tlc_bwatch_t *w;
  tlc_vrate_t every, gated;
  uint64_t now = 1000, until[2] = { 0, 0 }, held[2] = { 0, 0 }, calls = 0, rnd = 12345;
  uint64_t sup_e, sup_g, next, sent = 0;
  char err[256];
  int i;
  (void)state;
  tlc_tbudget_set_init(&s);
  if (tlc_tbudget_parse(&s, budgets, strlen(budgets), "b.ini", err, sizeof(err)) != 0)
    fail_msg("%s", err);
  memset(&o, 0, sizeof(o));
  o.keep = 4;
  assert_int_equal(tlc_bwatch_new(&w, "board-1", &s, &o), 0);
  tlc_tbudget_set_fini(&s);
  tlc_vrate_init(&every, 10);
  tlc_vrate_init(&gated, 10);
  for (i = 0; i < 20000; i++) {
    size_t b;
    int ok_e, ok_g = 0;
    rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
    b = (size_t)(rnd >> 63);
    /* bursts within one millisecond, quiet stretches up to 2 s */
    now += (rnd >> 40) % 64 == 0 ? (rnd >> 20) % 2000 : (rnd >> 20) % 3;
    ok_e =
        tlc_vrate_take_watch(&every, w, b, "board-1", tlc_bwatch_key(w, b), now, 0, &sup_e, &next);
    if (now < until[b]) {
      held[b]++;
      assert_int_equal(ok_e, 0); /* the answer held: it would not have gone */
      continue;
    }
    calls++;
    ok_g = tlc_vrate_take_watch(&gated, w, b, "board-1", tlc_bwatch_key(w, b), now, held[b], &sup_g,
                                &until[b]);
    held[b] = 0;
    assert_int_equal(ok_g, ok_e);
    if (ok_e) {
      assert_int_equal(sup_g, sup_e);
      sent++;
    }
  }
  for (i = 0; i < 2; i++)
    tlc_vrate_hold(&gated, w, (size_t)i, "board-1", tlc_bwatch_key(w, (size_t)i), now, held[i]);
  assert_true(sent > 100);
  assert_true(calls < 20000 / 2); /* the gate held most back */
  assert_int_equal(gated.sent, every.sent);
  assert_int_equal(gated.suppressed, every.suppressed);
  assert_int_equal(gated.n, 2);
  for (i = 0; i < 2; i++)
    assert_int_equal(gated.e[i].suppressed, every.e[i].suppressed);
  tlc_vrate_fini(&every);
  tlc_vrate_fini(&gated);
  tlc_bwatch_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_rate),
    cmocka_unit_test(test_rate_keys),
    cmocka_unit_test(test_rate_gate),
    cmocka_unit_test(test_request),
    cmocka_unit_test(test_request_no_hook),
    cmocka_unit_test(test_event),
    cmocka_unit_test(test_storm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
