/* fuzz_mapping_xml.c - libFuzzer harness for the XML mapping reader (expat through tlc_malloc):
 * any bytes are parsed with a small cap on entries; must never crash, leak or expand entities.
 * The input is also run through tlc_mapping_parse, which picks the reader by content. */
#include "formats/mapping.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_mapping_t m;
  tlc_parse_err_t e;
  int r;
  tlc_mapping_init(&m);
  m.max_areas = 4096;
  r = tlc_mapping_parse_xml(&m, (const char *)data, size, &e);
  if (r != 0 && e.reason[0] == '\0')
    abort();
  tlc_mapping_finish(&m);
  tlc_mapping_fini(&m);
  tlc_mapping_init(&m);
  m.max_areas = 4096;
  (void)tlc_mapping_parse(&m, (const char *)data, size, &e);
  tlc_mapping_finish(&m);
  tlc_mapping_fini(&m);
  return 0;
}
