/* test_sources.c - the source registry and its one sync (daemon/ingest/sources.c), driven with a
 * recording kind: what starts, in which order, what a reload keeps, applies, restarts or stops,
 * and the shutdown's drain-then-stop. No loop runs: the built-in kinds have no sections here. */
#include "ingest/source.h"
#include "ingest/sources.h"

#include "base/err.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIND_FAKE 9

typedef struct fake {
  tlc_source_t s; /* first */
  int applied;
} fake_t;

static char events[1024]; /* "start a;stop b/removed;..." */
static int fail_start;    /* start of a source named "bad" fails with this */

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...) {
  size_t n = strlen(events);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(events + n, sizeof(events) - n, fmt, ap);
  va_end(ap);
}

static int fake_start(tlc_ingest_t *d, const tlc_cfg_source_t *cfg, tlc_source_t **out);

static void fake_stop(tlc_source_t *s, tlc_source_why_t why) {
  note("stop %s/%s;", s->cfg.name,
       why == TLC_SOURCE_REMOVED   ? "removed"
       : why == TLC_SOURCE_CHANGED ? "changed"
                                   : "shutdown");
  free(s);
}

/* Keeps the source while its `host` is unchanged; a gone section is stopped. */
static int fake_same(const tlc_source_t *s, const tlc_cfg_source_t *cfg) {
  return cfg != NULL && strcmp(cfg->host, s->cfg.host) == 0;
}

static void fake_drain(tlc_ingest_t *d) {
  (void)d;
  note("drain;");
}

static int fake_check(const tlc_ingest_t *d, const tlc_config_t *nc, char *why, size_t whylen) {
  (void)d;
  if (nc->nsrc > 0 && strcmp(nc->src[0].host, "moved") == 0) {
    snprintf(why, whylen, "fake: moved");
    return TLC_EINVAL;
  }
  return 0;
}

static void fake_status(const tlc_ingest_t *d, char *buf, size_t len) {
  (void)d;
  strncat(buf, " fake=1", len - strlen(buf) - 1);
}

static const tlc_source_ops_t fake_ops = {
  .kind = KIND_FAKE,
  .name = "fake",
  .start_errors_fatal = 1,
  .start = fake_start,
  .stop = fake_stop,
  .same_config = fake_same,
  .drain = fake_drain,
  .check_reload = fake_check,
  .status = fake_status,
};

static int fake_start(tlc_ingest_t *d, const tlc_cfg_source_t *cfg, tlc_source_t **out) {
  fake_t *f;
  if (strcmp(cfg->name, "bad") == 0) {
    note("refuse %s;", cfg->name);
    return fail_start;
  }
  f = calloc(1, sizeof(*f));
  assert_non_null(f);
  f->s.ops = &fake_ops;
  f->s.d = d;
  f->s.cfg = *cfg;
  note("start %s;", cfg->name);
  *out = &f->s;
  return 0;
}

static size_t running_count(const struct tlc_source_list *list) {
  size_t n = 0;
  for (const tlc_source_t *s = LIST_FIRST(list); s != NULL; s = LIST_NEXT(s, link))
    n++;
  return n;
}

static void set_cfg(tlc_ingest_t *d, tlc_cfg_source_t *src, size_t n) {
  d->cfg.src = src;
  d->cfg.nsrc = n;
}

static tlc_cfg_source_t sec(const char *name, const char *host, int port) {
  tlc_cfg_source_t s;
  memset(&s, 0, sizeof(s));
  s.kind = KIND_FAKE;
  snprintf(s.name, sizeof(s.name), "%s", name);
  snprintf(s.host, sizeof(s.host), "%s", host);
  s.port = (uint16_t)port;
  return s;
}

