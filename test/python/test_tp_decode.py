"""scripts/tp-decode without torch: the head shares, the argument checks
and the packages subcommand (the run itself needs torch.distributed: it ran
on the H200, docs/Performance.md)."""

import importlib.util
import os
import subprocess
import sys
from importlib.machinery import SourceFileLoader

import pytest

import mla

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts",
                      "tp-decode")
_loader = SourceFileLoader("tp_decode", SCRIPT)
tp = importlib.util.module_from_spec(
    importlib.util.spec_from_loader("tp_decode", _loader))
_loader.exec_module(tp)


@pytest.mark.parametrize("heads,ranks", [(128, 1), (128, 2), (128, 3),
                                         (128, 8), (7, 3), (16, 16)])
def test_shares_cover_the_heads_in_order(heads, ranks):
    parts = tp.shares(heads, ranks)
    assert len(parts) == ranks
    assert sum(c for _, c in parts) == heads
    assert all(o == sum(c for _, c in parts[:r])
               for r, (o, _) in enumerate(parts))
    assert max(c for _, c in parts) - min(c for _, c in parts) <= 1


def test_shares_of_128_over_3():
    assert tp.shares(128, 3) == [(0, 43), (43, 43), (86, 42)]


@pytest.mark.parametrize("argv,message", [
    (["--ragged", "5"], "--ragged: expected MIN:MAX"),
    (["--ragged", "9:3"], "need 0 <= MIN <= MAX"),
    (["--heads", "0"], "--heads must be >= 1"),
])
def test_bad_arguments_name_the_option(argv, message, capsys):
    with pytest.raises(SystemExit):
        tp.parse_args(argv)
    assert message in capsys.readouterr().err


def test_packages_are_the_shares_kernels(tmp_path):
    subprocess.run([sys.executable, SCRIPT, "packages", str(tmp_path),
                    "--target", "host", "--heads", "6", "--ranks", "1,4"],
                   check=True, capture_output=True)
    want = {mla.package_name("decode", "host",
                             **tp.package_flags(h, dict(page_size=64,
                                                        q_len=1)))
            for h in (6, 2, 1)}
    assert set(os.listdir(tmp_path)) == want
