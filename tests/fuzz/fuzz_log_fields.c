/* fuzz_log_fields.c - libFuzzer harness for the journal field extraction (base/log.c,
 * tlc_log_fields). Log lines carry peer-controlled text (target names from preambles,
 * addresses, paths), so the parser of the line's conventions is fuzzed like a decoder.
 *
 * The first byte picks the component; the rest, up to a NUL and at most 1 KiB (a log line's
 * cap), with control characters replaced by '?' as tlc_log does before anything else sees
 * the line, is the message. Checks: every field is terminated inside its array, holds no space or
 * control character, and occurs in the message; a target is made of name characters only.
 */
#include "base/log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *msg, const char *field, size_t cap, int name) {
  size_t n = strnlen(field, cap);
  if (n == cap)
    abort(); /* not terminated */
  if (n > 0 && strstr(msg, field) == NULL)
    abort(); /* not taken from the message */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)field[i];
    if (c <= ' ' || c == 0x7f)
      abort();
    if (name && strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-@:#+=[]/",
                       c) == NULL)
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const unsigned comps[] = { TLC_LOGC_MAIN,   TLC_LOGC_TCP,    TLC_LOGC_DIAL,
                                    TLC_LOGC_SERIAL, TLC_LOGC_TARGET, TLC_LOGC_PUBSUB,
                                    TLC_LOGC_STORE };
  char msg[1024];
  tlc_log_fields_t f;
  unsigned comp;
  size_t n;
  if (size == 0)
    return 0;
  comp = comps[data[0] % (sizeof(comps) / sizeof(comps[0]))];
  n = size - 1 < sizeof(msg) - 1 ? size - 1 : sizeof(msg) - 1;
  memcpy(msg, data + 1, n);
  msg[n] = '\0';
  for (char *c = msg; *c != '\0'; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      *c = '?';
  tlc_log_fields(msg, comp, &f);
  check(msg, f.target, sizeof(f.target), 1);
  check(msg, f.peer, sizeof(f.peer), 0);
  check(msg, f.segment, sizeof(f.segment), 0);
  check(msg, f.device, sizeof(f.device), 0);
  return 0;
}
