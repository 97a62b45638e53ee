/* own_handlers: installs its own SIGTERM handler (writes "handled", then exit(3)) and SIGUSR1
 * handler (writes "usr1", sets a flag) in main, leaves one 7000-byte block, prints "ready" and
 * waits up to 30 s for SIGUSR1 (exit 4 if none comes); after it prints "done" and exits 0.
 * The shim must not steal either handler: SIGTERM ends it with status 3 and an exit dump,
 * SIGUSR1 writes no snapshot.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static CUdeviceptr block;
static volatile sig_atomic_t got_usr1;

SITE void alloc_block(void) {
    CHECK(cuMemAlloc_v2(&block, 7000)); // @handlers_alloc
    KEEP(block);
}

/* Output is write(2), never stdio: exit() in the handler must find no half-flushed buffer. */
static void say(const char *msg) {
    size_t n = 0;
    while (msg[n])
        n++;
    if (write(STDOUT_FILENO, msg, n) != (ssize_t)n)
        _exit(5);
}

static void on_term(int sig) {
    (void)sig;
    say("handled\n");
    exit(3);
}

static void on_usr1(int sig) {
    (void)sig;
    say("usr1\n");
    got_usr1 = 1;
}

static void install(int sig, void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0)
        exit(97);
}

int main(void) {
    install(SIGTERM, on_term);
    install(SIGUSR1, on_usr1);
    CHECK(cuInit(0));
    alloc_block();
    say("ready\n");
    for (int i = 0; i < 30000 && !got_usr1; i++)
        usleep(1000);
    if (!got_usr1)
        return 4;
    say("done\n");
    return 0;
}
