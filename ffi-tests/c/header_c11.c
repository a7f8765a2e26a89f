/* The header compiles as C11 with -Wall -Wextra -Wpedantic -Werror (build.rs), and its names
 * are usable from C. */
#include "polarsplit.h"

int ctest_header_c11(void);

int ctest_header_c11(void) {
    polarsplit_status st = POLARSPLIT_OK;
    uint32_t abi = POLARSPLIT_ABI_VERSION;
    return (st == 0 && abi == polarsplit_abi_version()) ? 0 : __LINE__;
}