static void test_sync(void **state) {
  static tlc_ingest_t d; /* zeroed: no kind, no source, no connection */
  tlc_cfg_source_t a[3], b[3];
  struct tlc_source_list *list;
  char why[128] = "";
  char status[64] = "up";
  (void)state;
  events[0] = '\0';
  assert_int_equal(tlc_sources_register(&d, &fake_ops), 0);
  assert_int_equal(tlc_sources_register(&d, &fake_ops), TLC_EINVAL); /* one table per kind */
  assert_non_null(tlc_sources_running(&d, &tlc_listen_source_ops));  /* built-ins came first */
  list = tlc_sources_running(&d, &fake_ops);
  assert_non_null(list);

  /* start: in configuration order */
  a[0] = sec("one", "h1", 1);
  a[1] = sec("two", "h2", 2);
  set_cfg(&d, a, 2);
  assert_int_equal(tlc_sources_sync(&d), 0);
  assert_string_equal(events, "start one;start two;");

  /* reload: "one" takes a new port in place, "two" changed host (restart), "three" is new */
  events[0] = '\0';
  b[0] = sec("one", "h1", 11);
  b[1] = sec("two", "h2b", 2);
  b[2] = sec("three", "h3", 3);
  set_cfg(&d, b, 3);
  assert_int_equal(tlc_sources_sync(&d), 0);
  assert_string_equal(events, "stop two/changed;start two;start three;");
  for (tlc_source_t *s = LIST_FIRST(list); s != NULL; s = LIST_NEXT(s, link))
    if (strcmp(s->cfg.name, "one") == 0)
      assert_int_equal(s->cfg.port, 11); /* applied by the default apply */

  /* removed, and a fatal start error is returned while the rest is applied */
  events[0] = '\0';
  fail_start = TLC_ELIMIT;
  a[0] = sec("bad", "hx", 9);
  a[1] = sec("three", "h3", 3);
  set_cfg(&d, a, 2);
  assert_int_equal(tlc_sources_sync(&d), TLC_ELIMIT);
  assert_string_equal(events, "stop two/removed;stop one/removed;refuse bad;");
  assert_int_equal(running_count(list), 1); /* three still runs */

  /* check_reload and status go through the kind */
  b[0] = sec("three", "moved", 3);
  set_cfg(&d, a, 2);
  {
    tlc_config_t nc;
    memset(&nc, 0, sizeof(nc));
    nc.src = b;
    nc.nsrc = 1;
    assert_int_equal(tlc_sources_check_reload(&d, &nc, why, sizeof(why)), TLC_EINVAL);
    assert_string_equal(why, "fake: moved");
  }
  tlc_sources_status(&d, status, sizeof(status));
  assert_string_equal(status, "up fake=1");

  /* shutdown: every kind drains first, then every source stops */
  events[0] = '\0';
  d.stopping = 1;
  assert_int_equal(tlc_sources_sync(&d), 0);
  assert_string_equal(events, "drain;stop three/shutdown;");
  assert_true(LIST_EMPTY(list));
}

/* A kind registered after the fake one, whose start errors are not fatal. */
static const tlc_source_ops_t later_ops = {
  .kind = KIND_FAKE + 1,
  .name = "later",
  .start = fake_start,
  .stop = fake_stop,
  .same_config = fake_same,
};

/* At start-up a fatal start error leaves the kinds after it unstarted (the daemon exits); on a
 * reload the same error no longer holds them back. */
static void test_startup_failure(void **state) {
  static tlc_ingest_t d;
  tlc_cfg_source_t c[2];
  (void)state;
  events[0] = '\0';
  fail_start = TLC_EINVAL;
  assert_int_equal(tlc_sources_register(&d, &fake_ops), 0);
  assert_int_equal(tlc_sources_register(&d, &later_ops), 0);
  c[0] = sec("bad", "h", 1);
  c[1] = sec("x", "h", 2);
  c[1].kind = KIND_FAKE + 1;
  set_cfg(&d, c, 2);
  assert_int_equal(tlc_sources_sync(&d), TLC_EINVAL);
  assert_string_equal(events, "refuse bad;");
  events[0] = '\0';
  assert_int_equal(tlc_sources_sync(&d), TLC_EINVAL);
  assert_string_equal(events, "refuse bad;start x;");
  events[0] = '\0';
  d.stopping = 1;
  assert_int_equal(tlc_sources_sync(&d), 0);
  assert_string_equal(events, "drain;stop x/shutdown;");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sync),
    cmocka_unit_test(test_startup_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
