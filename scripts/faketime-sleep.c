/* Loaded before libfaketime on every process of a test host (its /etc/ld.so.preload:
 * tests/testhosts.py, scripts/bare.sh hostlayer), to give the host a shifted wall clock and
 * nothing else, whatever the process's environment:
 *
 * - getenv("FAKETIME_DONT_FAKE_MONOTONIC") is "1" for libfaketime (whose setting is an
 *   environment variable, and Juice's host agent starts servers with a clean environment):
 *   a shifted monotonic clock makes libfaketime 0.9.10 hang Python's timed lock waits
 *   (sem_clockwait), and a real host's monotonic clock is never compared across hosts;
 * - in that mode libfaketime 0.9.10 answers EINVAL to every absolute sleep on CLOCK_MONOTONIC,
 *   which is how Python's time.sleep sleeps (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)):
 *   sleeps on the clocks it leaves alone go straight to the kernel here, any other clock goes on
 *   to libfaketime, which converts its fake deadline;
 * - libfaketime's shared memory (/dev/shm/faketime_*, the host's own /dev/shm) is not unlinked
 *   at exit: sshd's pre-authentication child runs under a seccomp filter that kills it
 *   (SIGSYS) for that unlink. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

char *getenv(const char *name) {
    if (strcmp(name, "FAKETIME_DONT_FAKE_MONOTONIC") == 0) return "1";
    size_t n = strlen(name);
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    }
    return NULL;
}

typedef int (*sleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);

int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem) {
    if (clk == CLOCK_MONOTONIC || clk == CLOCK_MONOTONIC_RAW || clk == CLOCK_BOOTTIME) {
        return syscall(SYS_clock_nanosleep, clk, flags, req, rem) == 0 ? 0 : errno;
    }
    static sleep_fn next;
    if (next == NULL) {
        next = (sleep_fn)dlsym(RTLD_NEXT, "clock_nanosleep");
        if (next == NULL) return ENOSYS;
    }
    return next(clk, flags, req, rem);
}

typedef int (*unlink_fn)(const char *);

static int unlink_unless_faketime(const char *name, const char *sym) {
    if (strncmp(name, "/faketime_", 10) == 0 || strncmp(name, "faketime_", 9) == 0) return 0;
    unlink_fn next = (unlink_fn)dlsym(RTLD_NEXT, sym);
    if (next == NULL) { errno = ENOSYS; return -1; }
    return next(name);
}

int sem_unlink(const char *name) { return unlink_unless_faketime(name, "sem_unlink"); }
int shm_unlink(const char *name) { return unlink_unless_faketime(name, "shm_unlink"); }
