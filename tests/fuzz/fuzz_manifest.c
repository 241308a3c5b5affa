/* fuzz_manifest.c - libFuzzer harness for what history reads from a state directory and from
 * a request: a manifest's text (its `wall` arrival index included) through
 * tlc__manifest_parse, and what parses is formatted and parsed again (it must parse); an open
 * segment's <data>.widx entries through tlc__manifest_widx_decode; and a moment's REF and span
 * (formats/moment.h), a violation's REF among them. The first byte picks the part. No crash,
 * no UB, no leak; bounded memory. */
#include "base/alloc.h"
#include "formats/moment.h"
#include "store/seg/seg-int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_manifest_t m;
  char why[200];
  if (size < 1)
    return 0;
  tlc__manifest_init(&m);
  switch (data[0] % 3) {
  case 0:
    if (tlc__manifest_parse(&m, (const char *)data + 1, size - 1, why, sizeof(why)) == 0) {
      size_t n;
      char *text = tlc__manifest_format(&m, &n);
      if (text != NULL) {
        tlc_manifest_t again;
        tlc__manifest_init(&again);
        if (tlc__manifest_parse(&again, text, n, why, sizeof(why)) != 0 || again.nwidx != m.nwidx ||
            again.nidx != m.nidx)
          abort(); /* what we write must read back */
        tlc__manifest_fini(&again);
        tlc_free(text);
      }
    }
    break;
  case 1:
    if (size >= 17) {
      uint64_t b = 0, r = 0;
      memcpy(&b, data + 1, 8);
      memcpy(&r, data + 9, 8);
      m.bytes = b;
      m.records = r;
      (void)tlc__manifest_widx_decode(&m, data + 17, size - 17);
      for (size_t i = 1; i < m.nwidx; i++)
        if (m.widx[i].offset <= m.widx[i - 1].offset || m.widx[i].offset >= m.bytes)
          abort(); /* the invariant readers rely on */
    }
    break;
  default: {
    char buf[256];
    size_t n = size - 1 < sizeof(buf) - 1 ? size - 1 : sizeof(buf) - 1;
    char *nl;
    tlc_moment_t mo;
    int64_t ns;
    memcpy(buf, data + 1, n);
    buf[n] = '\0';
    nl = strchr(buf, '\n');
    if (nl != NULL)
      *nl = '\0';
    if (tlc_moment_parse(buf, nl != NULL ? nl + 1 : NULL, 1700000000000000000ll, &mo, why,
                         sizeof(why)) == 0 &&
        (mo.range.since > mo.range.until || mo.span < 0 || mo.span > TLC_MOMENT_SPAN_MAX_NS))
      abort();
    if (tlc_moment_parse_span(buf, &ns) == 0 && (ns < 0 || ns > TLC_MOMENT_SPAN_MAX_NS))
      abort();
    { /* a violation's REF: a name within its buffer, N >= 1, and its stretch's range */
      char name[64];
      uint64_t vn = 0;
      int k = tlc_moment_parse_vref(buf, name, sizeof(name), &vn, why, sizeof(why));
      if (k == 1 && (vn == 0 || strlen(name) == 0 || strlen(name) >= sizeof(name)))
        abort();
      if (tlc_moment_of_stretch((int64_t)vn, (int64_t)(vn >> 1), 3, nl != NULL ? nl + 1 : NULL, &mo,
                                why, sizeof(why)) == 0 &&
          (mo.range.since > mo.range.until || mo.range.epoch != 3))
        abort();
    }
    break;
  }
  }
  tlc__manifest_fini(&m);
  return 0;
}
