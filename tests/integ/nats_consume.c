/* nats_consume - a test consumer for tlcapd's NATS publishing (tests/integ/test_fleet_nats.py).
 *
 *   nats_consume URL SUBJECT IDLE_MS [--js [MAX_MS]]
 *   nats_consume URL --add-stream NAME SUBJECT MAX_MSGS
 *
 * Prints every message on SUBJECT (wildcards allowed) as "subject<TAB>hex payload" lines until
 * no message came for IDLE_MS (or MAX_MS passed since it started, for a subject that never
 * goes quiet). With --js it reads through a JetStream consumer from the start
 * of the stream that covers SUBJECT (so it sees what was published before it started);
 * without, it subscribes live. Exit 0, or 1 when it cannot connect or subscribe.
 * --add-stream creates JetStream stream NAME over SUBJECT that keeps at most MAX_MSGS messages
 * and refuses new ones when full (discard new), as an operator might have made it.
 * Uses libnats's own client: the test checks tlcapd against an independent implementation.
 */
#include <nats/nats.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* LeakSanitizer, in the ASan build: libnats 3.4 keeps a message that was half read when the
 * connection closes in a parser buffer it never frees (natsBuf_Create, seen when the consumer
 * stops while tlcapd publishes a 200 KB part). The leak is the library's, in this test tool,
 * at exit; tlcapd only publishes and its own leaks are still reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:natsBuf_Create\n";
}

static int add_stream(natsConnection *nc, const char *name, const char *subject, long max_msgs) {
  jsCtx *js = NULL;
  jsStreamConfig cfg;
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  const char *subjects[1] = { subject };
  natsStatus s = natsConnection_JetStream(&js, nc, NULL);
  if (s == NATS_OK)
    s = jsStreamConfig_Init(&cfg);
  if (s == NATS_OK) {
    cfg.Name = name;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_MemoryStorage;
    cfg.Discard = js_DiscardNew;
    cfg.MaxMsgs = max_msgs;
    s = js_AddStream(&si, js, &cfg, NULL, &jerr);
  }
  if (s != NATS_OK)
    fprintf(stderr, "nats_consume: add stream %s: %s (%d) %s\n", name, natsStatus_GetText(s),
            (int)jerr, nats_GetLastError(NULL) != NULL ? nats_GetLastError(NULL) : "");
  jsStreamInfo_Destroy(si);
  jsCtx_Destroy(js);
  return s == NATS_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  natsConnection *nc = NULL;
  natsSubscription *sub = NULL;
  jsCtx *js = NULL;
  natsStatus s;
  int js_mode = argc > 4 && strcmp(argv[4], "--js") == 0;
  long idle, max_ms = argc > 5 ? strtol(argv[5], NULL, 10) : 0;
  int64_t start = nats_Now();
  if (argc < 4) {
    fprintf(stderr, "usage: nats_consume URL SUBJECT IDLE_MS [--js]\n");
    return 2;
  }
  idle = strtol(argv[3], NULL, 10);
  s = natsConnection_ConnectTo(&nc, argv[1]);
  if (s != NATS_OK) {
    fprintf(stderr, "nats_consume: connect %s: %s\n", argv[1], natsStatus_GetText(s));
    return 1;
  }
  if (strcmp(argv[2], "--add-stream") == 0) {
    int rc = argc > 5 ? add_stream(nc, argv[3], argv[4], strtol(argv[5], NULL, 10)) : 2;
    natsConnection_Close(nc);
    natsConnection_Destroy(nc);
    nats_CloseAndWait(10000);
    return rc;
  }
  if (js_mode) {
    jsErrCode jerr = 0;
    jsSubOptions so;
    s = natsConnection_JetStream(&js, nc, NULL);
    if (s == NATS_OK)
      s = jsSubOptions_Init(&so);
    if (s == NATS_OK) {
      so.Config.DeliverPolicy = js_DeliverAll;
      so.Config.AckPolicy = js_AckNone;
      s = js_SubscribeSync(&sub, js, argv[2], NULL, &so, &jerr);
    }
  } else {
    s = natsConnection_SubscribeSync(&sub, nc, argv[2]);
  }
  if (s != NATS_OK) {
    fprintf(stderr, "nats_consume: subscribe %s: %s %s\n", argv[2], natsStatus_GetText(s),
            nats_GetLastError(NULL) != NULL ? nats_GetLastError(NULL) : "");
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    natsMsg *m = NULL;
    const unsigned char *d;
    int i, n;
    if (max_ms > 0 && nats_Now() - start >= max_ms)
      break;
    s = natsSubscription_NextMsg(&m, sub, idle);
    if (s != NATS_OK)
      break;
    d = (const unsigned char *)natsMsg_GetData(m);
    n = natsMsg_GetDataLength(m);
    printf("%s\t", natsMsg_GetSubject(m));
    for (i = 0; i < n; i++)
      printf("%02x", d[i]);
    printf("\n");
    natsMsg_Destroy(m);
  }
  fflush(stdout);
  /* closed first, and the library's threads awaited: nats_Close() alone returned while a
   * libnats thread still ran, which then crashed on a lock freed at exit */
  natsConnection_Close(nc);
  natsSubscription_Destroy(sub);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  if (nats_CloseAndWait(10000) != NATS_OK)
    fprintf(stderr, "nats_consume: libnats threads still running after 10 s\n");
  return 0;
}
