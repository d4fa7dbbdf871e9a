// SPDX-License-Identifier: Apache-2.0
/*
 * read_reports: prints the ORCA load reports headroomd publishes, through the
 * C interface of libheadroom-orca (headroom_orca.h). See README.md.
 *
 *   read_reports [-f] [-e ENDPOINT] [DIR]     DIR defaults to /run/orca
 *
 * Without -f: one line per scope, then exit (0 if any scope was found).
 * With -e ENDPOINT: only the report of this process's own instance of that
 * [[endpoint]] (the servers of its network namespace: its pod, or the host),
 * as a server reads its own load.
 * With -f: also follow changes, the way an event loop would: poll() the
 * reader's descriptor, let the library apply the change, print it from the
 * callback. Staleness depends on the clock, not only on events, so every
 * scope is printed again after a quiet second.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <headroom/orca/headroom_orca.h>

static void print_scope(headroom_reader *reader, const char *scope) {
  headroom_report rep;
  char why[512];
  double pressure = 0;
  int rc;

  memset(&rep, 0, sizeof rep);
  rep.struct_size = sizeof rep; /* what this program was built with */
  rc = headroom_reader_get(reader, scope, &rep, why, sizeof why);
  if (rc < 0) {
    printf("%-20s no valid report: %s\n", scope, why);
    return;
  }
  printf("%-20s seq=%llu app=%.3f cpu=%.3f mem=%.3f", scope, (unsigned long long)rep.seq,
         rep.application_utilization, rep.cpu_utilization, rep.mem_utilization);
  if (headroom_reader_utilization(reader, scope, "cpu.pressure", &pressure) >= 0)
    printf(" cpu.pressure=%.3f", pressure);
  printf(" age=%lldms", (long long)rep.age_ms);
  /* Fail open: a stale report is no information, not "idle" nor "overloaded". */
  if (rc == 0)
    printf(" fresh\n");
  else
    printf(" STALE (%s)\n", why);
}

static int print_all(headroom_reader *reader) {
  char name[256];
  int i;
  const int n = headroom_reader_scope_count(reader);
  for (i = 0; i < n; ++i) {
    const int len = headroom_reader_scope_name(reader, (size_t)i, name, sizeof name);
    if (len >= 0 && (size_t)len < sizeof name) print_scope(reader, name);
  }
  return n;
}

static void on_change(void *user, const char *scope) { print_scope((headroom_reader *)user, scope); }

/* This process's own instance of `endpoint`, found again at every call: its
   file may appear after the reader opened, or be replaced. */
static int print_own(headroom_reader *reader, const char *endpoint) {
  char scope[256];
  char why[1024];
  const int len = headroom_reader_own_instance(reader, endpoint, scope, sizeof scope, why, sizeof why);
  if (len < 0) {
    printf("%-20s no instance here: %s\n", endpoint, why);
    return 0;
  }
  if ((size_t)len >= sizeof scope) return 0;
  print_scope(reader, scope);
  return 1;
}

int main(int argc, char **argv) {
  const char *dir = "/run/orca";
  const char *endpoint = NULL;
  int follow = 0;
  int arg;
  char err[512];
  headroom_reader *reader;
  int found;

  for (arg = 1; arg < argc; ++arg) {
    if (strcmp(argv[arg], "-f") == 0) {
      follow = 1;
    } else if (strcmp(argv[arg], "-e") == 0 && arg + 1 < argc) {
      endpoint = argv[++arg];
    } else if (argv[arg][0] == '-' || arg != argc - 1) {
      fprintf(stderr, "usage: %s [-f] [-e ENDPOINT] [DIR]\n", argv[0]);
      return 2;
    } else {
      dir = argv[arg];
    }
  }

  /* 0: the default staleness, 3 sampling intervals (at least one second). */
  reader = headroom_reader_open(dir, 0, err, sizeof err);
  if (reader == NULL) {
    fprintf(stderr, "read_reports: %s\n", err);
    return 2;
  }
  printf("headroom-orca %s, %s\n", headroom_orca_version(), dir);
  found = endpoint != NULL ? print_own(reader, endpoint) : print_all(reader);
  if (!follow) {
    headroom_reader_close(reader);
    if (found == 0) fprintf(stderr, "read_reports: no reports in %s\n", dir);
    return found > 0 ? 0 : 1;
  }

  if (endpoint == NULL) headroom_reader_set_callback(reader, on_change, reader);
  for (;;) {
    struct pollfd p;
    int n;
    p.fd = headroom_reader_fd(reader);
    p.events = POLLIN;
    p.revents = 0;
    n = poll(&p, 1, 1000);
    if (n < 0 && errno != EINTR) {
      perror("poll");
      break;
    }
    if (n > 0) {
      if (headroom_reader_process(reader) < 0) break; /* prints through on_change */
      if (endpoint != NULL) print_own(reader, endpoint);
    } else if (n == 0) {
      if (endpoint != NULL)
        print_own(reader, endpoint);
      else
        print_all(reader);
    }
  }
  headroom_reader_close(reader);
  return 1;
}
