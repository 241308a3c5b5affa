/* fuzz_tls.c - libFuzzer harness for the server side of a TLS session over memory BIOs
 * (daemon/auth/tls.h), the path pubsub's tls_input takes before any byte reaches the request
 * decoder (fuzz_request covers what follows): arbitrary bytes, fed in chunks whose size comes
 * from the first byte, drive the handshake; whatever completes is read and the session's output
 * drained. Must never crash or leak; the output a failed handshake prepared is only drained.
 *
 * The server's key and self-signed certificate are made once with OpenSSL's API (P-256) and
 * written to temporary PEM files (removed at once), as tlc_tls_new reads files. */
#include "auth/tls.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tlc_tls_t *g_tls;

static int write_pem(char *path, EVP_PKEY *k, X509 *x) {
  int fd = mkstemp(path), ok;
  FILE *f;
  if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
    return -1;
  ok = k != NULL ? PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) : PEM_write_X509(f, x);
  fclose(f);
  return ok == 1 ? 0 : -1;
}

/* Once, from the first input (replay_main.c has no LLVMFuzzerInitialize). */
static void setup(void) {
  char kp[] = "/tmp/fuzz_tls_key_XXXXXX", cp[] = "/tmp/fuzz_tls_cert_XXXXXX", err[600];
  EVP_PKEY *k = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  if (k == NULL || x == NULL)
    abort();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, k);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                             (const unsigned char *)"fuzz", -1, -1, 0);
  X509_set_issuer_name(x, X509_get_subject_name(x));
  if (X509_sign(x, k, EVP_sha256()) == 0 || write_pem(kp, k, NULL) != 0 ||
      write_pem(cp, NULL, x) != 0 || tlc_tls_new(cp, kp, &g_tls, err, sizeof(err)) != 0) {
    fprintf(stderr, "fuzz_tls: set-up failed: %s\n", err);
    abort();
  }
  unlink(kp);
  unlink(cp);
  X509_free(x);
  EVP_PKEY_free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_tls_conn_t *c;
  uint8_t buf[16384];
  size_t off = 1, step;
  int ready = 0;
  if (g_tls == NULL)
    setup();
  if (size < 1)
    return 0;
  step = (size_t)(data[0] % 64) * 37 + 1;
  c = tlc_tls_conn_new(g_tls);
  if (c == NULL)
    return 0;
  while (off < size) {
    size_t n = size - off < step ? size - off : step;
    if (tlc_tls_conn_feed(c, data + off, n) != 0)
      break;
    off += n;
    if (!ready) {
      int r = tlc_tls_conn_handshake(c, (char *)buf, sizeof(buf));
      if (r < 0)
        break;
      ready = r == 1;
    }
    if (ready) {
      int k;
      while ((k = tlc_tls_conn_read(c, buf, sizeof(buf))) > 0)
        ;
      if (k < 0)
        break;
    }
    while (tlc_tls_conn_take(c, buf, sizeof(buf)) > 0)
      ;
  }
  while (tlc_tls_conn_take(c, buf, sizeof(buf)) > 0)
    ;
  tlc_tls_conn_free(c);
  return 0;
}
