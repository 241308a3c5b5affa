/* gen_man.c - the build's man page generator: copies an mdoc template and puts the [daemon] keys
 * of the settings table (tlc_config_man) where a line reads `.\" @DAEMON_KEYS@`.
 *
 * Usage: tlc_gen_man TEMPLATE OUTPUT ini|options. Exits 0, or 1 with a message (the template
 * has no such line, or a file cannot be read or written).
 */
#include "config/config.h"

#include "base/out.h"

#include <stdio.h>
#include <string.h>

#define MARK ".\\\" @DAEMON_KEYS@"

int main(int argc, char **argv) {
  char line[4096];
  tlc_out_t keys;
  FILE *in, *out;
  int found = 0, rc = 0;
  if (argc != 4 || (strcmp(argv[3], "ini") != 0 && strcmp(argv[3], "options") != 0)) {
    fprintf(stderr, "usage: tlc_gen_man TEMPLATE OUTPUT ini|options\n");
    return 1;
  }
  tlc_out_init(&keys, 1u << 20, NULL, NULL);
  if (tlc_config_man(&keys, strcmp(argv[3], "options") == 0) != 0) {
    fprintf(stderr, "tlc_gen_man: cannot list the keys\n");
    return 1;
  }
  if ((in = fopen(argv[1], "r")) == NULL || (out = fopen(argv[2], "w")) == NULL) {
    perror(argv[1]);
    return 1;
  }
  while (fgets(line, sizeof(line), in) != NULL) {
    if (strncmp(line, MARK, strlen(MARK)) == 0) {
      fwrite(keys.buf, 1, keys.len, out);
      found = 1;
    } else {
      fputs(line, out);
    }
  }
  fclose(in);
  if (fclose(out) != 0) {
    perror(argv[2]);
    rc = 1;
  }
  if (!found) {
    fprintf(stderr, "tlc_gen_man: %s has no line %s\n", argv[1], MARK);
    rc = 1;
  }
  tlc_out_fini(&keys);
  return rc;
}
