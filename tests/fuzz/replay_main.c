/* replay_main.c - runs a libFuzzer harness over every file of a corpus directory once.
 *
 * Linked with each harness in builds without libFuzzer (gcc, Release), so the committed corpora
 * are regression tests everywhere; the sanitizer build runs the real fuzzers.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf;
  long n;
  if (f == NULL)
    return -1;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return -1;
  }
  buf = malloc((size_t)n + 1);
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    fclose(f);
    return -1;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, (size_t)n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int i, files = 0;
  for (i = 1; i < argc; i++) {
    DIR *d = opendir(argv[i]);
    struct dirent *e;
    if (d == NULL) {
      if (run_file(argv[i]) != 0) {
        fprintf(stderr, "cannot read %s\n", argv[i]);
        return 1;
      }
      files++;
      continue;
    }
    while ((e = readdir(d)) != NULL) {
      char path[4096];
      if (e->d_name[0] == '.')
        continue;
      snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
      if (run_file(path) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        closedir(d);
        return 1;
      }
      files++;
    }
    closedir(d);
  }
  printf("replayed %d inputs\n", files);
  return files > 0 ? 0 : 1;
}
