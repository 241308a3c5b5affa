/* preamble.h - the optional first line of a live stream: "TLCAP/1 target=<name> format=<fmt>\n".
 *
 * SPEC section 1: a stream may begin with this one ASCII line; without it the listener's
 * configured name and format apply. This parser decides, from the bytes received so far,
 * whether the stream has a preamble, needs more bytes to tell, or has a bad one, and what it
 * says. It is pure and bounded: it looks at no more than TLC_PREAMBLE_MAX bytes, whatever the
 * input, and allocates nothing. Keys other than target= and format= are ignored (later
 * protocol versions may add some); a repeated key takes its last value.
 */
#ifndef TLC_PREAMBLE_H
#define TLC_PREAMBLE_H

#include "formats/tlc_event.h"

#include <stddef.h>

#define TLC_PREAMBLE_MAX 256 /* the whole line, newline included, at most */
#define TLC_NAME_MAX     128 /* longest target name anywhere in tlcap */

enum tlc_preamble_result {
  TLC_PRE_NONE = 0, /* the stream does not start with "TLCAP/1 ": no preamble */
  TLC_PRE_MORE = 1, /* could still be a preamble: more bytes needed */
  TLC_PRE_OK = 2,   /* a valid preamble: see out */
  TLC_PRE_BAD = 3   /* starts like a preamble but is not a valid one: see why */
};

typedef struct tlc_preamble {
  size_t length; /* bytes the line takes, newline included (TLC_PRE_OK) */
  int has_name;  /* target= given */
  char name[TLC_NAME_MAX + 1];
  tlc_format_t format; /* format= given, else TLC_FMT_NONE */
} tlc_preamble_t;

/* Looks at buf[0..len) (the first bytes of a stream; at_eof: no more will come) and returns a
 * tlc_preamble_result. `max_name` caps the target name (1..TLC_NAME_MAX). On TLC_PRE_BAD, `why`
 * says what is wrong (e.g. "unknown format \"bin12\"", "line longer than 256 bytes"). */
int tlc_preamble_parse(const char *buf, size_t len, int at_eof, size_t max_name,
                       tlc_preamble_t *out, char *why, size_t whylen);

#define TLC_TARGET_NAME_MAX 128 /* hard cap on a target name, bytes without the NUL */

/* 0 if `name` is a valid target name of at most `max` bytes (1..max of A-Z a-z 0-9 and
 * . _ @ : # + = [ ] -, not starting with '.'), else TLC_EINVAL. Names become directory names
 * under the state directory, hence the strict set. */
int tlc_target_name_valid(const char *name, size_t max);

#endif
