/* peers.c - connections at once per peer address (see peers.h). */
#include "auth/peers.h"

#include "base/alloc.h"
#include "base/err.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

void tlc_peers_init(tlc_peers_t *p, size_t max) {
  memset(p, 0, sizeof(*p));
  p->max = max;
}

void tlc_peers_fini(tlc_peers_t *p) {
  tlc_free(p->v);
  memset(p, 0, sizeof(*p));
}

/* The address of sa into e (family 0 when it is not IPv4 or IPv6). */
static void key_of(const struct sockaddr *sa, size_t len, tlc_peers_entry_t *e) {
  memset(e, 0, sizeof(*e));
  if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    memcpy(e->addr + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    e->family = 4;
  } else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a)) {
      memcpy(e->addr + 12, a->s6_addr + 12, 4);
      e->family = 4;
    } else {
      memcpy(e->addr, a->s6_addr, 16);
      e->family = 6;
    }
  }
}

int tlc_peers_take(tlc_peers_t *p, const struct sockaddr *sa, size_t len, size_t *slot) {
  tlc_peers_entry_t k;
  size_t i, free_i = SIZE_MAX;
  *slot = TLC_PEERS_NONE;
  key_of(sa, len, &k);
  if (k.family == 0)
    return 0;
  for (i = 0; i < p->n; i++) {
    tlc_peers_entry_t *e = &p->v[i];
    if (e->family == 0) {
      if (free_i == SIZE_MAX)
        free_i = i;
    } else if (e->family == k.family && memcmp(e->addr, k.addr, 16) == 0) {
      if (p->max > 0 && e->count >= p->max) {
        p->refused++;
        return TLC_ELIMIT;
      }
      e->count++;
      *slot = i;
      return 0;
    }
  }
  if (free_i == SIZE_MAX) {
    if (p->n == p->cap) {
      size_t nc = p->cap ? p->cap * 2 : 16;
      tlc_peers_entry_t *nv = tlc_realloc(p->v, nc * sizeof(*nv));
      if (nv == NULL)
        return TLC_ENOMEM;
      p->v = nv;
      p->cap = nc;
    }
    free_i = p->n++;
  }
  k.count = 1;
  p->v[free_i] = k;
  *slot = free_i;
  return 0;
}

void tlc_peers_release(tlc_peers_t *p, size_t slot) {
  if (slot == TLC_PEERS_NONE || slot >= p->n || p->v[slot].family == 0)
    return;
  if (--p->v[slot].count == 0) {
    p->v[slot].family = 0;
    while (p->n > 0 && p->v[p->n - 1].family == 0) /* the table shrinks back from its end */
      p->n--;
  }
}

const char *tlc_peers_name(const struct sockaddr *sa, size_t len, char *buf, size_t buflen) {
  tlc_peers_entry_t k;
  key_of(sa, len, &k);
  if (k.family == 0 || inet_ntop(k.family == 4 ? AF_INET : AF_INET6,
                                 k.family == 4 ? (const void *)(k.addr + 12) : (const void *)k.addr,
                                 buf, (socklen_t)buflen) == NULL)
    snprintf(buf, buflen, "?");
  return buf;
}

int tlc_peers_is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
  }
  return 0;
}

int tlc_peers_host_is_loopback(const char *host) {
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  if (strcmp(host, "localhost") == 0)
    return 1;
  memset(&a4, 0, sizeof(a4));
  memset(&a6, 0, sizeof(a6));
  a4.sin_family = AF_INET;
  a6.sin6_family = AF_INET6;
  if (inet_pton(AF_INET, host, &a4.sin_addr) == 1)
    return tlc_peers_is_loopback((const struct sockaddr *)&a4);
  if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1)
    return tlc_peers_is_loopback((const struct sockaddr *)&a6);
  return 0; /* a name: it may resolve to anything */
}
