/* walk_cache_sites: one loop calls 12 allocation sites in turn, 20 rounds: the same stack
 * pointer and frame sizes every time, 12 different return addresses in one slot (more than a
 * set of the walk cache holds). Block sizes say the site: 100 * (n + 1) bytes from site_n.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

static CUdeviceptr blocks[240];
static int count;

#define SITE_FN(n)                                                                              \
    SITE void site_##n(void) {                                                                   \
        CHECK(cuMemAlloc_v2(&blocks[count++], 100 * (n + 1)));                                   \
        KEEP(count);                                                                             \
    }
SITE_FN(0) // @site_0
SITE_FN(1) // @site_1
SITE_FN(2) // @site_2
SITE_FN(3) // @site_3
SITE_FN(4) // @site_4
SITE_FN(5) // @site_5
SITE_FN(6) // @site_6
SITE_FN(7) // @site_7
SITE_FN(8) // @site_8
SITE_FN(9) // @site_9
SITE_FN(10) // @site_10
SITE_FN(11) // @site_11

typedef void (*site)(void);

int main(void) {
    CHECK(cuInit(0));
    site sites[12] = {site_0, site_1, site_2, site_3, site_4, site_5,
                      site_6, site_7, site_8, site_9, site_10, site_11};
    for (int round = 0; round < 20; round++)
        for (int i = 0; i < 12; i++)
            sites[i]();
    printf("%d blocks\n", count);
    return 0;
}
