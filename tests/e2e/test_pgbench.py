"""pgbench through the proxy (simple protocol): read-only and simple-update runs end without errors.
(The `bench` fixture, pgbench's tables, is in conftest.py: issue 18's tests use it too.)"""

import re
import subprocess

def run_pgbench(proxy, *args):
    cmd = ["pgbench", "-n", "-M", "simple", "-c", "4", "-j", "2", "-T", "4",
           "-h", "127.0.0.1", "-p", str(proxy.port), "-U", "app_trust", *args, "app"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    processed = int(re.search(r"number of transactions actually processed: (\d+)", out.stdout).group(1))
    failed = re.search(r"number of failed transactions: (\d+)", out.stdout)
    assert failed is None or int(failed.group(1)) == 0, out.stdout
    assert processed > 0
    return processed, out.stdout


# A session's first read has no target; each later one has what the earlier ones saw on the
# standby (S-1a), and the standby is known caught up to it.
ON_STANDBY = ("READ_NO_TARGET", "READ_CAUGHT_UP")


def test_pgbench_select_only(bench, proxy):
    before = proxy.stats()["reason"]
    processed, _ = run_pgbench(proxy, "-S")
    after = proxy.stats()["reason"]
    on_standby = sum(after.get(r, 0) - before.get(r, 0) for r in ON_STANDBY)
    assert on_standby >= processed * 0.9  # the point selects ran on the standby


def test_pgbench_simple_update(bench, proxy):
    processed, _ = run_pgbench(proxy, "-b", "simple-update")
    assert processed > 0
