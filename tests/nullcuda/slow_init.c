/* libslowinit.so: a library whose constructor takes SLOWINIT_MS milliseconds (default 60). The
 * loader runs constructors under its lock (dl_load_lock), so a thread that dlopens this library
 * holds that lock for that long: what a program's own dlopen of a large library does. The
 * scenario fork_loader uses it to hold a shim's lookup in flight across a fork. */
#include <stdlib.h>
#include <time.h>

__attribute__((constructor)) static void slow_init(void) {
    const char *ms = getenv("SLOWINIT_MS");
    long n = ms ? atol(ms) : 60;
    struct timespec t = {n / 1000, (n % 1000) * 1000000L};
    nanosleep(&t, NULL);
}
