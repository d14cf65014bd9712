"""The `qoslab` command itself: version, help, usage errors."""

import tomllib

from conftest import ROOT


def test_version_is_the_workspace_version(qoslab):
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    done = qoslab("--version", check=True)
    assert done.stdout.strip() == f"qoslab {cargo['workspace']['package']['version']}"


def test_unknown_option_is_a_usage_error_with_exit_2(qoslab):
    done = qoslab("--no-such-option")
    assert done.returncode == 2
    assert "no-such-option" in done.stderr
    assert "Traceback" not in done.stderr
