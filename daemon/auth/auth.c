/* auth.c - token file, constant-time check, per-peer failure rate limit (see auth.h).
 *
 * The secret is kept only as its SHA-256 digest plus its length (the bytes read are wiped):
 * a check hashes what the peer presented and compares the digests with CRYPTO_memcmp, so the
 * time is the same whatever the presented length and wherever it differs.
 *
 * The failure table is a small array (opts.max_peers entries, allocated on first use) scanned
 * linearly: failures are rare and expensive for the peer by design, and a scan of 1024 short
 * strings costs microseconds. Entries expire after fail_window_ms without a failure.
 *
 * Not done here: reading the token from the network (the servers do), TLS (tls.h).
 */
#include "auth/auth.h"

#include "base/alloc.h"
#include "base/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <unistd.h>

#define PEER_LEN 64

typedef struct peer {
  char addr[PEER_LEN];
  uint32_t fails;
  uint64_t last_ms;
} peer_t;

struct tlc_auth {
  pthread_mutex_t mu;
  tlc_auth_opts_t o;
  char *path;
  uint8_t digest[SHA256_DIGEST_LENGTH];
  peer_t *peers;
  size_t npeers;
  tlc_auth_stats_t st;
};

/* Reads the token of `path` into buf (NUL-terminated), *len its length. */
static int read_token(const char *path, char *buf, size_t cap, size_t *len, char *err,
                      size_t errlen) {
  struct stat st;
  ssize_t n;
  size_t got = 0;
  char *nl;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    snprintf(err, errlen, "token file %s: %s", path, strerror(e));
    return -e;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "token file %s: not a regular file", path);
    close(fd);
    return TLC_EINVAL;
  }
  if ((st.st_mode & 044) != 0) {
    snprintf(err, errlen, "token file %s: readable by group or others (mode %03o); chmod 600 it",
             path, (unsigned)(st.st_mode & 0777));
    close(fd);
    return TLC_EINVAL;
  }
  while (got + 1 < cap && (n = read(fd, buf + got, cap - 1 - got)) != 0) {
    if (n < 0) {
      int e = errno;
      if (e == EINTR)
        continue;
      snprintf(err, errlen, "token file %s: %s", path, strerror(e));
      close(fd);
      return -e;
    }
    got += (size_t)n;
  }
  close(fd);
  buf[got] = 0;
  if ((nl = memchr(buf, '\n', got)) != NULL) {
    got = (size_t)(nl - buf);
  } else if (got + 1 >= cap) {
    snprintf(err, errlen, "token file %s: the token is longer than %d bytes", path,
             TLC_AUTH_MAX_TOKEN);
    OPENSSL_cleanse(buf, cap);
    return TLC_EINVAL;
  }
  if (got > 0 && buf[got - 1] == '\r')
    got--;
  buf[got] = 0;
  if (got == 0) {
    snprintf(err, errlen, "token file %s: empty (the first line must hold the token)", path);
    return TLC_EINVAL;
  }
  *len = got;
  return 0;
}

int tlc_auth_check_file(const char *path, char *err, size_t errlen) {
  char buf[TLC_AUTH_MAX_TOKEN + 2];
  size_t len;
  int r = read_token(path, buf, sizeof(buf), &len, err, errlen);
  OPENSSL_cleanse(buf, sizeof(buf));
  return r;
}

static int load(tlc_auth_t *a, char *err, size_t errlen) {
  char buf[TLC_AUTH_MAX_TOKEN + 2];
  uint8_t d[SHA256_DIGEST_LENGTH];
  size_t len;
  int r = read_token(a->path, buf, sizeof(buf), &len, err, errlen);
  if (r == 0) {
    SHA256((const unsigned char *)buf, len, d);
    pthread_mutex_lock(&a->mu);
    memcpy(a->digest, d, sizeof(d));
    pthread_mutex_unlock(&a->mu);
    OPENSSL_cleanse(d, sizeof(d));
  }
  OPENSSL_cleanse(buf, sizeof(buf));
  return r;
}

