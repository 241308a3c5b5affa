/* fuzz_preamble.c - libFuzzer harness for the stream preamble parser (formats/preamble.c).
 *
 * Checks, for every prefix length a network peer could deliver: no read past the input (ASan),
 * a result in range, a parsed line no longer than the input or TLC_PREAMBLE_MAX, a valid name,
 * and that the answer for a prefix is consistent with the answer for the whole input (a prefix
 * never says OK or NONE when the whole says something else).
 */
#include "formats/preamble.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_preamble_t whole, p;
  char why[128];
  size_t i, max_name = size > 0 ? (size_t)(data[0] % 130) : 64;
  const char *buf;
  int rw, eof;
  if (size > 0) {
    data++;
    size--;
  }
  buf = (const char *)data;
  for (eof = 0; eof <= 1; eof++) {
    rw = tlc_preamble_parse(buf, size, eof, max_name, &whole, why, sizeof(why));
    if (rw < TLC_PRE_NONE || rw > TLC_PRE_BAD)
      abort();
    if (rw == TLC_PRE_OK) {
      if (whole.length == 0 || whole.length > size || whole.length > TLC_PREAMBLE_MAX)
        abort();
      if (whole.has_name && tlc_target_name_valid(whole.name, TLC_NAME_MAX) != 0)
        abort();
    }
    if (rw == TLC_PRE_MORE && eof)
      abort(); /* at the end of the stream the answer is final */
  }
  rw = tlc_preamble_parse(buf, size, 0, max_name, &whole, why, sizeof(why));
  for (i = 0; i <= size && i <= TLC_PREAMBLE_MAX + 8; i++) {
    int r = tlc_preamble_parse(buf, i, 0, max_name, &p, why, sizeof(why));
    if ((r == TLC_PRE_NONE || r == TLC_PRE_OK || r == TLC_PRE_BAD) && r != rw)
      abort();
    if (r == TLC_PRE_OK && memcmp(&p, &whole, sizeof(p)) != 0)
      abort();
  }
  return 0;
}
