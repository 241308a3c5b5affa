/* format.c - the names of the live formats (dec.h: tlc_format_name, tlc_format_parse), a leaf
 * that the decoders and the dispatcher in dec.c both use. Pure.
 */
#include "formats/dec.h"

#include <string.h>

const char *tlc_format_name(tlc_format_t f) {
  switch (f) {
  case TLC_FMT_BIN10:
    return "bin10";
  case TLC_FMT_BIN11:
    return "bin11";
  case TLC_FMT_EVLOG:
    return "evlog";
  default:
    return "none";
  }
}

tlc_format_t tlc_format_parse(const char *name) {
  if (strcmp(name, "bin10") == 0)
    return TLC_FMT_BIN10;
  if (strcmp(name, "bin11") == 0)
    return TLC_FMT_BIN11;
  if (strcmp(name, "evlog") == 0)
    return TLC_FMT_EVLOG;
  return TLC_FMT_NONE;
}
