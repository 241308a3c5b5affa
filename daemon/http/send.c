/* send.c - a response's body sent as the socket takes it (server-int.h): in-place chunks of up
 * to WRITE_CHUNK, copied ones of up to COPY_CHUNK; and /metrics made a slice per loop turn
 * (SLICE_NS or SLICE_BYTES) before its headers, its cost to the loop counted. Loop thread only.
 */
#include "http/server-int.h"

#include "base/alloc.h"
#include "base/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>

static unsigned char chunk_buf[LWS_PRE + COPY_CHUNK]; /* loop thread only */

/* CPU time of the calling thread (the loop's): what the live messages and scrapes cost it. */
uint64_t tlc__http_thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The log line of a scrape sent: what it cost the loop. */
static void scrape_done(pss_t *p) {
  size_t nt, nr, rb;
  tlc__http_scrape_figures(p->scrape, &nt, &nr, &rb);
  tlc__http_say(p->h, 7,
                "http: /metrics: %zu bytes in %.1f ms, %zu targets (%zu rendered, %zu bytes); %u "
                "slices, longest %.3f ms (CPU %.3f ms); %u writes, longest %.3f ms (CPU %.3f ms)",
                p->len, (double)(uv_hrtime() - p->scrape_t0) / 1e6, nt, nr, rb, p->slices,
                (double)p->slice_max_ns / 1e6, (double)p->slice_max_cpu / 1e6, p->writes,
                (double)p->write_max_ns / 1e6, (double)p->write_max_cpu / 1e6);
}

int tlc__http_send_chunk(struct lws *wsi, pss_t *p) {
  unsigned char *buf = chunk_buf, save[LWS_PRE];
  const unsigned char *src = p->sbody != NULL ? p->sbody : (const unsigned char *)p->body;
  size_t n;
  int last, w;
  uint64_t t0 = uv_hrtime(), c0 = p->scrape != NULL ? tlc__http_thread_cpu_ns() : 0;
  if (p->len == 0)
    return lws_http_transaction_completed(wsi) ? -1 : 0;
  if (p->off >= p->blen) {
    /* the scrape's bytes, read out of it into the chunk buffer (its pieces are shared), at
     * most COPY_CHUNK a turn: a write of 1 MiB could hold the loop for over 2 ms */
    n = tlc__http_scrape_read(p->scrape, chunk_buf + LWS_PRE, COPY_CHUNK);
  } else if (p->body != NULL && p->off >= LWS_PRE) {
    /* in place: lws may write its framing into the LWS_PRE bytes before (sent already) */
    n = p->blen - p->off < WRITE_CHUNK ? p->blen - p->off : WRITE_CHUNK;
    buf = (unsigned char *)p->body + p->off - LWS_PRE;
    memcpy(save, buf, LWS_PRE);
  } else {
    n = p->blen - p->off < COPY_CHUNK ? p->blen - p->off : COPY_CHUNK;
    memcpy(buf + LWS_PRE, src + p->off, n);
  }
  last = p->off + n >= p->len;
  if (n == 0)
    return -1; /* cannot happen: a scrape as long as it said */
  w = lws_write(wsi, buf + LWS_PRE, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP);
  if (buf != chunk_buf)
    memcpy(buf, save, LWS_PRE);
  if (w != (int)n)
    return -1;
  p->off += n;
  if (p->scrape != NULL) {
    uint64_t d = uv_hrtime() - t0, c = tlc__http_thread_cpu_ns() - c0;
    p->writes++;
    if (d > p->write_max_ns)
      p->write_max_ns = d;
    if (c > p->write_max_cpu)
      p->write_max_cpu = c;
  }
  if (!last) {
    lws_callback_on_writable(wsi);
    return 0;
  }
  if (p->scrape != NULL)
    scrape_done(p);
  tlc__http_body_free(p);
  if (p->close_after)
    return -1;
  return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* One slice of the scrape being made; once made, its answer. 0, or -1 to close. */
int tlc__http_scrape_slice(struct lws *wsi, pss_t *p) {
  uint64_t t0 = uv_hrtime(), c0 = tlc__http_thread_cpu_ns(), d, c;
  int made = tlc__http_scrape_step(&p->h->view, p->scrape, SLICE_NS, SLICE_BYTES);
  const char *uri;
  d = uv_hrtime() - t0;
  c = tlc__http_thread_cpu_ns() - c0;
  p->slices++;
  if (d > p->slice_max_ns)
    p->slice_max_ns = d;
  if (c > p->slice_max_cpu)
    p->slice_max_cpu = c;
  if (!made) {
    lws_callback_on_writable(wsi);
    return 0;
  }
  p->scrape_made = 1;
  uri = tlc__http_uri_of(wsi, tlc__http_uri_buf, sizeof(tlc__http_uri_buf));
  return tlc__http_respond(wsi, p, uri != NULL ? uri : "/metrics");
}
