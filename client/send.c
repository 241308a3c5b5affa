/* send.c - `tlcap send FILE --target NAME --format bin10|bin11|evlog [--rate N] [--loop]`: a
 * target simulator. It connects to the daemon's ingest port (default 127.0.0.1:7411, not the
 * subscriber port), sends the preamble `TLCAP/1 target=NAME format=F` and then FILE's bytes
 * (read whole, at most 2 GiB): with --rate paced in slices of ~10 ms worth of 24-byte records
 * against a monotonic schedule, with --loop again and again until interrupted. Then it
 * half-closes and waits (about 10 s at most) for the daemon to close.
 */
#include "cli.h"

#include "tlc_alloc.h"
#include "tlc_err.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A blocking socket to a target listener, through the client's one dialer. */
static int dial_tcp(const char *addr, int *fd_out, char *err, size_t errlen) {
  int fd;
  if (tlc_client_dial(addr, -1, "listening for targets", &fd, err, errlen) < 0)
    return -1;
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    snprintf(err, errlen, "%s: %s", addr, strerror(errno));
    close(fd);
    return -1;
  }
  *fd_out = fd;
  return 0;
}

static int send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

int tlc_cli_send(int argc, char **argv) {
  const char *file = NULL, *target = NULL, *format = NULL, *to = "127.0.0.1:7411";
  double rate = 0;
  int loop = 0, i, fd = -1, status = 0;
  char *data = NULL, err[512], pre[300];
  size_t len = 0;
  uint64_t sent = 0, events = 0;
  int r, o;
  static const struct option lo[] = { { "target", required_argument, NULL, 't' },
                                      { "format", required_argument, NULL, 'f' },
                                      { "rate", required_argument, NULL, 'r' },
                                      { "to", required_argument, NULL, 'T' },
                                      { "loop", no_argument, NULL, 'l' },
                                      { "help", no_argument, NULL, 'h' },
                                      { NULL, 0, NULL, 0 } };
  tlc_cli_opt_reset();
  while ((o = tlc_cli_next_opt(argc, argv, ":ht:f:", lo)) != -1) {
    if (o == 't') {
      target = optarg;
    } else if (o == 'f') {
      format = optarg;
    } else if (o == 'T') {
      to = optarg;
    } else if (o == 'r') {
      char *end;
      rate = strtod(optarg, &end);
      if (*end != 0 || rate <= 0) {
        fprintf(stderr, "tlcap send: --rate wants a positive number of events per second\n");
        return EXIT_USAGE;
      }
    } else if (o == 'l') {
      loop = 1;
    } else if (o == '?') {
      return EXIT_USAGE;
    } else {
      printf("usage: tlcap send FILE --target NAME --format bin10|bin11|evlog\n"
             "                  [--rate EVENTS/S] [--loop] [--to HOST:PORT]\n"
             "A target simulator: connects to tlcapd's ingest port (default 127.0.0.1:7411),\n"
             "sends the preamble `TLCAP/1 target=NAME format=F` and then FILE's bytes.\n"
             "--rate limits bin10/bin11 records per second; --loop repeats the file until\n"
             "interrupted. Without --loop it half-closes and waits for the daemon to close.\n");
      return 0;
    }
  }
  for (i = optind; i < argc; i++) {
    const char *a = argv[i];
    if (file == NULL)
      file = a;
    else {
      fprintf(stderr, "tlcap send: unexpected argument %s\n", a);
      return EXIT_USAGE;
    }
  }
  if (file == NULL || target == NULL || format == NULL) {
    fprintf(stderr, "usage: tlcap send FILE --target NAME --format bin10|bin11|evlog "
                    "[--rate EVENTS/S] [--loop] [--to HOST:PORT]\n");
    return EXIT_USAGE;
  }
  if (strcmp(format, "bin10") != 0 && strcmp(format, "bin11") != 0 &&
      strcmp(format, "evlog") != 0) {
    fprintf(stderr, "tlcap send: unknown --format %s (bin10, bin11 or evlog)\n", format);
    return EXIT_USAGE;
  }
  if (rate > 0 && strcmp(format, "evlog") == 0) {
    fprintf(stderr, "tlcap send: --rate applies to bin10/bin11 records only\n");
    return EXIT_USAGE;
  }
  if (strlen(target) == 0 || strlen(target) > 128 || strpbrk(target, " \t\r\n") != NULL) {
    fprintf(stderr, "tlcap send: bad --target name\n");
    return EXIT_USAGE;
  }
  if ((r = tlc_cli_read_file(file, &data, &len, (size_t)1 << 31)) < 0) {
    fprintf(stderr, "tlcap send: %s: %s\n", file, tlc_strerror(r));
    return EXIT_BAD;
  }
  if (dial_tcp(to, &fd, err, sizeof(err)) < 0) {
    fprintf(stderr, "tlcap send: %s\n", err);
    tlc_free(data);
    return EXIT_BAD;
  }
  snprintf(pre, sizeof(pre), "TLCAP/1 target=%s format=%s\n", target, format);
  if (send_all(fd, pre, strlen(pre)) < 0)
    goto write_failed;
  do {
    if (rate <= 0 || len < 24) {
      if (send_all(fd, data, len) < 0)
        goto write_failed;
      sent += len;
      events += strcmp(format, "evlog") == 0 ? 0 : len / 24;
    } else {
      /* Pace in slices of ~10 ms worth of records against a monotonic schedule. */
      struct timespec t0, now;
      size_t nrec = len / 24, done = 0, slice = (size_t)(rate / 100) + 1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      while (done < nrec && !tlc_cli_stop) {
        size_t k = nrec - done < slice ? nrec - done : slice;
        double due, el;
        if (send_all(fd, data + done * 24, k * 24) < 0)
          goto write_failed;
        done += k;
        sent += k * 24;
        events += k;
        due = (double)done / rate;
        clock_gettime(CLOCK_MONOTONIC, &now);
        el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
        if (due > el) {
          double d = due - el;
          struct timespec ts = { (time_t)d, (long)((d - (double)(time_t)d) * 1e9) };
          nanosleep(&ts, NULL); /* rate limiting */
        }
      }
      if (len % 24 != 0 && !loop && send_all(fd, data + nrec * 24, len % 24) < 0)
        goto write_failed;
    }
  } while (loop && !tlc_cli_stop);
  fprintf(stderr, "tlcap send: %llu bytes (%llu records) sent to %s as %s\n",
          (unsigned long long)sent, (unsigned long long)events, to, target);
  /* Half-close and wait (bounded) for the daemon to close once it has taken everything. */
  shutdown(fd, SHUT_WR);
  {
    struct pollfd pf = { fd, POLLIN, 0 };
    char sink[256];
    int waited = 0;
    while (waited < 100 && poll(&pf, 1, 100) >= 0) {
      ssize_t k;
      if (!(pf.revents & (POLLIN | POLLHUP))) {
        waited++;
        continue;
      }
      k = recv(fd, sink, sizeof(sink), 0);
      if (k <= 0)
        break;
    }
  }
  close(fd);
  tlc_free(data);
  return status;
write_failed:
  fprintf(stderr, "tlcap send: %s: connection closed by the daemon after %llu bytes (%s)\n", to,
          (unsigned long long)sent, strerror(errno));
  close(fd);
  tlc_free(data);
  return EXIT_BAD;
}
