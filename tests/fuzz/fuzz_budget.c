/* fuzz_budget.c - libFuzzer harness for the budget file reader (formats/budget.h): any bytes
 * are parsed; must never crash or leak, every refusal names where and why, and every budget
 * that reads is complete (tlc_tbudget_check passes) with a unique name. */
#include "formats/budget.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_tbudget_set_t s;
  char err[512];
  size_t i;
  int r;
  tlc_tbudget_set_init(&s);
  err[0] = '\0';
  r = tlc_tbudget_parse(&s, (const char *)data, size, "fuzz", err, sizeof(err));
  if (r == -1 && (strncmp(err, "fuzz:", 5) != 0 || s.n != 0))
    abort();
  if (r == 0)
    for (i = 0; i < s.n; i++)
      if (tlc_tbudget_check(&s.b[i], err, sizeof(err)) != 0 ||
          tlc_tbudget_set_find(&s, s.b[i].name) != (long)i)
        abort();
  tlc_tbudget_set_fini(&s);
  return 0;
}
