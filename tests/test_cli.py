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


def test_help_is_never_cut_and_shows_defaults(qoslab):
    done = qoslab("lab", "study", "--help", check=True)
    assert "…" not in done.stdout
    for text in ("--knee-tail-ratio", "[default: 1,2,4,8,16,32,64,128]", "(out/lab/NAME)"):
        assert text in done.stdout, text


def test_help_names_the_studies_as_the_readme_does(qoslab):
    readme = (ROOT / "README.md").read_text()
    done = qoslab("--help", check=True)
    for study in ("study 1", "study 3", "study 5"):
        assert study in readme and study in done.stdout, study


def test_a_mistyped_study_name_is_answered_with_the_name_meant(qoslab):
    done = qoslab("lab", "study", "qd-swep", "--target", "x.img")
    assert done.returncode == 2
    assert done.stderr.strip().endswith("got 'qd-swep' (did you mean qd-sweep?)")


def test_every_option_with_a_value_says_its_default():
    import typer.main

    from qoslab.cli import app

    def options(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from options(sub, [*path, name])
            return
        for p in command.params:
            if p.param_type_name == "option" and not p.is_flag and not p.required:
                yield " ".join(path), p.opts[0], p

    silent = [
        (where, name)
        for where, name, p in options(typer.main.get_command(app), [])
        if p.default in (None, [], ()) and not isinstance(p.show_default, str)
    ]
    assert silent == []


def test_no_help_text_loses_words_to_rich_markup():
    """typer draws help through rich, which reads "[fs]" or "[fabric]" as a style tag and drops
    it: "[fs]'s" printed as "'s" (a help text names a TOML table as "\\[fs]")."""
    import typer.main
    from rich.markup import MarkupError, render

    from qoslab.cli import app

    def texts(command, path):
        yield path, command.help or ""
        for p in command.params:
            yield path, getattr(p, "help", None) or ""
        for name, sub in getattr(command, "commands", {}).items():
            yield from texts(sub, f"{path} {name}")

    def shown(text):
        try:
            return render(text).plain
        except MarkupError as e:
            return str(e)

    lost = [
        (where, text)
        for where, text in texts(typer.main.get_command(app), "qoslab")
        if shown(text) != text.replace("\\[", "[")
    ]
    assert lost == []
