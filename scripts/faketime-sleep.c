/* Loaded before libfaketime on the test hosts (tests/testhosts.py, scripts/bare.sh hostlayer).
 *
 * The hosts shift the wall clock only (FAKETIME_DONT_FAKE_MONOTONIC=1: a shifted monotonic
 * clock makes libfaketime 0.9.10 hang Python's timed lock waits, sem_clockwait). In that mode
 * libfaketime 0.9.10 answers EINVAL to every absolute sleep on CLOCK_MONOTONIC, which is how
 * Python's time.sleep sleeps (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)). Sleeps on the
 * clocks libfaketime leaves alone go straight to the kernel here; any other clock goes on to
 * libfaketime, which converts its fake deadline. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
