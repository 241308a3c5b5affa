/* ws.c - the dashboard's live WebSocket (server-int.h): at most one message outstanding per
 * socket, built when lws says it is writable (a due mark that finds one pending is counted as
 * coalesced); the messages received (token, commands; a bad one closes it); the tick that
 * marks every socket due. Loop thread only.
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

/* ---- live WebSocket ---- */

void tlc__http_ws_unlink(pss_t *p) {
  tlc_http_t *h = p->h;
  if (!p->is_ws)
    return;
  LIST_REMOVE(p, link);
  p->is_ws = 0;
  h->st.websockets--;
  h->view.websockets = h->st.websockets;
}

int tlc__http_ws_send(struct lws *wsi, pss_t *p) {
  tlc_http_t *h = p->h;
  uint64_t cpu0;
  char *buf;
  size_t len;
  int n;
  if (!p->due || p->deny)
    return 0;
  p->due = 0;
  if (!p->authed) {
    /* a token is needed: say so, once; nothing else until it comes */
    static const char need[] = "{\"type\": \"auth\", \"message\": \"send: token TOKEN\"}";
    unsigned char m[LWS_PRE + sizeof(need)];
    memcpy(m + LWS_PRE, need, sizeof(need) - 1);
    return lws_write(wsi, m + LWS_PRE, sizeof(need) - 1, LWS_WRITE_TEXT) < 0 ? -1 : 0;
  }
  cpu0 = tlc__http_thread_cpu_ns();
  if (h->live.tick == 0)
    tlc__http_live_cache_tick(&h->live, tlc_now_unix_ms());
  if (tlc__http_live_shared(&h->view, &h->live, &p->live, h->o.max_ws_message, &buf, &len) != 0) {
    tlc__http_say(h, 4, "http: live message not built (over %zu bytes or out of memory)",
                  h->o.max_ws_message + (1u << 20));
    h->st.ws_cpu_ns += tlc__http_thread_cpu_ns() - cpu0;
    return 0; /* the next tick tries again */
  }
  /* the same bytes for every socket of this tick; lws writes the frame header into the
   * LWS_PRE bytes before them and keeps what the kernel does not take (a copy) */
  n = lws_write(wsi, (unsigned char *)buf + LWS_PRE, len, LWS_WRITE_TEXT);
  h->st.ws_cpu_ns += tlc__http_thread_cpu_ns() - cpu0;
  if (n < 0)
    return -1;
  h->st.ws_messages++;
  return 0;
}

int tlc__http_ws_receive(struct lws *wsi, pss_t *p, const void *in, size_t len) {
  tlc_http_t *h = p->h;
  tlc__http_live_t *l = &p->live;
  if (lws_frame_is_binary(wsi)) {
    h->st.ws_bad++;
    lws_close_reason(wsi, LWS_CLOSE_STATUS_UNACCEPTABLE_OPCODE, (unsigned char *)"text only", 9);
    return -1;
  }
  /* what is announced counts: a frame of 2^63 bytes is refused at its first bytes */
  if (len > sizeof(l->rx) - l->rxlen ||
      lws_remaining_packet_payload(wsi) > sizeof(l->rx) - l->rxlen - len) {
    h->st.ws_bad++;
    lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, (unsigned char *)"too large", 9);
    return -1;
  }
  memcpy(l->rx + l->rxlen, in, len);
  l->rxlen += len;
  if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) > 0)
    return 0;
  if (!p->authed && !(l->rxlen > 6 && memcmp(l->rx, "token ", 6) == 0)) {
    l->rxlen = 0; /* before its token a socket is sent nothing, and its commands are dropped */
    return 0;
  }
  if (!p->authed) {
    /* SPEC 8: a live socket's "token TOKEN"; nothing was sent to it before but the request */
    char ip[64];
    uint64_t delay = 0;
    int ok = tlc_auth_check(h->o.auth, lws_get_peer_simple(wsi, ip, sizeof(ip)), l->rx + 6,
                            l->rxlen - 6, uv_now(h->loop), &delay);
    l->rxlen = 0;
    if (!ok) {
      h->st.auth_failed++;
      lws_close_reason(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION, (unsigned char *)"bad token", 9);
      if (delay > 0) {
        p->deny = 1;
        lws_set_timer_usecs(wsi, (lws_usec_t)delay * 1000);
        lws_rx_flow_control(wsi, 0); /* nothing more from it meanwhile */
        return 0;
      }
      return -1;
    }
    p->authed = 1;
    p->due = 1;
    lws_callback_on_writable(wsi);
    return 0;
  }
  if (tlc__http_live_command(l, l->rx, l->rxlen) != 0) {
    h->st.ws_bad++;
    lws_close_reason(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION,
                     (unsigned char *)"expected \"overview\" or \"target NAME\"", 36);
    return -1;
  }
  l->rxlen = 0;
  p->due = 1;
  lws_callback_on_writable(wsi);
  return 0;
}

void tlc__http_ws_tick_cb(uv_timer_t *t) {
  tlc_http_t *h = t->data;
  pss_t *p;
  if (!LIST_EMPTY(&h->ws))
    tlc__http_live_cache_tick(&h->live, tlc_now_unix_ms());
  LIST_FOREACH(p, &h->ws, link) {
    if (!p->authed)
      continue;
    if (p->due)
      h->st.ws_coalesced++; /* the previous update is still waiting for the socket */
    p->due = 1;
    lws_callback_on_writable(p->wsi);
  }
}
