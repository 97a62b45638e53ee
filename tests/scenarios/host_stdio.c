/* host_stdio: what the program does with its standard descriptors must not change under the
 * shim. Leaves one 4096-byte block, then acts on argv[1]:
 *   quiet        prints "done" on stdout (buffered: flushed by exit, after the shim's handler)
 *   stderr TEXT  writes TEXT to fd 2 with write(2), waits 300 ms, prints "done"
 *   open FILE    opens FILE (the lowest free descriptor: 2 when fd 2 was closed), writes
 *                "data\n" to it, leaves it open, prints "done"
 * and returns 0. Writes to a closed fd 2 fail quietly, as they would without the shim.
 * build: -lcudart */
#include "nullcudart.h"
#include "scenario.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static void *block;

SITE void alloc_block(void) {
    CHECK(cudaMalloc(&block, 4096)); // @stdio_alloc
    KEEP(block);
}

int main(int argc, char **argv) {
    alloc_block();
    if (argc > 2 && strcmp(argv[1], "stderr") == 0) {
        if (write(2, argv[2], strlen(argv[2])) < 0) {
            /* fd 2 closed: nothing to say, as without the shim */
        }
        usleep(300 * 1000);
    } else if (argc > 2 && strcmp(argv[1], "open") == 0) {
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, "data\n", 5) != 5)
            return 98;
    }
    printf("done\n");
    return 0;
}
