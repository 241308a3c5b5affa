/* mapping.c - `tlcap mapping TARGET FILE`: sends FILE (a Text1 or XML export with a mapping
 * section) for the daemon to load as TARGET's area names. The daemon parses it; here FILE is
 * only read (at most 64 MiB) and held against the daemon's request limit from its Welcome.
 */
#include "client/cli.h"

#include "base/alloc.h"
#include "base/err.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

int tlc_cli_mapping(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__LoadMapping lm = TLCAP__LOAD_MAPPING__INIT;
  Tlcap__ServerMessage *m;
  tlc_client_t *c;
  char *data = NULL;
  size_t len = 0;
  int status = 0, r;
  if (tlc_cli_help_only_opts(argc, argv,
                             "usage: tlcap [--connect ADDR] mapping TARGET FILE\n"
                             "Loads area names from FILE (a Text1 or XML export with a mapping "
                             "section) for\nTARGET.\n",
                             &status))
    return status;
  if (tlc_cli_operands(argc, 2, 2, "tlcap mapping TARGET FILE") < 0)
    return EXIT_USAGE;
  argv += optind - 1;
  if ((r = tlc_cli_read_file(argv[2], &data, &len, 64u << 20)) < 0) {
    fprintf(stderr, "tlcap mapping: %s: %s\n", argv[2], tlc_strerror(r));
    return EXIT_BAD;
  }
  if ((c = tlc_cli_connect("tlcap mapping", &status)) == NULL) {
    tlc_free(data);
    return status;
  }
  if (tlc_client_welcome(c) != NULL && len + 1024 > tlc_client_welcome(c)->max_request_bytes) {
    fprintf(stderr, "tlcap mapping: %s: %zu bytes is above the daemon's request limit (%llu)\n",
            argv[2], len, (unsigned long long)tlc_client_welcome(c)->max_request_bytes);
    status = EXIT_BAD;
  } else {
    cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_LOAD_MAPPING;
    cm.load_mapping = &lm;
    lm.target = argv[1];
    lm.mapping.data = (uint8_t *)data;
    lm.mapping.len = len;
    if ((m = tlc_cli_request(c, &cm, &status)) != NULL) {
      printf("mapping loaded for %s\n", argv[1]);
      tlc_client_msg_free(m);
    }
  }
  tlc_client_free(c);
  tlc_free(data);
  return status;
}
