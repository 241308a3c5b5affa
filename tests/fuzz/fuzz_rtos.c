/* fuzz_rtos.c - libFuzzer harness for the winIDEA RTOS description reader (formats/rtos.h,
 * expat through tlc_malloc): any bytes are parsed, with and without task names; must never
 * crash, leak or expand entities, and every refusal carries a reason. A description that reads
 * gives a pack whose classification of any value is one of the three answers. */
#include "formats/rtos.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_ctxpack_t p;
  tlc_mapping_t m;
  tlc_parse_err_t e;
  uint64_t task;
  int r;
  tlc_mapping_init(&m);
  m.max_areas = 4096;
  r = tlc_rtos_parse((const char *)data, size, &p, &m, &e);
  if (r != 0 && e.reason[0] == '\0')
    abort();
  if (r == 0) {
    if (!tlc_ctxpack_on(&p) || p.nrun == 0)
      abort();
    if (tlc_ctxpack_classify(&p, size > 8 ? *(const uint64_t *)(const void *)data : 0, &task) >
        TLC_CTXPACK_STOP)
      abort();
  }
  tlc_mapping_finish(&m);
  tlc_mapping_fini(&m);
  (void)tlc_rtos_parse((const char *)data, size, &p, NULL, &e);
  return 0;
}