int tlc_auth_new(const char *path, const tlc_auth_opts_t *o, tlc_auth_t **out, char *err,
                 size_t errlen) {
  tlc_auth_t *a;
  int r;
  *out = NULL;
  a = tlc_calloc(1, sizeof(*a));
  if (a == NULL)
    return TLC_ENOMEM;
  if (o != NULL)
    a->o = *o;
  if (a->o.fail_delay_ms == 0)
    a->o.fail_delay_ms = 250;
  if (a->o.fail_delay_max_ms == 0)
    a->o.fail_delay_max_ms = 8000;
  if (a->o.fail_window_ms == 0)
    a->o.fail_window_ms = 60000;
  if (a->o.max_peers == 0)
    a->o.max_peers = 1024;
  a->path = tlc_strndup(path, strlen(path));
  if (a->path == NULL || pthread_mutex_init(&a->mu, NULL) != 0) {
    tlc_free(a->path);
    tlc_free(a);
    snprintf(err, errlen, "token file %s: out of memory", path);
    return TLC_ENOMEM;
  }
  if ((r = load(a, err, errlen)) != 0) {
    tlc_auth_free(a);
    return r;
  }
  *out = a;
  return 0;
}

int tlc_auth_reload(tlc_auth_t *a, char *err, size_t errlen) {
  int r = load(a, err, errlen);
  if (r == 0) {
    pthread_mutex_lock(&a->mu);
    a->st.reloads++;
    pthread_mutex_unlock(&a->mu);
  }
  return r;
}

/* The entry of `peer` (created, evicting the stalest when full), or NULL. Under the lock. */
static peer_t *peer_get(tlc_auth_t *a, const char *peer, uint64_t now) {
  size_t i, oldest = 0;
  peer_t *p;
  if (a->peers == NULL) {
    a->peers = tlc_calloc(a->o.max_peers, sizeof(*a->peers));
    if (a->peers == NULL)
      return NULL;
  }
  for (i = 0; i < a->npeers; i++) {
    p = &a->peers[i];
    if (now >= p->last_ms && now - p->last_ms > a->o.fail_window_ms) {
      *p = a->peers[--a->npeers]; /* expired: forget it */
      i--;
      continue;
    }
    if (strncmp(p->addr, peer, PEER_LEN - 1) == 0)
      return p;
  }
  if (a->npeers < a->o.max_peers) {
    p = &a->peers[a->npeers++];
  } else {
    for (i = 1; i < a->npeers; i++)
      if (a->peers[i].last_ms < a->peers[oldest].last_ms)
        oldest = i;
    p = &a->peers[oldest];
  }
  memset(p, 0, sizeof(*p));
  snprintf(p->addr, sizeof(p->addr), "%s", peer);
  return p;
}

int tlc_auth_check(tlc_auth_t *a, const char *peer, const void *given, size_t len, uint64_t now_ms,
                   uint64_t *delay_ms) {
  uint8_t d[SHA256_DIGEST_LENGTH];
  uint64_t delay;
  int ok;
  SHA256(len > 0 ? given : (const void *)"", len, d);
  pthread_mutex_lock(&a->mu);
  /* An empty presentation never matches (the secret is never empty). */
  ok = CRYPTO_memcmp(d, a->digest, sizeof(d)) == 0 && len > 0;
  if (ok) {
    a->st.ok++;
    pthread_mutex_unlock(&a->mu);
    if (delay_ms != NULL)
      *delay_ms = 0;
    return 1;
  }
  a->st.failed++;
  delay = a->o.fail_delay_ms;
  if (peer != NULL) {
    peer_t *p = peer_get(a, peer, now_ms);
    if (p != NULL) {
      uint32_t k;
      p->fails++;
      p->last_ms = now_ms;
      for (k = 1; k < p->fails && delay < a->o.fail_delay_max_ms; k++)
        delay *= 2;
      if (p->fails > 1)
        a->st.delayed++;
    }
    a->st.peers = a->npeers;
  }
  if (delay > a->o.fail_delay_max_ms)
    delay = a->o.fail_delay_max_ms;
  pthread_mutex_unlock(&a->mu);
  if (delay_ms != NULL)
    *delay_ms = delay;
  return 0;
}

const char *tlc_auth_path(const tlc_auth_t *a) {
  return a->path;
}

void tlc_auth_get_stats(tlc_auth_t *a, tlc_auth_stats_t *out) {
  pthread_mutex_lock(&a->mu);
  *out = a->st;
  out->peers = a->npeers;
  pthread_mutex_unlock(&a->mu);
}

void tlc_auth_free(tlc_auth_t *a) {
  if (a == NULL)
    return;
  OPENSSL_cleanse(a->digest, sizeof(a->digest));
  pthread_mutex_destroy(&a->mu);
  tlc_free(a->peers);
  tlc_free(a->path);
  tlc_free(a);
}
