// The header compiles as C++17 with -Wall -Wextra -Wpedantic -Werror (build.rs) and links with
// C linkage.
#include "polarsplit.h"

extern "C" int ctest_header_cxx(void);

extern "C" int ctest_header_cxx(void) {
    polarsplit_status st = POLARSPLIT_OK;
    polarsplit_session *s = nullptr;
    polarsplit_session_free(s);
    return (st == POLARSPLIT_OK && polarsplit_abi_version() == POLARSPLIT_ABI_VERSION) ? 0 : __LINE__;
}
