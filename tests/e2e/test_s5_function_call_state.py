"""SPEC S-5 end to end: a FunctionCall message (libpq's fast-path PQfn) runs code the engine cannot
see into, so a capture of the writer session's state is due after it, as after a statement that
calls such a function. Here it is set_config('TimeZone', …, false) by OID: every read after it must
show the new time zone, through the proxy as against the primary alone, and the read before it must
have run on the standby (so the reads after it had a reader to go wrong on)."""

from __future__ import annotations

import pytest

from e2e_support import DRIVERS_BUILD, STANDBY_PORTS, driver_built, run_program

ZONE = "Asia/Tokyo"


def run(dsn: str) -> dict:
    prog = driver_built(DRIVERS_BUILD / "libpq" / "function_call")
    result = run_program([prog, dsn, ZONE], timeout=30, what="libpq function_call")
    assert result["failures"] == 0, result
    return result


@pytest.mark.timeout(60)
def test_s5_a_function_call_that_sets_a_setting_is_captured(pair, proxy):
    direct = run(pair.primary.dsn(user="app_trust", dbname="app"))
    proxied = run(proxy.dsn())
    assert direct["zones"][1:] == [ZONE] * 3, direct
    assert proxied["zones"] == direct["zones"], f"through the proxy {proxied}, the primary alone {direct}"
    assert proxied["ports"][0] in STANDBY_PORTS, f"the first read did not run on the standby: {proxied}"
